package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/postgres"
)

// zipfCounters and zipfShards size BenchmarkApplyZipf's fixture: the
// workload of issue 12, 100,000 counters of 16 shards.
const (
	zipfCounters = 100_000
	zipfShards   = 16
)

// BenchmarkApplyZipf measures what one engine flush costs the store as the
// number of distinct counters in it grows: each op is one Apply of
// items increments of +1, one per counter, on counters drawn with a Zipf
// law (s=1.1) from 100,000 counters of 16 shards, as the engine folds a
// flush of a many-counter workload. The engine runs one flush at a time
// (MaxInFlight 1), so sequential Applies are its write path.
//
// It runs on a private server (so that WAL figures are this benchmark's
// alone) and reports WAL bytes and full-page images per commit:
//
//	go test ./postgres -run '^$' -bench ApplyZipf -benchtime 2000x
//
// SHARDCOUNTER_BENCH_ITEMS (1,8,32,128,512) changes the batch sizes, and
// SHARDCOUNTER_BENCH_SYNC=off runs the server with synchronous_commit=off,
// which takes the WAL flush (a fixed cost per commit, and on a shared
// machine a noisy one) out of the figures, leaving what grows with the
// batch. SHARDCOUNTER_BENCH_REQUESTS=1 gives every item a request id of
// its own, which takes the batches from the one-statement path to the
// general one (lock and read, decide, write). The log shows where the
// server's time went (pg_stat_statements).
func BenchmarkApplyZipf(b *testing.B) {
	s := benchServer(b)
	ctx := context.Background()
	// The fixture in two statements, not 100,000 creates.
	if _, err := s.Pool().Exec(ctx, `
INSERT INTO shardcounter.counters (id, shards) SELECT 'zipf/' || i, $2 FROM generate_series(0, $1 - 1) AS i;
`, zipfCounters, zipfShards); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `
INSERT INTO shardcounter.shards (counter, shard, shards)
SELECT c.id, g, c.shards FROM shardcounter.counters c, generate_series(0, c.shards - 1) AS g`); err != nil {
		b.Fatal(err)
	}
	for _, sql := range []string{"VACUUM ANALYZE shardcounter.counters, shardcounter.shards", "CHECKPOINT"} {
		if _, err := s.Pool().Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	sizes := []int{1, 8, 32, 128, 512}
	if v := os.Getenv("SHARDCOUNTER_BENCH_ITEMS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatalf("SHARDCOUNTER_BENCH_ITEMS: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	requests := os.Getenv("SHARDCOUNTER_BENCH_REQUESTS") == "1"
	z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, zipfCounters-1)
	for _, items := range sizes {
		b.Run(fmt.Sprintf("items=%d", items), func(b *testing.B) {
			batches := make([][]shardcounter.Increment, 64)
			for i := range batches {
				batches[i] = zipfBatch(z, items)
			}
			lsn := func() (bytes int64) {
				if err := s.Pool().QueryRow(ctx, "SELECT pg_current_wal_lsn() - '0/0'").Scan(&bytes); err != nil {
					b.Fatal(err)
				}
				return bytes
			}
			b.ReportAllocs()
			if _, err := s.Pool().Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
				b.Fatal(err)
			}
			start := lsn()
			b.ResetTimer()
			t0 := time.Now()
			for i := 0; b.Loop(); i++ {
				incs := batches[i%len(batches)]
				for j := range incs {
					if requests {
						incs[j].RequestID = strconv.Itoa(i*items + j)
					}
				}
				out, err := s.Apply(ctx, incs)
				if err != nil {
					b.Fatal(err)
				}
				for _, o := range out {
					if o.Err != nil {
						b.Fatal(o.Err)
					}
				}
			}
			took := time.Since(t0)
			b.StopTimer()
			wal := lsn() - start
			b.ReportMetric(float64(wal)/float64(b.N), "WAL-B/op")
			b.ReportMetric(float64(took.Microseconds())/float64(b.N)/float64(items), "µs/item")
			logStatements(b, s)
		})
	}
}

// zipfBatch draws counters until it has n distinct ones and returns one
// +1 increment for each, as the engine folds a flush.
func zipfBatch(z *rand.Zipf, n int) []shardcounter.Increment {
	seen := make(map[uint64]bool, n)
	incs := make([]shardcounter.Increment, 0, n)
	for len(incs) < n {
		i := z.Uint64()
		if seen[i] {
			continue
		}
		seen[i] = true
		incs = append(incs, shardcounter.Increment{Counter: "zipf/" + strconv.FormatUint(i, 10), Delta: 1, Pick: rand.Uint64()})
	}
	return incs
}

// logStatements logs what pg_stat_statements saw, costliest first: where
// a commit's time goes inside the server. plan ms is per plan made (plans),
// exec ms and the buffer and WAL figures per call.
func logStatements(b *testing.B, s *postgres.CounterStore) {
	rows, err := s.Pool().Query(context.Background(), `
SELECT calls, plans, round(mean_plan_time::numeric, 3), round(mean_exec_time::numeric, 3),
	shared_blks_hit / greatest(calls, 1), shared_blks_dirtied / greatest(calls, 1), wal_fpi / greatest(calls, 1), wal_bytes / greatest(calls, 1),
	regexp_replace(left(query, 60), '\s+', ' ', 'g')
FROM pg_stat_statements WHERE calls >= 10 ORDER BY total_exec_time + total_plan_time DESC LIMIT 8`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	b.Logf("%6s %6s %8s %8s %6s %6s %5s %8s  %s", "calls", "plans", "plan ms", "exec ms", "hit", "dirty", "fpi", "WAL B", "statement")
	for rows.Next() {
		var calls, plans, hit, dirtied, fpi int64
		var plan, exec, walB float64
		var q string
		if err := rows.Scan(&calls, &plans, &plan, &exec, &hit, &dirtied, &fpi, &walB, &q); err != nil {
			b.Fatal(err)
		}
		b.Logf("%6d %6d %8.3f %8.3f %6d %6d %5d %8.0f  %s", calls, plans, plan, exec, hit, dirtied, fpi, walB, q)
	}
}

// benchServer starts a private server for a benchmark, with
// pg_stat_statements, and opens a store on it. SHARDCOUNTER_BENCH_SYNC=off
// runs it with synchronous_commit=off.
func benchServer(b *testing.B) *postgres.CounterStore {
	settings := []string{"shared_buffers=256MB", "max_connections=100",
		"shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track_planning=on", "track_io_timing=on"}
	if os.Getenv("SHARDCOUNTER_BENCH_SYNC") == "off" {
		settings = append(settings, "synchronous_commit=off")
	}
	srv := pgtest.StartServer(b, settings...)
	s, err := postgres.Open(context.Background(), srv.URL(), postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if _, err := s.Pool().Exec(context.Background(), "CREATE EXTENSION pg_stat_statements"); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkApplyMembers measures the engine's flush of adds to one hot
// distinct counter of 16 shards: each op is one Apply of N member items,
// members drawn from a million, each carrying Create as the engine's
// auto-create sends them. The log shows the server's time per statement;
// run it long enough (-benchtime 2000x) to see that the cost of a batch
// does not grow with the members already in.
//
//	go test ./postgres -run '^$' -bench ApplyMembers -benchtime 2000x
func BenchmarkApplyMembers(b *testing.B) {
	s := benchServer(b)
	ctx := context.Background()
	spec := shardcounter.Spec{Shards: 16, Kind: shardcounter.KindDistinct}
	for _, items := range []int{1, 64} {
		b.Run(fmt.Sprintf("items=%d", items), func(b *testing.B) {
			if _, err := s.Pool().Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				incs := make([]shardcounter.Increment, items)
				for i := range incs {
					incs[i] = shardcounter.Increment{Counter: "likes", Member: fmt.Sprint("user-", rand.IntN(1_000_000)), Delta: 1, Create: &spec}
				}
				out, err := s.Apply(ctx, incs)
				if err != nil {
					b.Fatal(err)
				}
				for _, o := range out {
					if o.Err != nil {
						b.Fatal(o.Err)
					}
				}
			}
			logStatements(b, s)
		})
	}
}
