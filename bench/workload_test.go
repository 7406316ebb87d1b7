package bench_test

import (
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bench"
)

// TestDrawsTimeline checks the timeline's operations: reads of ReadBatch
// different counters in range, writes of one, in about the ratio asked.
func TestDrawsTimeline(t *testing.T) {
	const n = 20000
	draws := bench.Draws(bench.Config{Workload: bench.WorkloadTimeline, Counters: 1000, Zipf: 1.1, ReadRatio: 0.9}, n)
	var reads int
	for _, d := range draws {
		if d.Read {
			t.Fatalf("draw %+v: a timeline reads batches, not single counters", d)
		}
		if !d.ReadBatch {
			if d.Delta != 1 || d.Counter < 0 || d.Counter >= 1000 {
				t.Fatalf("write %+v, want +1 to a counter in [0, 1000)", d)
			}
			continue
		}
		reads++
		if len(d.Counters) != bench.DefaultReadBatch {
			t.Fatalf("batch read of %d counters, want %d", len(d.Counters), bench.DefaultReadBatch)
		}
		seen := map[int]bool{}
		for _, c := range d.Counters {
			if seen[c] || c < 0 || c >= 1000 {
				t.Fatalf("batch read %v: counters must be different and in [0, 1000)", d.Counters)
			}
			seen[c] = true
		}
	}
	// 0.9 of 20,000: the bounds are 15 standard deviations wide.
	if got := float64(reads) / n; got < 0.87 || got > 0.93 {
		t.Errorf("%.3f of the operations read, want about 0.9", got)
	}

	// Fewer counters than a batch: every counter, once.
	for _, d := range bench.Draws(bench.Config{Workload: bench.WorkloadTimeline, Counters: 5, Zipf: 3, ReadRatio: 1, ReadBatch: 20}, 200) {
		if len(d.Counters) != 5 {
			t.Fatalf("batch of %v over 5 counters, want all 5", d.Counters)
		}
	}
}

// TestDrawsDistinct checks member writes: members from the population,
// removes in about the ratio asked.
func TestDrawsDistinct(t *testing.T) {
	const n = 20000
	draws := bench.Draws(bench.Config{Kind: shardcounter.KindDistinct, Members: 50, DecrRatio: 0.25}, n)
	var removes int
	members := map[int]bool{}
	for _, d := range draws {
		if d.Read || d.ReadBatch || d.Counter != 0 {
			t.Fatalf("draw %+v, want a write to the one counter", d)
		}
		if d.Member < 0 || d.Member >= 50 {
			t.Fatalf("member %d is outside the population of 50", d.Member)
		}
		members[d.Member] = true
		if d.Delta == -1 {
			removes++
		}
	}
	if len(members) != 50 {
		t.Errorf("%d members drawn of 50 in %d draws: members are not drawn from the whole population", len(members), n)
	}
	if got := float64(removes) / n; got < 0.22 || got > 0.28 {
		t.Errorf("%.3f of the writes remove, want about 0.25", got)
	}
}

func TestStatusField(t *testing.T) {
	status := "Name:\tshardcounter\nVmPeak:\t  900000 kB\nVmRSS:\t   12345 kB\nRssAnon:\t    2345 kB\nRssFile:\t   10000 kB\nThreads:\t8\n"
	for name, want := range map[string]int64{"VmRSS": 12345 * 1024, "RssFile": 10000 * 1024} {
		if n, ok := bench.StatusField(status, name); !ok || n != want {
			t.Errorf("StatusField(%s) = %d, %v, want %d", name, n, ok, want)
		}
	}
	if _, ok := bench.StatusField(status, "Rss"); ok {
		t.Error("StatusField read Rss from a line of another name")
	}
	if _, ok := bench.StatusField("Name:\tx\nVmRSS:\t12 MB\n", "VmRSS"); ok {
		t.Error("StatusField read a VmRSS in a unit it does not know")
	}
}

func TestConfigValidate(t *testing.T) {
	one, minus := int64(1), int64(-1)
	for _, bad := range []bench.Config{
		{Zipf: 0.5},
		{ReadRatio: 1.5},
		{ReadConsistency: "eventual"},
		{Workload: "feed"},
		{Workload: bench.WorkloadTimeline, ReadBatch: shardcounter.MaxReadBatch + 1},
		{Kind: "max"},
		{Members: -1},
		{DecrRatio: -0.1},
		{Pipeline: bench.MaxPipeline + 1},
		{Variants: []bench.Variant{bench.Bounded(&one, nil)}},   // a floor above the start
		{Variants: []bench.Variant{bench.Bounded(nil, &minus)}}, // a ceiling below it
		{Variants: []bench.Variant{{Name: "distinct with a window", Kind: shardcounter.KindDistinct,
			Window: &shardcounter.Window{Bucket: shardcounter.BucketMinute, Retention: shardcounter.BucketDay}}}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", bad)
		}
	}
	if err := (bench.Config{}).Validate(); err != nil {
		t.Errorf("the zero Config (all defaults) = %v", err)
	}
}
