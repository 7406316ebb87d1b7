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
