package bench

import (
	"context"
	"fmt"
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
		r, err := throttleRun(ctx, cfg, fmt.Sprintf("b%d", i))
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
