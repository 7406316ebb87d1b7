package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchWorkloads runs the new workloads end to end on the default
// store (a temporary Pebble directory): timelines over sum and distinct counters
// prefilled, on the engine and the RESP server the bench starts, then
// bounded and windowed counters next to plain ones.
func TestBenchWorkloads(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "report.json")
	out := Run(t, dir, nil, "bench", "--path", "engine", "--path", "resp", "--shards", "2", "--clients", "4", "--duration", "200ms",
		"--counters", "50", "--zipf", "1.5", "--workload", "timeline", "--kind", "sum", "--kind", "distinct", "--members", "10",
		"--prefill", "--peer", "http-bare", "--json", report).MustOK(t)
	for _, want := range []string{"50 sum and distinct counters (Zipf s=1.5), all prefilled, timeline: 90% cached reads of 20 counters",
		"pebble/engine/shards=2/distinct", "pebble/resp/shards=2", "RSS MiB before"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Runs []struct {
			Name, Path, Kind, Workload string
			Verified                   bool
			Reads, Writes              int64
			Touched                    int64 `json:"counters_touched"`
			Memory                     *struct {
				RSSBefore int64 `json:"rss_before_bytes"`
			}
		} `json:"runs"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 5 {
		t.Fatalf("report has %d runs, want 2 paths × 2 kinds and the peer: %s", len(rep.Runs), data)
	}
	for _, r := range rep.Runs[:4] {
		if !r.Verified || r.Reads == 0 || r.Writes == 0 || r.Touched != 50 || r.Workload != "timeline" || r.Memory == nil || r.Memory.RSSBefore <= 0 {
			t.Errorf("run %+v: want verified timeline reads and writes over all 50 counters, with memory", r)
		}
	}

	// Bounds of 0 and 0 refuse every write, so the bounded runs report
	// refusals however few operations a loaded machine lets them make.
	out = Run(t, dir, nil, "bench", "--path", "engine", "--path", "http", "--shards", "1", "--clients", "4", "--duration", "200ms",
		"--min", "0", "--max", "0", "--window", "1m:1d").MustOK(t)
	for _, want := range []string{"plain and min=0,max=0 and window=1m:1d, +1/−1 writes (50% −1)", "pebble/engine/shards=1/min=0,max=0",
		"pebble/http/shards=1/window=1m:1d", "refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "false") {
		t.Errorf("a run was not verified:\n%s", out)
	}
}

// TestBenchRanking runs the ranking workload end to end on the default
// store, by value with the sorted-set peer (a redis-server of its own),
// and by a trailing window.
func TestBenchRanking(t *testing.T) {
	dir := t.TempDir()
	out := Run(t, dir, nil, "bench", "--workload", "ranking", "--counters", "50", "--clients", "4", "--duration", "200ms",
		"--peer", "redis-zset").MustOK(t)
	for _, want := range []string{"50 counters (Zipf 1.1), 4 clients", "ranking by value", "writes, with the ranking (1)",
		"90% writes, 10% top 10", "writes with the ranking / without, over the 3 rounds:", "redis ZINCRBY/ZREVRANGE", "mix: shardcounter / redis sorted set:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out = Run(t, dir, nil, "bench", "--workload", "ranking", "--counters", "50", "--clients", "4", "--duration", "200ms", "--last", "1h").MustOK(t)
	if !strings.Contains(out, "ranking by the sum of the last 1h") || strings.Contains(out, "redis") || strings.Contains(out, "errors") {
		t.Errorf("a windowed run without the peer, without errors, wanted:\n%s", out)
	}
}

// TestBenchLimit runs the limit workload end to end on the default store
// against its peers on a redis-server of its own: every run verified
// (each take admitted and counted), with the ratios to the peers.
func TestBenchLimit(t *testing.T) {
	dir := t.TempDir()
	out := Run(t, dir, nil, "bench", "--workload", "limit", "--clients", "4", "--duration", "200ms").MustOK(t)
	for _, want := range []string{"takes of cost 1 from one hot key", "4 clients", "pebble/resp/CL.THROTTLE", "pebble/http/take",
		"peer/redis-sliding-zset/appendfsync=always", "peer/redis-fixed-window/appendfsync=always", "vs redis-fixed-window/appendfsync=always"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "false") {
		t.Errorf("a run was not verified:\n%s", out)
	}
}

// TestBenchFlagErrors checks that each new flag refuses what it cannot
// use with exit 2 and a message that names it and says what to give.
func TestBenchFlagErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--workload", "feed"}, "--workload"},
		{[]string{"--read-batch", "20"}, "--read-batch goes with --workload timeline"},
		{[]string{"--workload", "timeline", "--read-batch", "0"}, "--read-batch 0"},
		{[]string{"--workload", "timeline", "--read-batch", "1001"}, "--read-batch 1001"},
		{[]string{"--read-ratio", "NaN"}, "--read-ratio"},
		{[]string{"--kind", "max"}, "--kind"},
		{[]string{"--members", "10"}, "--members goes with --kind distinct"},
		{[]string{"--kind", "distinct", "--members", "0"}, "--members 0"},
		{[]string{"--kind", "distinct", "--members", "1e6"}, "members"},
		{[]string{"--decr-ratio", "1.5"}, "--decr-ratio"},
		{[]string{"--decr-ratio", "-Inf"}, "--decr-ratio"},
		{[]string{"--min", "1"}, "min 1 is above 0"},
		{[]string{"--max", "-1"}, "max -1 is below 0"},
		{[]string{"--min", "0.5"}, "not a whole number"},
		{[]string{"--min", "99999999999999999999"}, "not a whole number"},
		{[]string{"--window", "1s:1d"}, "--window"},
		{[]string{"--window", "1h"}, "BUCKET:RETENTION"},
		{[]string{"--kind", "distinct", "--min", "0"}, "go with --kind sum"},
		{[]string{"--kind", "sum", "--kind", "sets"}, "--kind \"sets\""},
		{[]string{"--pipeline", "0"}, "--pipeline 0"},
		{[]string{"--pipeline", "1001"}, "--pipeline 1001"},
		{[]string{"--pipeline", "4", "--path", "engine"}, "--pipeline is for the resp path"},
		{[]string{"--pipeline", "4", "--peer", "http-bare"}, "pipelining is for the resp path"},
		{[]string{"--resp", "127.0.0.1:6380"}, "add --path resp"},
		{[]string{"--path", "resp", "--resp", "6380"}, "HOST:PORT"},
		{[]string{"--path", "resp", "--resp", "127.0.0.1:0"}, "port from 1 to 65535"},
		{[]string{"--path", "resp", "--resp", "127.0.0.1:6380", "--window", "1m:1d"}, "windowed counter"},
		{[]string{"--kind", "distinct", "--peer", "redis-incr", "--peer-redis", "redis://127.0.0.1:1"}, "redis-sadd"},
		{[]string{"--peer", "postgres-insert", "--peer-postgres", "postgres://x"}, "postgres-update"},
		{[]string{"--zipf", "Inf", "--counters", "10"}, "--zipf"},
		{[]string{"--workload", "ranking", "--shards", "1"}, "--shards does not go with --workload ranking"},
		{[]string{"--workload", "ranking", "--peer", "redis-incr"}, "redis-zset"},
		{[]string{"--workload", "ranking", "--peer-redis", "redis://127.0.0.1:1"}, "--peer-redis goes with --peer redis-zset"},
		{[]string{"--workload", "ranking", "--last", "90s"}, "--last 1m30s"},
		{[]string{"--workload", "ranking", "--counters", "1"}, "--counters must be 2 or more"},
		{[]string{"--workload", "limit", "--shards", "1"}, "--shards does not go with --workload limit"},
		{[]string{"--workload", "limit", "--peer-redis", "postgres://x"}, "give a redis://HOST:PORT URL"},
		{[]string{"--workload", "limit", "--clients", "0"}, "--clients and --duration must be positive"},
		{[]string{"--workload", "limit", "--peer-redis", "redis://a:1", "--peer-redis", "redis://b:1"}, "takes one"},
	} {
		t.Run(strings.Join(c.args, "_"), func(t *testing.T) {
			msg := Run(t, dir, nil, append([]string{"bench"}, c.args...)...).MustFail(t, 2)
			if !strings.Contains(msg, c.want) {
				t.Errorf("stderr %q lacks %q", msg, c.want)
			}
		})
	}
}

// chartModules are the plotting, font, PDF and raster libraries a chart
// library brings; none may be linked into the server binary (issue 11).
var chartModules = []string{
	"gonum.org/",
	"codeberg.org/go-fonts/",
	"codeberg.org/go-pdf/",
	"codeberg.org/go-latex/",
	"git.sr.ht/~sbinet/gg",
	"github.com/ajstarks/svgo",
	"github.com/golang/freetype",
	"golang.org/x/image",
}

// TestNoChartLibraries checks both what the package imports (go list
// -deps) and what the built binary links (go version -m): bench --svg
// writes its SVG by hand, so the server carries no chart code.
func TestNoChartLibraries(t *testing.T) {
	readSources()
	deps, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, deps)
	}
	mods, err := exec.Command("go", "version", "-m", binary).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, mods)
	}
	for what, out := range map[string]string{"go list -deps ./cmd/shardcounter": string(deps), "go version -m shardcounter": string(mods)} {
		for line := range strings.Lines(out) {
			for _, m := range chartModules {
				if strings.Contains(line, m) {
					t.Errorf("%s lists %s: the server binary must not link chart libraries", what, strings.TrimSpace(line))
				}
			}
		}
	}
}

// TestBenchMemprofile writes a heap profile as the run's load ends, with
// what the Go runtime holds on stderr, and reports the process's peak of
// resident memory next to the most sampled.
func TestBenchMemprofile(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "heap.prof")
	r := Run(t, dir, nil, "bench", "--path", "engine", "--shards", "1", "--clients", "4", "--duration", "200ms",
		"--counters", "50", "--prefill", "--memprofile", prof)
	out := r.MustOK(t)
	if !strings.Contains(out, ", peak ") {
		t.Errorf("output lacks the peak of resident memory:\n%s", out)
	}
	if !strings.Contains(r.Stderr, "pebble/engine/shards=1: Go heap in use ") || !strings.Contains(r.Stderr, "heap profile in "+prof) {
		t.Errorf("stderr lacks the runtime's memory: %q", r.Stderr)
	}
	data, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b { // pprof's protobuf, gzipped
		t.Errorf("--memprofile wrote %d bytes, not a gzipped profile", len(data))
	}
	if out, err := exec.Command("go", "tool", "pprof", "-sample_index=inuse_space", "-top", prof).CombinedOutput(); err != nil {
		t.Errorf("go tool pprof: %v\n%s", err, out)
	}
}
