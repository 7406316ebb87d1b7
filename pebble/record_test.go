package pebble

import (
	"bytes"
	"testing"

	"github.com/shardcounter/shardcounter"
)

// merge folds operands, oldest first, as Pebble would reading the key
// from its newest operand back.
func merge(t *testing.T, ops ...[]byte) []byte {
	t.Helper()
	vm, err := merger.Merge(nil, ops[len(ops)-1])
	if err != nil {
		t.Fatal(err)
	}
	for i := len(ops) - 2; i >= 0; i-- {
		if err := vm.MergeOlder(ops[i]); err != nil {
			t.Fatal(err)
		}
	}
	v, _, err := vm.Finish(true)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// mergeForward folds the same operands oldest first, as a compaction may.
func mergeForward(t *testing.T, ops ...[]byte) []byte {
	t.Helper()
	vm, err := merger.Merge(nil, ops[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops[1:] {
		if err := vm.MergeNewer(op); err != nil {
			t.Fatal(err)
		}
	}
	v, _, err := vm.Finish(true)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMerger(t *testing.T) {
	rec := func(shards ...int64) []byte {
		return encodeRecord(&record{meta: newMeta(shardcounter.Spec{Shards: len(shards)}, 7), shards: shards})
	}
	d := func(shard int, v int64) []byte { return appendDelta(nil, shard, v) }
	for _, tc := range []struct {
		name string
		ops  [][]byte
		want []byte
	}{
		{"Deltas", [][]byte{rec(1, 2, 3), d(0, 5), d(2, -3), d(0, 1)}, rec(7, 2, 0)},
		{"PastCount", [][]byte{rec(0, 0), d(3, 4)}, rec(0, 4)}, // written before a reshard to 2: shard 3 mod 2
		{"RecordSetLater", [][]byte{rec(1, 1), d(0, 5), rec(9, 9), d(1, 1)}, rec(9, 10)},
		// A shard that cannot hold its deltas spills onto a shard with
		// room: the total exact, every shard an int64.
		{"Spills", [][]byte{rec(1<<63-1, -5), d(0, 3)}, rec(1<<63-1, -2)},
		{"SpillsDown", [][]byte{rec(-5, -(1 << 63)), d(1, -3)}, rec(-8, -(1 << 63))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, got := range [][]byte{merge(t, tc.ops...), mergeForward(t, tc.ops...)} {
				if !bytes.Equal(got, tc.want) {
					r, err := decodeRecord(got)
					t.Fatalf("merged = %+v (%v), want %x", r, err, tc.want)
				}
			}
		})
	}
	t.Run("OnlyDeltas", func(t *testing.T) {
		// A compaction that sees no record sums per shard; folding that
		// sum into the record later gives the same as folding each.
		partial := merge(t, d(1, 2), d(0, 3), d(1, -7))
		if got, want := merge(t, rec(10, 10), partial), merge(t, rec(10, 10), d(1, 2), d(0, 3), d(1, -7)); !bytes.Equal(got, want) {
			t.Fatalf("record + partial sum = %x, want %x", got, want)
		}
		r, _ := decodeRecord(merge(t, rec(10, 10), partial))
		if r.shards[0] != 13 || r.shards[1] != 5 || r.total() != 18 {
			t.Fatalf("shards %v, want [13 5]", r.shards)
		}
	})
	t.Run("OnlyDeltasWide", func(t *testing.T) {
		// Deltas whose sum leaves int64 are kept apart by a partial
		// merge, and the record places them exactly.
		const max = 1<<63 - 1
		partial := merge(t, d(0, max), d(0, max), d(0, -max))
		r, err := decodeRecord(merge(t, rec(0, -max), partial))
		if err != nil || r.shards[0] != max || r.shards[1] != -max {
			t.Fatalf("shards %v (%v), want [max -max]", r, err)
		}
	})
	t.Run("Corrupt", func(t *testing.T) {
		for _, bad := range [][]byte{{}, {'x'}, {tagDeltas, 0x80}, {tagRecord, 200}} {
			vm, err := merger.Merge(nil, rec(1))
			if err != nil {
				t.Fatal(err)
			}
			err = vm.MergeNewer(bad)
			if err == nil {
				_, _, err = vm.Finish(true)
			}
			if err == nil {
				t.Errorf("merge with %x succeeded", bad)
			}
		}
	})
}

// FuzzRecord checks the record's decoder: any bytes decode to a record
// that encodes back to them, or to an error, never a panic.
func FuzzRecord(f *testing.F) {
	f.Add(encodeRecord(&record{meta: newMeta(shardcounter.Spec{Shards: 2}, 1), shards: []int64{3, -4}}))
	f.Add([]byte{tagRecord, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		if again := encodeRecord(r); !bytes.Equal(again, b) {
			r2, err := decodeRecord(again)
			if err != nil || r2.total() != r.total() || !r2.meta.spec.Equal(r.meta.spec) {
				t.Fatalf("decodeRecord(%x) = %+v, which encodes to %x", b, r, again)
			}
		}
	})
}
