package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/bench"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/postgres"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestBenchNaive measures the naive path on the test server, the figures
// of docs/BENCHMARKS.md. It runs only when SHARDCOUNTER_BENCH=1, since it
// takes a while and loads the machine:
//
//	SHARDCOUNTER_BENCH=1 go test ./postgres -run TestBenchNaive -v -count=1 -timeout 10m
//
// SHARDCOUNTER_BENCH_CLIENTS (64), _SHARDS (1,4,16,64), _DURATION (10s)
// and _JSON (a file for the report) change it. The pool is as large as
// the number of clients, so that every writer has a connection.
func TestBenchNaive(t *testing.T) {
	if os.Getenv("SHARDCOUNTER_BENCH") != "1" {
		t.Skip("set SHARDCOUNTER_BENCH=1 to run the benchmark")
	}
	cfg := bench.Config{StoreName: "postgres", Clients: 64, Duration: 10 * time.Second, Shards: bench.DefaultShards}
	if v := os.Getenv("SHARDCOUNTER_BENCH_CLIENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("SHARDCOUNTER_BENCH_CLIENTS: %v", err)
		}
		cfg.Clients = n
	}
	if v := os.Getenv("SHARDCOUNTER_BENCH_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SHARDCOUNTER_BENCH_DURATION: %v", err)
		}
		cfg.Duration = d
	}
	if v := os.Getenv("SHARDCOUNTER_BENCH_SHARDS"); v != "" {
		cfg.Shards = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("SHARDCOUNTER_BENCH_SHARDS: %v", err)
			}
			cfg.Shards = append(cfg.Shards, n)
		}
	}

	u, err := url.Parse(pgtest.MustDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(cfg.Clients))
	u.RawQuery = q.Encode()
	s, err := postgres.Open(context.Background(), u.String(), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg.Store = s
	var syncCommit, version string
	if err := s.Pool().QueryRow(context.Background(), "SELECT current_setting('synchronous_commit'), current_setting('server_version')").Scan(&syncCommit, &version); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("PostgreSQL %s, synchronous_commit=%s, %d clients, pool %d connections, %v per run\n",
		version, syncCommit, cfg.Clients, s.Pool().Config().MaxConns, cfg.Duration)

	runs, err := bench.Naive(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := bench.WriteTable(os.Stdout, runs); err != nil {
		t.Fatal(err)
	}
	if path := os.Getenv("SHARDCOUNTER_BENCH_JSON"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := bench.NewReport(runs).WriteJSON(f); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range runs {
		if !r.Verified || r.Errors != 0 {
			t.Errorf("%s: %d errors, verified %v: want every write acknowledged and counted", r.Name, r.Errors, r.Verified)
		}
	}
}

// BenchmarkAdd measures the naive path's cost per write (one UPDATE and
// its commit) from GOMAXPROCS goroutines, by shard count.
func BenchmarkAdd(b *testing.B) {
	s := MustOpen(b)
	for _, shards := range []int{1, 64} {
		// Created once: b.Run calls its function more than once.
		id := fmt.Sprintf("bench-add-%d", shards)
		storetest.MustCreate(b, s, id, shards)
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.Add(context.Background(), id, 1, rand.Uint64()); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
