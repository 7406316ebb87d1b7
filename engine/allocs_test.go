package engine_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/internal/allocguard"
)

// TestWriteBatchAllocs guards the allocations of a WriteBatch of many
// increments, as the RESP serving loop hands one for many connections'
// commands: the engine's calls are one allocation a batch, not one a
// write, so that what a batch of 64 increments costs, the engine's
// results, fold and flush and the model store's, is under one
// allocation a write.
func TestWriteBatchAllocs(t *testing.T) {
	ctx := context.Background()
	store := MustOpenStore(t)
	e := MustNew(t, store, engine.Config{})
	const n = 64
	ws := make([]shardcounter.Write, n)
	for i := range ws {
		id := "c" + strconv.Itoa(i)
		if _, err := store.CreateCounter(ctx, id, shardcounter.Spec{Shards: 1}); err != nil {
			t.Fatal(err)
		}
		ws[i] = shardcounter.Write{Counter: id, Delta: 1}
	}
	// Today's count is 63 over the model store, 126 with a call
	// allocated a write.
	allocguard.Check(t, 50, n, func() {
		if _, err := e.WriteBatch(ctx, ws); err != nil {
			t.Fatal(err)
		}
	})
}
