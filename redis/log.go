package redis

import (
	"context"
	"fmt"
	"log/slog"

	goredis "github.com/redis/go-redis/v9"
)

// SetClientLog sends the go-redis client's own log lines to l, at debug
// level, for the whole process (go-redis has one logger). The client
// prints them on stderr otherwise, such as "connection pool: failed to
// dial after 1 attempts", next to the error the store returns for the
// same failure: a program with a logger of its own routes them there. A
// nil l discards them.
func SetClientLog(l *slog.Logger) {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	goredis.SetLogger(clientLog{l})
}

// clientLog adapts a *slog.Logger to go-redis's logging interface.
type clientLog struct{ l *slog.Logger }

func (c clientLog) Printf(ctx context.Context, format string, v ...any) {
	c.l.DebugContext(ctx, fmt.Sprintf(format, v...), "component", "redis client")
}
