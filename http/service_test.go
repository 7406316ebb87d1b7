package http_test

import (
	"context"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// newService returns the real engine over store, and a func that closes
// it (committing queued writes).
func newService(tb testing.TB, store shardcounter.CounterStore, autoCreate bool) (shardcounter.CounterService, func()) {
	tb.Helper()
	eng, err := engine.New(store, engine.Config{NoAutoCreate: !autoCreate})
	if err != nil {
		tb.Fatal(err)
	}
	return eng, func() {
		if err := eng.Close(context.Background()); err != nil {
			tb.Error(err)
		}
	}
}
