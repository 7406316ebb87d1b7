package storetest

import (
	"math"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

// testWindowBucketInt64 checks that a window bucket is judged on its
// value, the sum of its writes over every shard: a write that would take
// it outside int64 is refused out_of_range while the counter's total has
// room (the total started low in an earlier bucket), and the writes that
// keep it inside, on any shard, apply. A store that adds to a bucket
// without judging it (Firestore's increment transform caps at int64's
// ends) would take the write, and its bucket would no longer be the sum
// of its writes.
func testWindowBucketInt64(t *testing.T, w clocked) {
	id := prefix(t) + "bucket-int64"
	if _, err := w.s.CreateCounter(t.Context(), id, shardcounter.Spec{Shards: 4, Window: window(time.Hour, 24*time.Hour)}); err != nil {
		t.Fatal(err)
	}
	inc := func(delta int64, pick uint64) shardcounter.Increment {
		return shardcounter.Increment{Counter: id, Delta: delta, Pick: pick}
	}
	const half = math.MaxInt64 / 2
	applied := func(what string, out []shardcounter.Outcome) {
		t.Helper()
		for i, o := range out {
			if o.Err != nil || o.Duplicate || o.Skipped {
				t.Fatalf("%s, item %d: %+v; want applied", what, i, o)
			}
		}
	}
	applied("-10 at 09:00", w.apply(t, "09:00:00", inc(-10, 0)))
	applied("two halves of MaxInt64 at 10:00", w.apply(t, "10:00:00", inc(half, 1), inc(half, 2))) // 10:00 → MaxInt64−1
	out := w.apply(t, "10:30:00", inc(5, 3))
	wantCode(t, "a write taking its bucket past MaxInt64, the total in range", out[0].Err, shardcounter.EOUTOFRANGE)
	applied("-5 in the full bucket", w.apply(t, "10:40:00", inc(-5, 3)))
	applied("+5 in the full bucket, on another shard", w.apply(t, "10:50:00", inc(5, 0))) // 10:00 → MaxInt64−1 again
	applied("+5 in the next bucket", w.apply(t, "11:00:00", inc(5, 3)))
	wantSeries(t, w.s, id, day0, day0.Add(24*time.Hour), bucket(at("09:00:00"), -10), bucket(at("10:00:00"), math.MaxInt64-1), bucket(at("11:00:00"), 5))
	if got := MustRead(t, w.s, id); got != math.MaxInt64-6 {
		t.Fatalf("value %d, want MaxInt64−6", got)
	}
}
