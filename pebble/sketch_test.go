package pebble_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/pebble"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestApproxReopen checks that an approx counter's sketches, held in
// memory for reads, are loaded again at Open from what the batches wrote,
// that a reshard's are too, and that the estimate kept for reads follows
// each change.
func TestApproxReopen(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "pebble")
	s, err := pebble.Open(ctx, dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	storetest.MustCreateApprox(t, s, "uv", 4)
	storetest.MustCreateApprox(t, s, "gone", 2)
	add := func(id string, from, to int) {
		t.Helper()
		var incs []shardcounter.Increment
		for i := from; i < to; i++ {
			incs = append(incs, shardcounter.Increment{Counter: id, Member: fmt.Sprintf("m%d", i), Delta: 1})
		}
		if _, err := s.Apply(ctx, incs); err != nil {
			t.Fatal(err)
		}
	}
	// Dense sketches change by merge operands of raised registers.
	storetest.MustCreateApprox(t, s, "dense", 1)
	for i := 0; i < 60000; i += 3000 {
		add("dense", i, i+3000)
	}
	dense := storetest.CheckApprox(t, s, "dense", 60000)
	add("uv", 0, 3000)
	first := storetest.CheckApprox(t, s, "uv", 3000)
	add("uv", 3000, 6000) // the estimate kept since the last read is stale now
	storetest.CheckApprox(t, s, "uv", 6000)
	if v := storetest.MustRead(t, s, "uv"); v == first {
		t.Fatalf("after 3,000 more members the value is still %d", v)
	}
	if _, err := s.ReshardCounter(ctx, "uv", 3); err != nil {
		t.Fatal(err)
	}
	add("gone", 0, 100)
	if err := s.DeleteCounter(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	want := storetest.MustRead(t, s, "uv")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = pebble.Open(ctx, dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v := storetest.CheckApprox(t, s, "uv", 6000); v != want {
		t.Fatalf("after reopening, %d; before, %d", v, want)
	}
	if v := storetest.CheckApprox(t, s, "dense", 60000); v != dense {
		t.Fatalf("after reopening, the dense counter reads %d; before, %d", v, dense)
	}
	if n := len(storetest.MustSketches(t, s, "uv")); n != 3 {
		t.Fatalf("after reopening, %d shard sketches, want 3", n)
	}
	storetest.MustCreateApprox(t, s, "gone", 2)
	storetest.CheckApprox(t, s, "gone", 0)
}
