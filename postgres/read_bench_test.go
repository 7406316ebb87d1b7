package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/pgtest"
)

// BenchmarkReadPlan reads one counter of 8 shards (hot, as RESP GET of
// one key does), and random counters of 100,000 of one shard (ids=k), with
// readSQL as ReadCounters sends it, after pinPlans (pinned), and alone
// (default), where PostgreSQL chooses its plan each call: what the
// generic plan saves a strong read (docs/POSTGRES.md).
//
//	go test -run '^$' -bench BenchmarkReadPlan ./postgres
func BenchmarkReadPlan(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.MustDatabase(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	const n = 100000
	spec := &shardcounter.Spec{Shards: 1}
	for lo := 0; lo < n; lo += 5000 {
		incs := make([]shardcounter.Increment, 0, 5000)
		for i := lo; i < lo+5000; i++ {
			incs = append(incs, shardcounter.Increment{Counter: fmt.Sprint("c", i), Delta: 1, Create: spec})
		}
		if _, err := s.Apply(ctx, incs); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.CreateCounter(ctx, "hot", shardcounter.Spec{Shards: 8}); err != nil {
		b.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE"); err != nil {
		b.Fatal(err)
	}
	for _, k := range []int{0, 1, 40, 400} { // 0: hot
		for _, pinned := range []bool{true, false} {
			name := fmt.Sprintf("ids=%d", k)
			if k == 0 {
				name = "hot"
			}
			name += map[bool]string{true: "/pinned", false: "/default"}[pinned]
			b.Run(name, func(b *testing.B) {
				ids := make([]string, max(k, 1))
				out := make([]*shardcounter.Reading, len(ids))
				for b.Loop() {
					for i := range ids {
						ids[i] = fmt.Sprint("c", rand.IntN(n))
					}
					if k == 0 {
						ids[0] = "hot"
					}
					q := &pgx.Batch{}
					if pinned {
						q.Queue(pinPlans)
					}
					q.Queue(readSQL, ids, nil).Query(func(rows pgx.Rows) error { return scanReadings(rows, ids, out) })
					if err := s.pool.SendBatch(ctx, q).Close(); err != nil {
						b.Fatal(err)
					}
					if out[0] == nil {
						b.Fatalf("no reading of %s", ids[0])
					}
				}
			})
		}
	}
}
