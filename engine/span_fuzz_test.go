package engine

// An internal test file: span is the window arithmetic behind ReadWindow
// and ReadSeries, fuzzed on its own.

import (
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

// FuzzSpan checks, for any window, clock, span and width, that the
// interval read is whole buckets of the width, ends with the bucket
// holding now, is ⌈last/width⌉ buckets long unless that reaches past the
// retention, and then starts with the first whole bucket the window
// keeps, never before.
func FuzzSpan(f *testing.F) {
	f.Add(uint8(1), uint16(24), int64(1_772_357_400), int64(time.Hour), int64(0))
	f.Add(uint8(0), uint16(60), int64(1_772_357_401), int64(48*time.Hour), int64(2*time.Minute))
	f.Add(uint8(2), uint16(7), int64(-1), int64(1), int64(7*24*time.Hour))
	f.Fuzz(func(t *testing.T, b uint8, n uint16, unix, last, bucket int64) {
		widths := []shardcounter.Duration{shardcounter.BucketMinute, shardcounter.BucketHour, shardcounter.BucketDay}
		w := &shardcounter.Window{Bucket: widths[int(b)%len(widths)]}
		w.Retention = w.Bucket * shardcounter.Duration(1+int(n)%shardcounter.MaxWindowBuckets)
		if last <= 0 || bucket < 0 || unix < -1e11 || unix > 1e11 {
			return // refused before span, or past any clock
		}
		now := time.Unix(unix, 0).UTC()
		sp, err := span(w, now, time.Duration(last), time.Duration(bucket))
		width := time.Duration(bucket)
		if width == 0 {
			width = time.Duration(w.Bucket)
		}
		if err != nil {
			day := 24 * time.Hour
			if width%time.Duration(w.Bucket) == 0 && width <= time.Duration(w.Retention) && (day%width == 0 || width%day == 0) {
				t.Fatalf("span(%+v, %v, %v, %v) = %v for a usable width", w, now, last, width, err)
			}
			return
		}
		oldest := w.BucketOf(now).Add(time.Duration(w.Bucket - w.Retention))
		count := time.Duration(w.Retention)/width + 2 // more than retained, without overflow
		if time.Duration(last) <= time.Duration(w.Retention)+width {
			count = (time.Duration(last) + width - 1) / width
		}
		want := sp.To.Add(-count * width)
		switch {
		case !sp.From.Before(sp.To) || sp.To.Sub(sp.From)%width != 0:
			t.Fatalf("span %+v is not whole %v buckets", sp, width)
		case !sp.From.Equal(sp.From.Truncate(width)):
			t.Fatalf("span %+v does not start on a %v boundary", sp, width)
		case now.Before(sp.To.Add(-width)) || !now.Before(sp.To):
			t.Fatalf("span %+v does not end with the bucket holding %v", sp, now)
		case sp.From.Before(oldest) && sp.To.Sub(sp.From) > width:
			t.Fatalf("span %+v starts before the oldest bucket kept, %v", sp, oldest)
		case !want.Before(oldest) && !sp.From.Equal(want):
			t.Fatalf("span %+v of the last %v is not %d buckets of %v", sp, time.Duration(last), count, width)
		case want.Before(oldest) && !sp.From.Add(-width).Before(oldest):
			t.Fatalf("span %+v of the last %v is cut to the retention after its first whole bucket, from %v", sp, time.Duration(last), oldest)
		case sp.To.Sub(sp.From)/width > shardcounter.MaxWindowBuckets+1:
			t.Fatalf("span %+v has %d buckets", sp, sp.To.Sub(sp.From)/width)
		}
	})
}
