package pebble_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/pebble"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestIndexChurn grows the index of counters past its first size,
// deletes every other one of the first 400 counters (each delete moves back the entries that
// probed past it), makes some again, and reopens the store: every counter
// reads right throughout, and the deleted ones are gone.
func TestIndexChurn(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "pebble")
	s, err := pebble.Open(ctx, dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n, deleted = 2000, 400
	id := func(i int) string { return fmt.Sprintf("c/%d", i) }
	var incs []shardcounter.Increment
	for i := range n {
		incs = append(incs, shardcounter.Increment{Counter: id(i), Delta: int64(i + 1), Create: &shardcounter.Spec{Shards: 1}})
	}
	if _, err := s.Apply(ctx, incs); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < deleted; i += 2 {
		if err := s.DeleteCounter(ctx, id(i)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(s *pebble.CounterStore, remade int) {
		t.Helper()
		for i := range n {
			r, err := s.ReadCounter(ctx, id(i))
			switch {
			case i%2 == 1 || i >= deleted || i < remade:
				if err != nil || r.Value != int64(i+1) {
					t.Fatalf("%s = %+v, %v, want %d", id(i), r, err, i+1)
				}
			case shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND:
				t.Fatalf("%s, deleted = %+v, %v, want not_found", id(i), r, err)
			}
		}
		if got, want := s.Counters(), n-deleted/2+remade/2; got != want {
			t.Fatalf("Counters() = %d, want %d", got, want)
		}
	}
	check(s, 0)
	incs = incs[:0]
	for i := 0; i < 200; i += 2 {
		incs = append(incs, shardcounter.Increment{Counter: id(i), Delta: int64(i + 1), Create: &shardcounter.Spec{Shards: 1}})
	}
	if _, err := s.Apply(ctx, incs); err != nil {
		t.Fatal(err)
	}
	check(s, 200)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = pebble.Open(ctx, dir, pebble.Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s, 200)
	if got := storetest.MustRead(t, s, id(1)); got != 2 {
		t.Fatalf("%s after reopening = %d, want 2", id(1), got)
	}
}

// TestIndexOffHeap holds 200,000 counters without the Go heap growing by
// more than Pebble's own buffers: the counters, their ids and the index
// that finds them are all mapped outside it, so a collection neither
// scans them nor lets the heap grow by as much again (a Go map of the ids
// held some 57 bytes a counter).
func TestIndexOffHeap(t *testing.T) {
	if pebbleOnHeap {
		t.Skip("Pebble's memtables are on the Go heap in this build")
	}
	ctx := context.Background()
	s := MustOpen(t)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	const n = 200_000
	for b := 0; b < n; b += 5000 {
		var incs []shardcounter.Increment
		for i := b; i < b+5000; i++ {
			incs = append(incs, shardcounter.Increment{Counter: fmt.Sprintf("bench/18a3f0c2d4e5b6a7/engine-1-shards/%d", i), Delta: 1, Create: &shardcounter.Spec{Shards: 1}})
		}
		if _, err := s.Apply(ctx, incs); err != nil {
			t.Fatal(err)
		}
	}
	after := heap()
	if s.Counters() != n {
		t.Fatalf("Counters() = %d, want %d", s.Counters(), n)
	}
	if grown := int64(after) - int64(before); grown > 24*n {
		t.Errorf("the Go heap grew by %d bytes for %d counters (%d a counter), want at most 24 a counter", grown, n, grown/n)
	}
}
