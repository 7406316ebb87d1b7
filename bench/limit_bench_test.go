package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/dsn"
)

// BenchmarkThrottlePebble is the limit workload's CL.THROTTLE run alone
// (throttleRun: 64 clients over a RESP port served in this process, one
// hot key, a Pebble store in a temporary directory), for profiling the
// take path: go test -bench ThrottlePebble -benchtime 1x -cpuprofile.
// Each iteration is a run of LIMIT_DURATION (5s); it reports takes/s, the
// p99 in ms and the process's CPU µs a take (load generator included).
func BenchmarkThrottlePebble(b *testing.B) {
	benchLimitRun(b, throttleRun)
}

// BenchmarkTakeHTTPPebble is the limit workload's HTTP run alone
// (takeRun: 64 clients taking through POST /v1/limits/{name}/keys/{key}/take
// on an HTTP server in this process, a fixed window of one hot key, a
// Pebble store in a temporary directory), for profiling the HTTP take
// path as BenchmarkThrottlePebble profiles CL.THROTTLE's.
func BenchmarkTakeHTTPPebble(b *testing.B) {
	benchLimitRun(b, takeRun)
}

// benchLimitRun runs run for LIMIT_DURATION (5s) an iteration over a
// Pebble store of its own and reports takes/s, the p99 in ms, the
// process's CPU µs a take (load generator included) and takes a commit.
func benchLimitRun(b *testing.B, run func(context.Context, LimitConfig, string) (Run, error)) {
	d := 5 * time.Second
	if s := os.Getenv("LIMIT_DURATION"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	store, err := dsn.Open(ctx, "pebble:"+filepath.Join(b.TempDir(), "pebble"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	cfg := LimitConfig{Store: store, StoreName: dsn.Pebble, Clients: 64, Duration: d}
	for i := 0; i < b.N; i++ {
		before := cpuTime()
		r, err := run(ctx, cfg, fmt.Sprintf("b%d", i))
		cpu := cpuTime() - before
		if err != nil || !r.Verified {
			b.Fatalf("%+v, %v", r, err)
		}
		b.ReportMetric(r.OpsPerSec, "takes/s")
		b.ReportMetric(r.P99MS, "p99-ms")
		b.ReportMetric(float64(cpu.Microseconds())/float64(r.Ops), "cpu-µs/take")
		b.ReportMetric(r.WritesPerCommit, "takes/commit")
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru) //nolint:errcheck // Linux
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTakeHTTPBare is BenchmarkTakeHTTPPebble's load generator on the
// http-bare peer's handler, which answers every take admitted and keeps
// no state: the floor that HTTP and the load generator set on the CPU of
// a take in this process.
func BenchmarkTakeHTTPBare(b *testing.B) {
	benchLimitRun(b, func(ctx context.Context, cfg LimitConfig, prefix string) (Run, error) {
		srv, url, err := serveLoopback(&bareHandler{})
		if err != nil {
			return Run{}, err
		}
		defer srv.Close()
		lg := newLoadgen(url, "", cfg.Clients)
		defer lg.close()
		run := Run{Name: "bare/take"}
		err = measureTakes(ctx, cfg, &run,
			func(ctx context.Context, _ int, _ int64) (bool, error) {
				return true, lg.do(ctx, http.MethodPost, "/v1/limits/"+prefix+"/keys/hot/take", takeBody, nil)
			},
			func(context.Context, int64, time.Duration) (bool, error) { return true, nil })
		return run, err
	})
}
