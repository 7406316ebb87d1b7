package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/shardcounter/shardcounter/bench"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/postgres"
)

// TestBenchCollections measures collections on the test server, the
// figures of docs/COLLECTIONS.md, "Measured". It runs only when
// SHARDCOUNTER_BENCH=1 (see scripts/bench-collections.sh for the knobs;
// SHARDCOUNTER_BENCH_PG_MAXIN sets the shards one statement covers):
//
//	SHARDCOUNTER_BENCH=1 go test ./postgres -run TestBenchCollections -v -count=1 -timeout 30m
func TestBenchCollections(t *testing.T) {
	if os.Getenv("SHARDCOUNTER_BENCH") != "1" {
		t.Skip("set SHARDCOUNTER_BENCH=1 to run the benchmark")
	}
	cfg, err := bench.CollectionsConfigFromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	s, err := postgres.Open(context.Background(), pgtest.MustDatabase(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cs := s.Collections()
	if v := os.Getenv("SHARDCOUNTER_BENCH_PG_MAXIN"); v != "" {
		if cs.MaxIn, err = strconv.Atoi(v); err != nil || cs.MaxIn < 1 {
			t.Fatalf("SHARDCOUNTER_BENCH_PG_MAXIN=%q: give a whole number of at least 1", v)
		}
	}
	cfg.Store, cfg.StoreName = cs, fmt.Sprintf("postgres/in%d", cs.MaxScanShards())
	var syncCommit, version, autovacuum, buffers string
	if err := s.Pool().QueryRow(context.Background(), `SELECT current_setting('synchronous_commit'), current_setting('server_version'),
	current_setting('autovacuum'), current_setting('shared_buffers')`).Scan(&syncCommit, &version, &autovacuum, &buffers); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("PostgreSQL %s, synchronous_commit=%s, autovacuum=%s, shared_buffers=%s, pool %d connections, IN chunks of %d shards\n",
		version, syncCommit, autovacuum, buffers, s.Pool().Config().MaxConns, cs.MaxScanShards())
	// A server with autovacuum on would do this by itself; one with it
	// off (as some test machines run) would otherwise plan the queries on
	// the statistics of empty tables, and fill the next collection among
	// the dead rows of the last one.
	cfg.Maintain = func(ctx context.Context) error {
		_, err := s.Pool().Exec(ctx, "VACUUM ANALYZE shardcounter.documents, shardcounter.document_index")
		return err
	}
	runs, err := bench.Collections(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := bench.ReportCollections(os.Stdout, runs, os.Getenv("SHARDCOUNTER_BENCH_JSON")); err != nil {
		t.Fatal(err)
	}
}
