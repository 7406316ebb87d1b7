package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/sketch"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestSnapshotReadSketches reads an approx counter's sketches through a
// Snapshot, as an export does: they are the ones of the snapshot's
// moment (its first statement), whatever is added after it.
func TestSnapshotReadSketches(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	storetest.MustCreateApprox(t, s, "v", 4)
	add := func(prefix string) {
		var incs []shardcounter.Increment
		for i := range 200 {
			incs = append(incs, shardcounter.Increment{Counter: "v", Member: fmt.Sprintf("%s%d", prefix, i), Delta: 1})
		}
		if _, err := s.Apply(ctx, incs); err != nil {
			t.Fatal(err)
		}
	}
	add("a")
	before := storetest.CheckApprox(t, s, "v", 200)
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	// The transaction's snapshot is taken by its first statement.
	if rs, err := snap.ReadCounters(ctx, []string{"v"}); err != nil || rs[0] == nil || rs[0].Value != before {
		t.Fatalf("Snapshot.ReadCounters = %+v, %v, want %d", rs, err, before)
	}
	add("b")
	storetest.CheckApprox(t, s, "v", 400)
	c, shards, err := snap.ReadSketches(ctx, "v")
	if err != nil || c.Kind != shardcounter.KindApprox || len(shards) != 4 {
		t.Fatalf("Snapshot.ReadSketches = %+v, %d shards, %v", c, len(shards), err)
	}
	if n, err := sketch.Count(shards); err != nil || n != before {
		t.Fatalf("the snapshot's sketches estimate %d (%v), the counter read %d when it began", n, err, before)
	}
	rs, err := snap.ReadCounters(ctx, []string{"v"})
	if err != nil || rs[0] == nil || rs[0].Value != before {
		t.Fatalf("Snapshot.ReadCounters = %+v, %v, want %d", rs, err, before)
	}
}

// TestApproxNoMembers checks that an approx counter, which keeps sketches
// and not its members, refuses member reads.
func TestApproxNoMembers(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	storetest.MustCreateApprox(t, s, "v", 2)
	if _, err := s.Apply(ctx, []shardcounter.Increment{{Counter: "v", Member: "m1", Delta: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.IsMember(ctx, "v", "m1"); !errors.Is(err, shardcounter.ErrInvalid) {
		t.Fatalf("IsMember on an approx counter: %v, want ErrInvalid", err)
	}
	if _, err := s.ListMembers(ctx, "v", "", 10); !errors.Is(err, shardcounter.ErrInvalid) {
		t.Fatalf("ListMembers on an approx counter: %v, want ErrInvalid", err)
	}
}
