package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/internal/model"
)

// TestRankingFromDeltas checks that rankings are kept from their
// commits' deltas: once seeded, writes to counters the engine has seen,
// away from a bucket's edge, and buckets leaving a window, cost no store
// read (engine.Stats), and both lists still equal a sort of every
// counter's value or window sum.
func TestRankingFromDeltas(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: time.Date(2026, 3, 1, 10, 0, 10, 0, time.UTC)}
	s := model.New(model.Options{Now: clk.Now})
	e, err := engine.New(s, engine.Config{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(ctx) })
	minute := &shardcounter.Window{Bucket: shardcounter.BucketMinute, Retention: shardcounter.Duration(time.Hour)}
	for i := range 5 {
		if _, _, err := e.CreateCounter(ctx, fmt.Sprintf("t:%d", i), shardcounter.CreateOptions{Shards: 2, Window: minute}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: fmt.Sprintf("p:%d", i), Delta: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for name, opts := range map[string]shardcounter.RankingOptions{
		"all":   {Prefix: "p:", Size: 3},
		"trend": {Prefix: "t:", Size: 3, Last: shardcounter.Duration(5 * time.Minute)},
	} {
		if _, _, err := e.CreateRanking(ctx, name, opts); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		for name, prefix := range map[string]string{"all": "p:", "trend": "t:"} {
			top, err := e.Top(ctx, name, 0)
			if err != nil {
				t.Fatal(err)
			}
			var all []shardcounter.RankingEntry
			for i := range 5 {
				id := fmt.Sprintf("%s%d", prefix, i)
				var r *shardcounter.Reading
				if name == "trend" {
					r, err = e.ReadWindow(ctx, id, 5*time.Minute)
				} else {
					r, err = e.ReadCounter(ctx, id, shardcounter.Strong)
				}
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, shardcounter.RankingEntry{ID: id, Value: r.Value})
			}
			slices.SortFunc(all, func(a, b shardcounter.RankingEntry) int {
				if a.Value != b.Value {
					return int(b.Value - a.Value)
				}
				return strings.Compare(a.ID, b.ID)
			})
			if !slices.Equal(top.Entries, all[:3]) {
				t.Fatalf("%s, ranking %s: %v, want %v", when, name, top.Entries, all[:3])
			}
		}
	}
	check("seeded")
	reads := e.Stats().RankingReads.Load()
	for step, at := range []string{"10:00:20", "10:01:30", "10:02:30", "10:02:40"} {
		clk.set(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).Add(hms(at)))
		for i := range 5 {
			d := int64((step*7+i*3)%11) - 3 // some decrements
			if d == 0 {
				d = 5
			}
			for _, p := range []string{"p:", "t:"} {
				if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: fmt.Sprintf("%s%d", p, i), Delta: d}); err != nil {
					t.Fatal(err)
				}
			}
		}
		clk.advance(2 * time.Second) // past the lists' staleness bound
		check(at)
	}
	for _, at := range []string{"10:05:30", "10:06:31", "10:07:45", "10:08:01"} { // buckets leave the window
		clk.set(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).Add(hms(at)))
		check(at)
	}
	if got := e.Stats().RankingReads.Load(); got != reads || e.Stats().RankingDeltas.Load() == 0 {
		t.Fatalf("after seeding, the rankings read %d counters from the store and moved %d by deltas; want none read, all moved by deltas",
			got-reads, e.Stats().RankingDeltas.Load())
	}
}

// hms parses "15:04:05" as a duration since midnight.
func hms(s string) time.Duration {
	t, err := time.Parse("15:04:05", s)
	if err != nil {
		panic(err)
	}
	return t.Sub(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC))
}
