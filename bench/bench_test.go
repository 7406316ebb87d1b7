package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bench"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/postgres"
)

// mustStore opens a real store: PostgreSQL on a fresh test database.
func mustStore(tb testing.TB) shardcounter.CounterStore {
	tb.Helper()
	s, err := postgres.Open(context.Background(), pgtest.MustDatabase(tb), postgres.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestNaive(t *testing.T) {
	s := mustStore(t)
	runs, err := bench.Naive(context.Background(), bench.Config{
		Store: s, StoreName: "postgres", Clients: 4, Counters: 2, Duration: 300 * time.Millisecond, Shards: []int{1, 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2", len(runs))
	}
	for i, r := range runs {
		if r.Store != "postgres" || r.Path != "naive" || r.Shards != []int{1, 4}[i] || r.Clients != 4 || r.Counters != 2 {
			t.Errorf("run %d = %+v: wrong description", i, r)
		}
		if r.Ops == 0 || r.Errors != 0 || !r.Verified {
			t.Errorf("run %d = %+v, want acknowledged writes, no errors, verified", i, r)
		}
		if r.DurationS < 0.3 || r.OpsPerSec <= 0 || r.P50MS <= 0 || r.P99MS < r.P50MS {
			t.Errorf("run %d = %+v: implausible timing", i, r)
		}
	}
	// The benchmark cleans up after itself.
	if cs, err := s.ListCounters(context.Background(), "bench/", "", 10); err != nil || len(cs) != 0 {
		t.Errorf("counters left behind: %v, %v", cs, err)
	}
}

// lossy acknowledges every second Add without applying it. The first
// write of a run makes two: one that finds no counter, and one after
// creating it, which is lost; so every run loses a write, however few the
// machine lets it make.
type lossy struct {
	shardcounter.CounterStore
	n atomic.Int64
}

func (l *lossy) Add(ctx context.Context, id string, delta int64, pick uint64) error {
	if l.n.Add(1)%2 == 0 {
		return nil
	}
	return l.CounterStore.Add(ctx, id, delta, pick)
}

// failing refuses every write.
type failing struct{ shardcounter.CounterStore }

func (failing) Add(context.Context, string, int64, uint64) error { return shardcounter.ErrUnavailable }

func TestNaiveVerified(t *testing.T) {
	s := mustStore(t)
	cfg := bench.Config{StoreName: "postgres", Clients: 2, Duration: 100 * time.Millisecond, Shards: []int{2}}

	t.Run("Lost", func(t *testing.T) {
		cfg.Store = &lossy{CounterStore: s}
		runs, err := bench.Naive(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r := runs[0]; r.Verified {
			t.Fatalf("run over a store that loses acknowledged writes = %+v, want not verified", r)
		}
	})
	t.Run("Errors", func(t *testing.T) {
		cfg.Store = failing{s}
		runs, err := bench.Naive(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		// Failed writes are not acknowledged: none applied, none counted.
		if r := runs[0]; r.Ops != 0 || r.Errors == 0 || !r.Verified || r.P99MS != 0 {
			t.Fatalf("run over a failing store = %+v, want 0 ops, errors counted, verified", r)
		}
	})
	t.Run("BadShards", func(t *testing.T) {
		cfg.Store, cfg.Shards = s, []int{0}
		if _, err := bench.Naive(context.Background(), cfg); !errors.Is(err, shardcounter.ErrInvalid) {
			t.Fatalf("Naive with 0 shards = %v, want ErrInvalid", err)
		}
	})
}

func TestMeasurePercentile(t *testing.T) {
	m := &bench.Measurement{}
	for i := 1; i <= 200; i++ {
		m.Latencies = append(m.Latencies, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 100 * time.Millisecond}, {0.99, 198 * time.Millisecond}, {1, 200 * time.Millisecond}, {0.001, time.Millisecond}} {
		if got := m.Percentile(c.p); got != c.want {
			t.Errorf("Percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := (&bench.Measurement{}).Percentile(0.5); got != 0 {
		t.Errorf("Percentile of no samples = %v, want 0", got)
	}
}

func TestMeasureCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int64
	_, err := bench.Measure(ctx, 3, time.Hour, func(context.Context) error {
		if calls.Add(1) == 10 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Measure after cancel = %v, want context.Canceled", err)
	}
}

func TestReportJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := bench.NewReport([]bench.Run{{Name: "x", Path: "naive"}}).WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Machine map[string]any   `json:"machine"`
		Runs    []map[string]any `json:"runs"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Machine["cpus"].(float64) < 1 || !strings.HasPrefix(got.Machine["go"].(string), "go") {
		t.Errorf("machine = %v, want cpus and go version", got.Machine)
	}
	// SPEC.md: each run has at least these fields.
	for _, k := range []string{"name", "store", "path", "shards", "clients", "duration_s", "ops", "ops_per_sec", "p50_ms", "p99_ms", "errors", "verified"} {
		if _, ok := got.Runs[0][k]; !ok {
			t.Errorf("run JSON %v lacks %q", slices.Sorted(maps.Keys(got.Runs[0])), k)
		}
	}
}

func TestWriteTable(t *testing.T) {
	var buf bytes.Buffer
	err := bench.WriteTable(&buf, []bench.Run{
		{Name: "postgres/naive/shards=1", Path: "naive", Shards: 1, Clients: 64, Ops: 1000, OpsPerSec: 100, Verified: true},
		{Name: "postgres/naive/shards=64", Path: "naive", Shards: 64, Clients: 64, Ops: 4500, OpsPerSec: 450, Verified: true},
		{Name: "postgres/engine/shards=1", Path: "engine", Shards: 1, Clients: 64, Ops: 9000, OpsPerSec: 900, Verified: true, WritesPerCommit: 31.25},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("table has %d lines, want a header and 3 runs:\n%s", len(lines), buf.String())
	}
	for _, l := range lines[1:] {
		if utf8.RuneCountInString(l) != utf8.RuneCountInString(lines[0]) {
			t.Errorf("table is not aligned:\n%s", buf.String())
		}
	}
	tail := func(l string) string { f := strings.Fields(l); return strings.Join(f[len(f)-2:], " ") }
	if tail(lines[1]) != "1.00× -" || tail(lines[2]) != "4.50× -" {
		t.Errorf("table lacks throughput relative to the first run, or shows writes per commit of a naive run:\n%s", buf.String())
	}
	if tail(lines[3]) != "9.00× 31.2" {
		t.Errorf("table lacks the engine run's writes per commit:\n%s", buf.String())
	}
}

func TestPathsEngine(t *testing.T) {
	s := mustStore(t)
	runs, err := bench.Paths(context.Background(), bench.Config{
		Store: s, StoreName: "postgres", Clients: 16, Duration: 300 * time.Millisecond, Shards: []int{4},
	}, bench.PathNaive, bench.PathEngine)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Path != "naive" || runs[1].Path != "engine" || runs[1].Name != "postgres/engine/shards=4" {
		t.Fatalf("runs = %+v, want a naive then an engine run", runs)
	}
	if r := runs[1]; r.Ops == 0 || r.Errors != 0 || !r.Verified || r.WritesPerCommit < 1 {
		t.Fatalf("engine run = %+v, want acknowledged writes, no errors, verified, writes per commit", r)
	}
	// One engine run per MaxInFlight value, each named for it.
	runs, err = bench.Paths(context.Background(), bench.Config{
		Store: s, StoreName: "postgres", Clients: 16, Duration: 200 * time.Millisecond, Shards: []int{1}, MaxInFlight: []int{1, 3},
	}, bench.PathNaive, bench.PathEngine)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range runs {
		names = append(names, r.Name)
		if r.Ops == 0 || r.Errors != 0 || !r.Verified {
			t.Errorf("run %+v: want acknowledged writes, no errors, verified", r)
		}
	}
	if got, want := strings.Join(names, " "), "postgres/naive/shards=1 postgres/engine/shards=1/in-flight=1 postgres/engine/shards=1/in-flight=3"; got != want {
		t.Fatalf("runs %s, want %s", got, want)
	}
	if _, err := bench.Paths(context.Background(), bench.Config{Store: s}, "warp"); err == nil {
		t.Fatal("an unknown path was accepted")
	}
}
