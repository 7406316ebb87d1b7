package docstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

// TestWindowOwnBuckets checks which stored buckets the windowed reads
// take for a counter: its own (of its created_at) and those written
// before buckets carried of, not those another counter of the id left,
// nor zero ones.
func TestWindowOwnBuckets(t *testing.T) {
	created := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	b := func(min int, v int64, of time.Time) Bucket {
		return Bucket{Bucket: shardcounter.Bucket{Start: created.Add(time.Duration(min) * time.Minute), Value: v}, Of: of}
	}
	stored := []Bucket{b(1, 1, time.Time{}), b(2, 10, created.Add(-time.Hour)), b(3, 100, created), b(4, 0, created)}
	r := Reads{Now: time.Now,
		Meta: func(_ context.Context, id string) (*shardcounter.Counter, error) {
			return &shardcounter.Counter{ID: id, CreatedAt: created, Spec: shardcounter.Spec{Shards: 1, Window: &shardcounter.Window{Bucket: shardcounter.Duration(time.Minute), Retention: shardcounter.Duration(time.Hour)}}}, nil
		},
		Buckets: func(context.Context, string, time.Time, time.Time) ([]Bucket, error) { return stored, nil },
	}
	from, to := created, created.Add(time.Hour)
	if w, err := r.ReadWindow(t.Context(), "c", from, to); err != nil || w.Value != 101 {
		t.Errorf("ReadWindow = %+v, %v, want 101: the counter's own bucket and the one without of", w, err)
	}
	want := []shardcounter.Bucket{stored[0].Bucket, stored[2].Bucket}
	if bs, err := r.ReadSeries(t.Context(), "c", from, to); err != nil || fmt.Sprint(bs) != fmt.Sprint(want) {
		t.Errorf("ReadSeries = %v, %v, want %v", bs, err, want)
	}
}

// TestSwept checks what a delete's sweep of the counter created at
// created takes: its records and those without of, never a batch marker.
func TestSwept(t *testing.T) {
	created := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		of   time.Time
		want bool
	}{
		{"m", created, true},
		{"m", time.Time{}, true},
		{"m", created.Add(time.Second), false},
		{MarkerPrefix + "0123", created, false},
		{MarkerPrefix + "0123", time.Time{}, false},
	} {
		if got := Swept(c.name, c.of, created); got != c.want {
			t.Errorf("Swept(%q, %v) = %v, want %v", c.name, c.of, got, c.want)
		}
	}
}
