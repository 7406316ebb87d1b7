package pebble

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/shardcounter/shardcounter/sketch"
)

// mergeSketch folds a shard sketch's operands, oldest first, reading
// back from the newest (forward false) or folding forward, as a
// compaction may; part, when above 0, folds the newest part updates
// first on their own, as a compaction that saw only them would.
func mergeSketch(t *testing.T, forward bool, part int, ops ...[]byte) []byte {
	t.Helper()
	key := sketchKey("c", 0)
	if part > 0 {
		folded := mergeSketch(t, forward, 0, ops[len(ops)-part:]...)
		ops = append(ops[:len(ops)-part:len(ops)-part], folded)
	}
	var vm interface {
		MergeNewer([]byte) error
		MergeOlder([]byte) error
	}
	first := ops[len(ops)-1]
	if forward {
		first = ops[0]
	}
	m, err := merger.Merge(key, first)
	if err != nil {
		t.Fatal(err)
	}
	vm = m
	for i := range len(ops) - 1 {
		if forward {
			err = vm.MergeNewer(ops[i+1])
		} else {
			err = vm.MergeOlder(ops[len(ops)-2-i])
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	v, _, err := m.Finish(true)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSketchMerger checks that a dense sketch followed by operands of
// raised registers folds, in every order Pebble may fold them, into the
// sketch the store held in memory.
func TestSketchMerger(t *testing.T) {
	var ms []string
	for i := range 30000 {
		ms = append(ms, fmt.Sprintf("m%d", i))
	}
	cur, _, err := sketch.Apply(nil, ms, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, merge := sketchValue(nil, cur)
	if merge {
		t.Fatal("a first sketch written as updates")
	}
	ops := [][]byte{v}
	for b := range 5 {
		var add []string
		for i := range 2000 {
			add = append(add, fmt.Sprintf("n%d-%d", b, i))
		}
		out, _, err := sketch.Apply(cur, add, nil)
		if err != nil {
			t.Fatal(err)
		}
		v, merge := sketchValue(cur, out)
		if !merge || len(v) > 3*2000+1 {
			t.Fatalf("a dense sketch's change written whole, or as %d bytes", len(v))
		}
		ops, cur = append(ops, v), out
	}
	want := append([]byte{tagSketch}, cur...)
	for _, forward := range []bool{false, true} {
		for _, part := range []int{0, 2, 5} {
			if got := mergeSketch(t, forward, part, ops...); !bytes.Equal(got, want) {
				t.Fatalf("forward %v, %d folded apart: the folded sketch differs from the one in memory", forward, part)
			}
		}
	}
	// A whole sketch set after updates replaces them.
	if got := mergeSketch(t, false, 0, append(ops, ops[0])...); !bytes.Equal(got, ops[0]) {
		t.Fatal("a sketch set after updates did not replace them")
	}
}

// FuzzSketchRecord folds what a shard sketch's key might hold after a bug
// or a torn file: the merger returns an error or a value, never panics,
// and a folded whole sketch decodes or is refused.
func FuzzSketchRecord(f *testing.F) {
	s, _, _ := sketch.Apply(nil, []string{"a", "b"}, nil)
	f.Add(append([]byte{tagSketch}, s...), []byte{tagUpdates, 0, 1, 3})
	f.Add([]byte{tagUpdates, 0xff, 0xff, 9}, []byte{tagSketch})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		m, err := merger.Merge(sketchKey("c", 0), b)
		if err != nil {
			return
		}
		if err := m.MergeOlder(a); err != nil {
			return
		}
		v, _, err := m.Finish(true)
		if err != nil {
			return
		}
		if len(v) > 0 && v[0] == tagSketch {
			if sk, err := decodeSketchRecord(v); err == nil {
				sketch.Decode(sk) //nolint:errcheck // refusing is fine; panicking is not
			}
		}
	})
}
