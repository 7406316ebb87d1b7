package bench_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bench"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/internal/redistest"
)

// TestPeersTimeline runs the timeline against the sum peers: batch reads
// are MGET, SELECT ... = ANY and the bare handler's POST.
func TestPeersTimeline(t *testing.T) {
	r := redistest.MustStart(t, "appendonly yes", "appendfsync everysec")
	db := pgtest.MustDatabase(t)
	cfg := bench.Config{Clients: 4, Duration: 300 * time.Millisecond, Counters: 500, Zipf: 1.1,
		Workload: bench.WorkloadTimeline, ReadRatio: 0.5, DecrRatio: 0.3}
	runs, err := bench.Peers(context.Background(), cfg, []bench.Peer{
		{Kind: bench.PeerRedisIncr, Target: "redis://" + r.Addr},
		{Kind: bench.PeerPostgresUpdate, Target: db},
		{Kind: bench.PeerHTTPBare},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkRuns(t, runs, 3)
	for _, run := range runs {
		if run.Reads == 0 || run.Workload != bench.WorkloadTimeline || run.ReadBatch != bench.DefaultReadBatch || run.DecrRatio != 0.3 {
			t.Errorf("run %s = %+v, want timeline reads of %d counters", run.Name, run, bench.DefaultReadBatch)
		}
	}
	// Redis says how much memory it holds; the others have no figure.
	if m := runs[0].Memory; m == nil || m.Process != "redis" || m.RSSBefore <= 0 || m.RSSAfter <= 0 || m.RSSMax < m.RSSAfter {
		t.Errorf("redis peer memory = %+v, want the server's RSS before, max and after", m)
	}
	if runs[1].Memory != nil {
		t.Errorf("postgres peer memory = %+v, want none", runs[1].Memory)
	}
	if n, err := r.Do("DBSIZE"); err != nil || n != ":0" {
		t.Errorf("DBSIZE after the peer = %q, %v, want :0", n, err)
	}
}

// TestPeersDistinct runs the distinct counters' peers with a small
// population, so that members are added again and removed: a run is
// verified when the count equals the adds and removes that changed it.
func TestPeersDistinct(t *testing.T) {
	r := redistest.MustStart(t)
	db := pgtest.MustDatabase(t)
	for _, cfg := range []bench.Config{
		{Clients: 4, Duration: 300 * time.Millisecond, Kind: shardcounter.KindDistinct, Members: 30, DecrRatio: 0.3, ReadRatio: 0.2},
		{Clients: 4, Duration: 300 * time.Millisecond, Kind: shardcounter.KindDistinct, Members: 30, Counters: 50,
			Workload: bench.WorkloadTimeline, ReadRatio: 0.5, Prefill: true},
	} {
		runs, err := bench.Peers(context.Background(), cfg, []bench.Peer{
			{Kind: bench.PeerRedisSadd, Target: "redis://" + r.Addr},
			{Kind: bench.PeerPostgresInsert, Target: db},
			{Kind: bench.PeerHTTPBare},
		})
		if err != nil {
			t.Fatal(err)
		}
		checkRuns(t, runs, 3)
		for i, want := range []string{"peer/redis-sadd/appendonly=no", "peer/postgres-insert/synchronous_commit=on", "peer/http-bare"} {
			if run := runs[i]; run.Name != want || run.Kind != "distinct" || run.Members != 30 {
				t.Errorf("run %d = %+v, want %s on distinct counters of 30 members", i, run, want)
			}
		}
		if cfg.Prefill && (runs[0].Touched != 50 || runs[1].Touched != 50) {
			t.Errorf("prefilled runs touched %d and %d counters, want all 50", runs[0].Touched, runs[1].Touched)
		}
		if n, err := r.Do("DBSIZE"); err != nil || n != ":0" {
			t.Errorf("DBSIZE after the peer = %q, %v, want :0", n, err)
		}
	}
}

// TestPeersBothKinds runs each peer on the kind it counts when a report
// has sum and distinct counters.
func TestPeersBothKinds(t *testing.T) {
	r := redistest.MustStart(t)
	cfg := bench.Config{Clients: 2, Duration: 200 * time.Millisecond, Members: 20, Variants: []bench.Variant{bench.Plain(), bench.Distinct()}}
	runs, err := bench.Peers(context.Background(), cfg, []bench.Peer{
		{Kind: bench.PeerRedisIncr, Target: "redis://" + r.Addr},
		{Kind: bench.PeerRedisSadd, Target: "redis://" + r.Addr},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkRuns(t, runs, 2)
	if runs[0].Kind != "sum" || runs[1].Kind != "distinct" || runs[1].Members != 20 {
		t.Errorf("runs %+v, want a sum then a distinct run", runs)
	}
}

// TestPeersPipeline sends 8 INCRs a round trip to Redis.
func TestPeersPipeline(t *testing.T) {
	r := redistest.MustStart(t)
	cfg := bench.Config{Clients: 2, Duration: 200 * time.Millisecond, Counters: 100, Pipeline: 8, ReadRatio: 0.25}
	runs, err := bench.Peers(context.Background(), cfg, []bench.Peer{{Kind: bench.PeerRedisIncr, Target: "redis://" + r.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	checkRuns(t, runs, 1)
	if run := runs[0]; run.Name != "peer/redis-incr/appendonly=no/pipeline=8" || run.Pipeline != 8 || run.Reads == 0 {
		t.Errorf("run = %+v, want a pipelined run with reads", run)
	}
}

// TestPeerFits checks that a peer counts what the counters count, and
// that only the Redis peers pipeline.
func TestPeerFits(t *testing.T) {
	distinct := bench.Config{Kind: shardcounter.KindDistinct}
	for _, c := range []struct {
		peer string
		cfg  bench.Config
		want string // in the error; "" for none
	}{
		{bench.PeerRedisIncr, bench.Config{}, ""},
		{bench.PeerRedisSadd, distinct, ""},
		{bench.PeerHTTPBare, distinct, ""},
		{bench.PeerRedisIncr, bench.Config{Variants: []bench.Variant{bench.Distinct(), bench.Plain()}}, ""},
		{bench.PeerPostgresInsert, bench.Config{Variants: []bench.Variant{bench.Distinct(), bench.Plain()}}, ""},
		{bench.PeerRedisIncr, distinct, "redis-sadd"},
		{bench.PeerPostgresUpdate, distinct, "postgres-insert"},
		{bench.PeerRedisSadd, bench.Config{}, "redis-incr"},
		{bench.PeerPostgresInsert, bench.Config{}, "postgres-update"},
		{bench.PeerRedisIncr, bench.Config{Pipeline: 4}, ""},
		{bench.PeerPostgresUpdate, bench.Config{Pipeline: 4}, "pipelining"},
		{bench.PeerHTTPBare, bench.Config{Pipeline: 4}, "pipelining"},
		{"memcached-incr", bench.Config{}, "unknown"},
	} {
		err := bench.PeerFits(c.peer, c.cfg)
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("PeerFits(%s, %+v) = %v, want an error with %q", c.peer, c.cfg, err, c.want)
		}
	}
}
