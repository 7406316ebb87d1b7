package redis_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/shardcounter/shardcounter/bench"
)

// TestBenchCollections measures collections on the tests' 3-master Redis
// Cluster (and, with SHARDCOUNTER_BENCH_REDIS=standalone, on one server),
// the figures of docs/COLLECTIONS.md, "Measured". It runs only when
// SHARDCOUNTER_BENCH=1 (see scripts/bench-collections.sh for the knobs):
//
//	SHARDCOUNTER_BENCH=1 go test ./redis -run TestBenchCollections -v -count=1 -timeout 30m
func TestBenchCollections(t *testing.T) {
	if os.Getenv("SHARDCOUNTER_BENCH") != "1" {
		t.Skip("set SHARDCOUNTER_BENCH=1 to run the benchmark")
	}
	cfg, err := bench.CollectionsConfigFromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	dsn, name := clusterDSN(sharedCluster(t)), "redis-cluster"
	if os.Getenv("SHARDCOUNTER_BENCH_REDIS") == "standalone" {
		dsn, name = serverDSN(sharedServer(t)), "redis"
	}
	cfg.Store, cfg.StoreName = MustOpen(t, dsn).Collections(), name
	fmt.Printf("%s at %s\n", name, dsn)
	runs, err := bench.Collections(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := bench.ReportCollections(os.Stdout, runs, os.Getenv("SHARDCOUNTER_BENCH_JSON")); err != nil {
		t.Fatal(err)
	}
}
