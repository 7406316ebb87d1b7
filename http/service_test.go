package http_test

import (
	"context"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// serviceOptions choose the engine newService makes.
type serviceOptions struct {
	NoAutoCreate bool
	Async        bool // answer writes once queued
}

// newService returns the real engine over store, and a func that closes
// it (committing queued writes).
func newService(tb testing.TB, store shardcounter.CounterStore, opts serviceOptions) (shardcounter.CounterService, func()) {
	tb.Helper()
	cfg := engine.Config{NoAutoCreate: opts.NoAutoCreate}
	if opts.Async {
		cfg.Durability = engine.Async
	}
	eng, err := engine.New(store, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return eng, func() {
		if err := eng.Close(context.Background()); err != nil {
			tb.Error(err)
		}
	}
}
