package main_test

import (
	"os/exec"
	"strings"
	"testing"
)

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
