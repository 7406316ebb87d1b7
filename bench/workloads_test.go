package bench_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bench"
)

// allPaths are the paths that serve a store: the naive path, the engine,
// and the http and resp servers the runs start over it.
var allPaths = []string{bench.PathNaive, bench.PathEngine, bench.PathHTTP, bench.PathRESP}

// TestTimelineBolt runs the timeline on every path over counters all
// written before the clock starts: batch reads (ReadCounters, POST
// /v1/reads, MGET) and writes, verified, every counter touched.
func TestTimelineBolt(t *testing.T) {
	s := mustBolt(t)
	cfg := bench.Config{
		Store: s, StoreName: "bolt", Clients: 4, Duration: 300 * time.Millisecond, Shards: []int{2},
		Counters: 300, Zipf: 1.1, Workload: bench.WorkloadTimeline, ReadRatio: 0.5,
		ReadConsistency: shardcounter.Cached, Prefill: true,
	}
	runs, err := bench.Paths(context.Background(), cfg, allPaths...)
	if err != nil {
		t.Fatal(err)
	}
	checkRuns(t, runs, len(allPaths))
	for _, r := range runs {
		if r.Reads == 0 || r.Writes == 0 || r.ReadBatch != bench.DefaultReadBatch || r.Touched != 300 {
			t.Errorf("run %s = %+v, want batch reads and writes over all 300 counters", r.Name, r)
		}
		if m := r.Memory; m == nil || m.Process != "bench" {
			t.Errorf("run %s: memory %+v, want this process's", r.Name, m)
		}
	}
	mustNoCounters(t, s)
}

// TestKindsBolt runs sum and distinct counters in one report, with
// removes and a small population, so that adds of present members and
// removes of absent ones change nothing, and the runs are still verified.
func TestKindsBolt(t *testing.T) {
	s := mustBolt(t)
	cfg := bench.Config{
		Store: s, StoreName: "bolt", Clients: 4, Duration: 300 * time.Millisecond, Shards: []int{3},
		Members: 20, DecrRatio: 0.3, ReadRatio: 0.2, Variants: []bench.Variant{bench.Plain(), bench.Distinct()},
	}
	runs, err := bench.Paths(context.Background(), cfg, allPaths...)
	if err != nil {
		t.Fatal(err)
	}
	checkRuns(t, runs, 2*len(allPaths))
	for i, r := range runs {
		want := []string{"sum", "distinct"}[i%2]
		if r.Kind != want || r.Variant != []string{"plain", "distinct"}[i%2] {
			t.Errorf("run %d %s: kind %q variant %q, want %s", i, r.Name, r.Kind, r.Variant, want)
		}
	}
	if runs[1].Name != "bolt/naive/shards=3/distinct" || runs[1].Members != 20 {
		t.Errorf("run = %+v, want bolt/naive/shards=3/distinct of 20 members", runs[1])
	}
	mustNoCounters(t, s)
}

// TestBoundedBolt decrements counters with a floor of 0 on every path:
// each write is refused, counted as refused, and nothing changes.
func TestBoundedBolt(t *testing.T) {
	s := mustBolt(t)
	zero := int64(0)
	cfg := bench.Config{
		Store: s, StoreName: "bolt", Clients: 4, Duration: 200 * time.Millisecond, Shards: []int{2},
		Counters: 10, DecrRatio: 1, Variants: []bench.Variant{bench.Bounded(&zero, nil)},
	}
	runs, err := bench.Paths(context.Background(), cfg, allPaths...)
	if err != nil {
		t.Fatal(err)
	}
	checkRuns(t, runs, len(allPaths))
	for _, r := range runs {
		if r.Refused == 0 || r.Writes != 0 || r.Variant != "min=0" {
			t.Errorf("run %s = %+v, want every write refused by the floor", r.Name, r)
		}
	}
	if runs[0].Name != "bolt/naive/shards=2/min=0" {
		t.Errorf("run name %q, want bolt/naive/shards=2/min=0", runs[0].Name)
	}
	mustNoCounters(t, s)
}

// TestWindowedBolt writes to windowed counters next to plain ones; the
// windowed runs are verified against their windows' sums too.
func TestWindowedBolt(t *testing.T) {
	s := mustBolt(t)
	w := shardcounter.Window{Bucket: shardcounter.BucketMinute, Retention: shardcounter.BucketDay}
	cfg := bench.Config{
		Store: s, StoreName: "bolt", Clients: 4, Duration: 200 * time.Millisecond, Shards: []int{2},
		Counters: 5, DecrRatio: 0.5, Variants: []bench.Variant{bench.Plain(), bench.Windowed(w)},
	}
	paths := []string{bench.PathNaive, bench.PathEngine, bench.PathHTTP}
	runs, err := bench.Paths(context.Background(), cfg, paths...)
	if err != nil {
		t.Fatal(err)
	}
	checkRuns(t, runs, 2*len(paths))
	if runs[1].Name != "bolt/naive/shards=2/window=1m:1d" {
		t.Errorf("run name %q, want bolt/naive/shards=2/window=1m:1d", runs[1].Name)
	}
	mustNoCounters(t, s)
	if _, err := bench.Paths(context.Background(), cfg, bench.PathRESP); err == nil {
		t.Error("the resp path accepted windowed counters, which RESP cannot create")
	}
}

// TestKeepCounters leaves the counters written in the store.
func TestKeepCounters(t *testing.T) {
	s := mustBolt(t)
	cfg := bench.Config{Store: s, StoreName: "bolt", Clients: 2, Duration: 100 * time.Millisecond, Shards: []int{1},
		Counters: 50, Prefill: true, KeepCounters: true}
	runs, err := bench.Paths(context.Background(), cfg, bench.PathEngine, bench.PathRESP)
	if err != nil {
		t.Fatal(err)
	}
	checkRuns(t, runs, 2)
	cs, err := s.ListCounters(context.Background(), "bench/", "", 1000)
	if err != nil || len(cs) != 100 {
		t.Fatalf("%d counters left, %v; want the 50 of each run", len(cs), err)
	}
}

// TestPipelineRESP sends 8 commands a round trip to the RESP server.
func TestPipelineRESP(t *testing.T) {
	s := mustBolt(t)
	cfg := bench.Config{Store: s, StoreName: "bolt", Clients: 2, Duration: 200 * time.Millisecond, Shards: []int{4},
		Counters: 40, Pipeline: 8, ReadRatio: 0.25, Workload: bench.WorkloadTimeline, ReadBatch: 5}
	runs, err := bench.Paths(context.Background(), cfg, bench.PathRESP)
	if err != nil {
		t.Fatal(err)
	}
	checkRuns(t, runs, 1)
	if r := runs[0]; r.Name != "bolt/resp/shards=4/pipeline=8" || r.Pipeline != 8 || r.Reads == 0 || r.WritesPerCommit <= 0 {
		t.Errorf("run = %+v, want a pipelined run with reads and the engine's writes per commit", r)
	}
	mustNoCounters(t, s)
	cfg.Pipeline = 4
	if _, err := bench.Paths(context.Background(), cfg, bench.PathEngine); err == nil {
		t.Error("the engine path accepted a pipeline")
	}
}

// TestAfterLoadBolt calls Config.AfterLoad once a run, as its load ends
// and before its counters are read back and deleted, and reports the
// process's own peak of resident memory over each run, where Linux keeps
// one: at least the most sampled.
func TestAfterLoadBolt(t *testing.T) {
	s := mustBolt(t)
	var called []string
	cfg := bench.Config{
		Store: s, StoreName: "bolt", Clients: 4, Duration: 200 * time.Millisecond, Shards: []int{1, 2},
		Counters: 50, Prefill: true,
		AfterLoad: func(run string) error {
			if cs, err := s.ListCounters(context.Background(), "bench/", "", 10); err != nil || len(cs) == 0 {
				t.Errorf("AfterLoad(%s): its counters are gone: %v, %v", run, cs, err)
			}
			called = append(called, run)
			return nil
		},
	}
	runs, err := bench.Paths(context.Background(), cfg, bench.PathEngine)
	if err != nil {
		t.Fatal(err)
	}
	checkRuns(t, runs, 2)
	if len(called) != 2 || called[0] != runs[0].Name || called[1] != runs[1].Name {
		t.Errorf("AfterLoad called with %q, want the runs %s and %s", called, runs[0].Name, runs[1].Name)
	}
	if _, err := os.Stat("/proc/self/clear_refs"); err == nil {
		for _, r := range runs {
			if m := r.Memory; m == nil || m.RSSPeak <= 0 || m.RSSPeak < m.RSSMax {
				t.Errorf("run %s: memory %+v, want a peak of at least the most sampled", r.Name, m)
			}
		}
	}
	mustNoCounters(t, s)
}
