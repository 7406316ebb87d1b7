package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// countingApplies counts the store's Apply calls: its commits.
type countingApplies struct {
	shardcounter.CounterStore
	applies atomic.Int64
}

func (s *countingApplies) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	s.applies.Add(1)
	return s.CounterStore.Apply(ctx, incs)
}

// TestExpireJoinsCommit checks that deadline changes (Write.Expire: RESP
// EXPIRE, in MULTI or not) join the group commit of the writes they are
// batched with: a WriteBatch of increments and changes is one store
// commit, in either durability mode; that each change's result says
// whether it was made (false for a name that holds nothing, or a
// condition not met), also in async mode, where it is answered after
// the commit; and that the deadlines are kept.
func TestExpireJoinsCommit(t *testing.T) {
	for _, d := range []engine.Durability{engine.Durable, engine.Async} {
		t.Run(string(d), func(t *testing.T) {
			ctx := context.Background()
			store := &countingApplies{CounterStore: MustOpenStore(t)}
			e := MustNew(t, store, engine.Config{Durability: d, FlushInterval: time.Millisecond})
			if ok, err := e.ExpireCounter(ctx, "warm", time.Now().Add(time.Hour)); err != nil || ok {
				t.Fatalf("EXPIRE of a missing name: %v, %v; want false", ok, err)
			}
			// The store's first deadline writes the marker that deadlines
			// are in use, in a commit of its own before it (expiry).
			if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "warm", Delta: 1}); err != nil {
				t.Fatal(err)
			}
			if ok, err := e.ExpireCounter(ctx, "warm", time.Now().Add(time.Hour)); err != nil || !ok {
				t.Fatalf("EXPIRE warm: %v, %v; want true", ok, err)
			}
			at := time.Now().Add(time.Minute).UnixMilli()
			later := at + 60_000
			ws := []shardcounter.Write{
				{Counter: "k", Delta: 1},
				{Counter: "k", Expire: &shardcounter.ExpireChange{At: at}},
				{Counter: "k2", Delta: 1},
				{Counter: "k2", Expire: &shardcounter.ExpireChange{At: at, Cond: "xx"}}, // none yet: not met
				{Counter: "gone", Expire: &shardcounter.ExpireChange{At: at}},           // holds nothing
				{Counter: "k", Expire: &shardcounter.ExpireChange{At: later, Cond: "gt"}},
			}
			for i := range ws[:len(ws)-1] {
				ws[i].JoinNext = true
			}
			before := store.applies.Load()
			res, err := e.WriteBatch(ctx, ws)
			if err != nil {
				t.Fatal(err)
			}
			want := []bool{true, true, true, false, false, true}
			for i, r := range res {
				if r.Error != nil || r.Applied != want[i] {
					t.Fatalf("write %d (%+v): %+v; want applied %v", i, ws[i], r, want[i])
				}
			}
			if n := store.applies.Load() - before; n != 1 {
				t.Fatalf("a WriteBatch of increments and deadline changes made %d store commits, want 1", n)
			}
			for name, ms := range map[string]int64{"k": later, "k2": 0} {
				ttl, err := e.CounterTTL(ctx, name)
				if err != nil || !ttl.Exists || (ms == 0) != (ttl.ExpiresAt == nil) || (ms != 0 && ttl.ExpiresAt.UnixMilli() != ms) {
					t.Fatalf("CounterTTL(%q) = %+v, %v; want deadline %d", name, ttl, err, ms)
				}
			}
			if ok, err := e.PersistCounter(ctx, "k"); err != nil || !ok {
				t.Fatalf("PERSIST: %v, %v; want true", ok, err)
			}
			if ok, err := e.PersistCounter(ctx, "k"); err != nil || ok {
				t.Fatalf("PERSIST of a name without a deadline: %v, %v; want false", ok, err)
			}
		})
	}
}
