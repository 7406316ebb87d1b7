package firestore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestStrongReadRoundTrips counts the RPCs of strong reads of counters
// the store knows the shards of: each is a transaction begun and one
// BatchGetDocuments in it (see getSnapshotOnce for why not one), on the
// emulator a read-write transaction, rolled back: three round trips.
// (Against Google Cloud it is read-only, neither committed nor rolled
// back: two.)
func TestStrongReadRoundTrips(t *testing.T) {
	watch, calls, err := firestoretest.CountCalls()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := firestore.NewWith(ctx, firestoretest.Project(t), "", firestore.Options{}, watch)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sum, other, set := "c", "d", "set"
	storetest.MustCreate(t, s, sum, 16)
	storetest.MustCreate(t, s, other, 3)
	storetest.MustCreateDistinct(t, s, set, 4)
	if _, err := s.Apply(ctx, []shardcounter.Increment{{Counter: sum, Delta: 5, Pick: 3}, {Counter: set, Member: "alice", Delta: 1}}); err != nil {
		t.Fatal(err)
	}
	// The first read of a counter the store has not read or written
	// learns its shard count, and reads again with the shards.
	if _, err := s.ReadCounters(ctx, []string{sum, other}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"BeginTransaction": 1, "BatchGetDocuments": 1, "Rollback": 1}
	reads := []struct {
		name string
		read func() error
	}{
		{"ReadCounter", func() error {
			r, err := s.ReadCounter(ctx, sum)
			if err == nil && r.Value != 5 {
				err = fmt.Errorf("value %d, want 5", r.Value)
			}
			return err
		}},
		{"ReadCounters", func() error { _, err := s.ReadCounters(ctx, []string{sum, other}); return err }},
		{"IsMember", func() error {
			ok, err := s.IsMember(ctx, set, "alice")
			if err == nil && !ok {
				err = fmt.Errorf("alice is not a member")
			}
			return err
		}},
	}
	for _, r := range reads {
		calls.Take()
		if err := r.read(); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if got := calls.Take(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s sent %v, want %v", r.name, got, want)
		}
	}
}
