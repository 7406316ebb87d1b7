package expiry

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
	"github.com/shardcounter/shardcounter/pebble"
)

// splitStore is a Pebble store that applies a batch as a document store
// past its commit limit does (docstore.Split), every counter taking 6 MiB
// of a commit: each counter is a part of its own, and a transaction of
// two counters or more is refused whole, nothing of it applied. With
// failLast, the commit of a split batch's part that holds the batch's
// last item fails.
type splitStore struct {
	shardcounter.CounterStore
	failLast bool
}

func (s *splitStore) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	last := incs[len(incs)-1].Counter
	return docstore.Split(ctx, "split", incs, docstore.CommitLimit, func(ctx context.Context, part []shardcounter.Increment, limit int) ([]shardcounter.Outcome, error) {
		sizes := map[string]int{}
		for _, inc := range part {
			sizes[inc.Counter] = 6 << 20
		}
		if limit > 0 && len(sizes) > 1 {
			return nil, &docstore.TooLarge{Store: "split", Limit: limit, Total: len(sizes)*6<<20 + docstore.CommitBytes, Counters: sizes}
		}
		if s.failLast && len(part) < len(incs) && slices.ContainsFunc(part, func(inc shardcounter.Increment) bool { return inc.Counter == last }) {
			return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "split: the last part failed")
		}
		return s.CounterStore.Apply(ctx, part)
	})
}

func openSplit(t *testing.T) *splitStore {
	t.Helper()
	p, err := pebble.Open(context.Background(), t.TempDir(), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return &splitStore{CounterStore: p}
}

// TestRefusedTxnDeletesNothing checks that a change of a transaction
// whose deadline is past (EXPIRE k 0 in a MULTI) deletes nothing when the
// store refuses the transaction, and answers its refusal as the
// transaction's increments do: with increments (a and b, one commit too
// large for the store), and with deadline changes alone.
func TestRefusedTxnDeletesNothing(t *testing.T) {
	ctx := context.Background()
	base := openSplit(t)
	s := Wrap(base, Options{})
	spec := &shardcounter.Spec{Shards: 1}
	for _, n := range []string{"k", "j", "m"} {
		if _, err := s.Apply(ctx, []shardcounter.Increment{{Counter: n, Delta: 1, Create: spec}}); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-time.Second).UnixMilli()
	later := time.Now().Add(time.Hour).UnixMilli()
	for _, c := range []struct {
		what string
		incs []shardcounter.Increment
		chs  []Change
	}{
		{"INCR a, INCR b, EXPIRE k 0", []shardcounter.Increment{{Counter: "a", Delta: 1, Create: spec, Txn: 5}, {Counter: "b", Delta: 1, Create: spec, Txn: 5}},
			[]Change{{Name: "k", At: past, Known: false, Txn: 5}}},
		{"EXPIRE j 0, EXPIRE m 3600", nil, []Change{{Name: "j", At: past, Txn: 6}, {Name: "m", At: later, Txn: 6}}},
	} {
		out, res, err := s.ApplyChanges(ctx, c.incs, c.chs)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		var refusal error
		for _, o := range out {
			if refusal = o.Err; refusal == nil {
				t.Fatalf("%s: an increment of the transaction applied: %+v", c.what, o)
			}
		}
		for i, r := range res {
			if refusal == nil {
				refusal = res[len(res)-1].Err
			}
			if r.Err == nil || r.Err.Error() != refusal.Error() {
				t.Errorf("%s: change %d (%s) = %+v, want the transaction's refusal %v", c.what, i, c.chs[i].Name, r, refusal)
			}
		}
		for _, ch := range c.chs {
			if _, err := s.GetCounter(ctx, ch.Name); err != nil {
				t.Errorf("%s: %s after the refused transaction: %v, want it left", c.what, ch.Name, err)
			}
			if d, err := s.Deadline(ctx, ch.Name); err != nil || d != 0 {
				t.Errorf("%s: deadline of %s after the refused transaction: %d, %v; want none", c.what, ch.Name, d, err)
			}
		}
	}
}

// TestMarkerBeforeDeadlines checks that a deadline another process can
// see is announced to it by the in-use marker: the commit of a batch
// setting deadlines is split (a document store past its limit) and the
// part of its last item fails, while the deadline of a in an earlier part
// lands; a second Store over the same store must see it.
func TestMarkerBeforeDeadlines(t *testing.T) {
	ctx := context.Background()
	base := openSplit(t)
	base.failLast = true
	s := Wrap(base, Options{})
	at := time.Now().Add(time.Hour).UnixMilli()
	spec := &shardcounter.Spec{Shards: 1}
	_, res, err := s.ApplyChanges(ctx,
		[]shardcounter.Increment{{Counter: "a", Delta: 1, Create: spec}, {Counter: "b", Delta: 1, Create: spec}},
		[]Change{{Name: "a", At: at, Known: true}, {Name: "b", At: at, Known: true}})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Set || res[0].Err != nil {
		t.Fatalf("the deadline of a, in an early part: %+v", res[0])
	}
	other := Wrap(base.CounterStore, Options{})
	if d, err := other.Deadline(ctx, "a"); err != nil || d != at {
		t.Errorf("another process reads a's deadline as %d, %v; want %d", d, err, at)
	}
	if _, err := base.CounterStore.GetCounter(ctx, inUseID); errors.Is(err, shardcounter.ErrNotFound) {
		t.Error("a deadline was written, the marker not")
	}
}
