package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/postgres"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestWindow writes to a windowed counter across a simulated five hours
// (an injected clock) and checks the buckets, the windowed sums, the
// retention sweep and a reshard.
func TestWindow(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := &clock{t: t0.Add(10 * time.Minute)}
	s := MustOpenWith(t, postgres.Options{Now: clk.Now})
	zero := int64(0)
	spec := shardcounter.Spec{Shards: 3, Min: &zero, Window: &shardcounter.Window{Bucket: shardcounter.BucketHour, Retention: shardcounter.Duration(3 * time.Hour)}}
	if _, err := s.CreateCounter(ctx, "views", spec); err != nil {
		t.Fatal(err)
	}
	apply := func(incs ...shardcounter.Increment) {
		t.Helper()
		out, err := s.Apply(ctx, incs)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range out {
			if o.Err != nil {
				t.Fatalf("item %d: %v", i, o.Err)
			}
		}
	}
	buckets := func() int {
		t.Helper()
		var n int
		if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM shardcounter.buckets WHERE counter = 'views'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	wantWindow := func(from, to time.Time, want int64) {
		t.Helper()
		r, err := s.ReadWindow(ctx, "views", from, to)
		if err != nil {
			t.Fatal(err)
		}
		if r.Value != want || !r.Window.From.Equal(from) || !r.Window.To.Equal(to) || r.Shards != 3 {
			t.Fatalf("ReadWindow(%s, %s) = %d over %+v, want %d", from.Format("15:04"), to.Format("15:04"), r.Value, r.Window, want)
		}
	}
	wantSeries := func(from, to time.Time, want string) {
		t.Helper()
		bs, err := s.ReadSeries(ctx, "views", from, to)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, b := range bs {
			got += fmt.Sprintf("%s=%d ", b.Start.Format("15:04"), b.Value)
		}
		if got != want {
			t.Fatalf("ReadSeries = %q, want %q", got, want)
		}
	}

	// 12:10 five writes on three shards, one of them through Add.
	apply(shardcounter.Increment{Counter: "views", Delta: 2, Pick: 0}, shardcounter.Increment{Counter: "views", Delta: 3, Pick: 1})
	if err := s.Add(ctx, "views", 1, 2); err != nil {
		t.Fatal(err)
	}
	// A refused write lands in no bucket.
	out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: "views", Delta: -100, Pick: 0}})
	if err != nil || shardcounter.ErrorCode(out[0].Err) != shardcounter.EOUTOFRANGE {
		t.Fatalf("write below min: %+v, %v", out, err)
	}
	clk.Advance(time.Hour) // 13:10
	apply(shardcounter.Increment{Counter: "views", Delta: 10, Pick: 2})
	clk.Advance(time.Hour) // 14:10
	apply(shardcounter.Increment{Counter: "views", Delta: -1, Pick: 0}, shardcounter.Increment{Counter: "views", Delta: 1, Pick: 0})
	apply(shardcounter.Increment{Counter: "views", Delta: 100, Pick: 4})

	wantSeries(t0.Add(-time.Hour), t0.Add(3*time.Hour), "12:00=6 13:00=10 14:00=100 ")
	wantWindow(t0, t0.Add(3*time.Hour), 116)
	wantWindow(t0.Add(time.Hour), t0.Add(2*time.Hour), 10)
	wantWindow(t0.Add(2*time.Hour), t0.Add(3*time.Hour), 100)
	if got := storetest.MustRead(t, s, "views"); got != 116 {
		t.Fatalf("all-time value = %d, want 116", got)
	}

	// Growing, then shrinking: the buckets fold with the shards.
	for _, n := range []int{5, 2} {
		if _, err := s.ReshardCounter(ctx, "views", n); err != nil {
			t.Fatal(err)
		}
		wantSeries(t0.Add(-time.Hour), t0.Add(3*time.Hour), "12:00=6 13:00=10 14:00=100 ")
	}
	if got := buckets(); got > 2*3 {
		t.Fatalf("%d bucket rows after shrinking to 2 shards over 3 hours, want at most 6", got)
	}

	// 15:10 and 16:10: a write sweeps the buckets past the 3h retention,
	// those before the bucket holding now − 3h.
	clk.Advance(time.Hour)
	apply(shardcounter.Increment{Counter: "views", Delta: 1, Pick: 0})
	wantSeries(t0.Add(-time.Hour), t0.Add(5*time.Hour), "12:00=6 13:00=10 14:00=100 15:00=1 ")
	clk.Advance(time.Hour)
	apply(shardcounter.Increment{Counter: "views", Delta: 1, Pick: 1})
	wantSeries(t0.Add(-time.Hour), t0.Add(5*time.Hour), "13:00=10 14:00=100 15:00=1 16:00=1 ")
	// An idle store sweeps nothing, however late it is; nor does a read.
	clk.Advance(24 * time.Hour)
	wantSeries(t0.Add(-time.Hour), t0.Add(48*time.Hour), "13:00=10 14:00=100 15:00=1 16:00=1 ")
	if got := storetest.MustRead(t, s, "views"); got != 118 {
		t.Fatalf("all-time value = %d, want 118: the window never changes it", got)
	}

	t.Run("ErrInvalid", func(t *testing.T) {
		storetest.MustCreate(t, s, "plain", 1)
		_, err := s.ReadWindow(ctx, "plain", t0, t0.Add(time.Hour))
		if shardcounter.ErrorCode(err) != shardcounter.EINVALID {
			t.Fatalf("ReadWindow of a counter without a window = %v, want invalid_argument", err)
		}
		_, err = s.ReadSeries(ctx, "missing", t0, t0.Add(time.Hour))
		if shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
			t.Fatalf("ReadSeries of a missing counter = %v, want not_found", err)
		}
	})
}
