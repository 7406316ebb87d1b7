package sketch_test

import (
	"math"
	"strconv"
	"testing"

	"github.com/shardcounter/shardcounter/internal/shard"
	"github.com/shardcounter/shardcounter/sketch"
)

func TestApplyChanged(t *testing.T) {
	var b []byte
	step := func(members ...string) bool {
		t.Helper()
		out, changed, err := sketch.Apply(b, members, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) > sketch.MaxEncoded {
			t.Fatalf("encoding of %d bytes, more than MaxEncoded %d", len(out), sketch.MaxEncoded)
		}
		b = out
		return changed
	}
	if !step("a", "b", "c") {
		t.Fatal("adding a, b, c to an empty sketch: unchanged, want changed")
	}
	if step("a", "b", "c") {
		t.Fatal("adding a, b, c again: changed, want unchanged")
	}
	// Grow it dense, then check both answers again.
	var many []string
	for i := range 200000 {
		many = append(many, "m"+strconv.Itoa(i))
	}
	if !step(many...) {
		t.Fatal("adding 200,000 members: unchanged")
	}
	if len(b) != sketch.MaxEncoded {
		t.Fatalf("a sketch of 200,000 members encodes to %d bytes, want dense %d", len(b), sketch.MaxEncoded)
	}
	if step(many[:1000]...) {
		t.Fatal("adding members already in a dense sketch: changed")
	}
	got, err := sketch.Count([][]byte{b})
	if err != nil {
		t.Fatal(err)
	}
	if e := relErr(got, 200003); e > 3*sketch.StdError {
		t.Fatalf("estimate %d of 200,003: error %.4f over 3 standard errors", got, e)
	}
}

// TestEncodedSize grows a sketch in small batches through the sizes where
// the sparse encoding is longest, just before the switch to dense: no
// encoding exceeds MaxEncoded, and Decode takes every one back.
func TestEncodedSize(t *testing.T) {
	var b []byte
	for i := 0; i < 20000; i += 13 {
		var ms []string
		for j := range 13 {
			ms = append(ms, "s"+strconv.Itoa(i+j))
		}
		out, _, err := sketch.Apply(b, ms, nil)
		if err != nil {
			t.Fatalf("after %d members: %v", i, err)
		}
		if len(out) > sketch.MaxEncoded {
			t.Fatalf("after %d members the sketch encodes to %d bytes, more than MaxEncoded %d", i+13, len(out), sketch.MaxEncoded)
		}
		b = out
	}
	if n, _ := sketch.Count([][]byte{b}); math.Abs(float64(n-20007)) > 3*sketch.StdError*20007 {
		t.Fatalf("estimate %d of 20,007", n)
	}
}

func TestMergeIsUnion(t *testing.T) {
	a, _, _ := sketch.Apply(nil, []string{"x", "y"}, nil)
	b, _, _ := sketch.Apply(nil, []string{"y", "z"}, nil)
	merged, changed, err := sketch.Apply(a, nil, [][]byte{b})
	if err != nil || !changed {
		t.Fatalf("merge: changed %v, %v", changed, err)
	}
	if n, _ := sketch.Count([][]byte{merged}); n != 3 {
		t.Fatalf("union of {x,y} and {y,z} estimates %d, want 3", n)
	}
	if n, _ := sketch.Count([][]byte{a, b, nil}); n != 3 {
		t.Fatalf("Count of {x,y}, {y,z} and an empty shard = %d, want 3", n)
	}
}

// TestStdError checks the stated error the way a sharded counter sees it:
// a million distinct members spread over 16 shards by shard.ForMember, each
// shard's sketch changed in batches as a store would, the value the
// estimate of the union. Every run is within three standard errors, and
// the mean absolute error over the runs within 1 %.
func TestStdError(t *testing.T) {
	const runs, members, shards, batch = 6, 1_000_000, 16, 512
	var sum float64
	for r := range runs {
		enc := make([][]byte, shards)
		pending := make([][]string, shards)
		flush := func(i int) {
			out, _, err := sketch.Apply(enc[i], pending[i], nil)
			if err != nil {
				t.Fatal(err)
			}
			enc[i], pending[i] = out, pending[i][:0]
		}
		for i := range members {
			m := "run" + strconv.Itoa(r) + "-" + strconv.Itoa(i)
			s := shard.Of(shard.ForMember(m), shards)
			if pending[s] = append(pending[s], m); len(pending[s]) == batch {
				flush(s)
			}
		}
		for i := range shards {
			flush(i)
		}
		got, err := sketch.Count(enc)
		if err != nil {
			t.Fatal(err)
		}
		e := relErr(got, members)
		if e > 3*sketch.StdError {
			t.Errorf("run %d: estimate %d of %d, error %.4f over three standard errors (%.4f)", r, got, members, e, 3*sketch.StdError)
		}
		sum += e
	}
	if mean := sum / runs; mean > 0.01 {
		t.Errorf("mean absolute error over %d runs %.4f, above 1 %%", runs, mean)
	}
}

func relErr(got, want int64) float64 { return math.Abs(float64(got-want)) / float64(want) }

// FuzzDecode feeds Decode and Apply what a store might hold after a bug
// or a hand edit: they return an error or a sketch that encodes within
// MaxEncoded, never panic.
func FuzzDecode(f *testing.F) {
	small, _, _ := sketch.Apply(nil, []string{"a", "b"}, nil)
	f.Add(small)
	f.Add([]byte{})
	f.Add([]byte{2, 14, 0, 0, 0, 0, 64, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := sketch.Decode(b)
		if err != nil {
			return
		}
		if n := len(s.Encode()); n > sketch.MaxEncoded {
			t.Fatalf("decoded sketch encodes to %d bytes", n)
		}
		if _, _, err := sketch.Apply(b, []string{"x"}, [][]byte{b}); err != nil {
			t.Fatalf("Apply of a sketch Decode accepts: %v", err)
		}
	})
}
