package bench_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/bench"
	"github.com/shardcounter/shardcounter/dsn"
	"github.com/shardcounter/shardcounter/internal/redistest"
)

// TestLimits runs the limit workload on Pebble and on a Redis Cluster
// store against a Redis peer with appendfsync always: every take of
// every run is admitted and the key's state afterwards counts them all
// (verified), and the runs leave no key behind on the peer.
func TestLimits(t *testing.T) {
	peer := redistest.MustStart(t, "appendonly yes", "appendfsync always")
	cluster := redistest.MustStartCluster(t, 3)
	for _, c := range []struct{ name, dsn string }{
		{dsn.Pebble, "pebble:" + filepath.Join(t.TempDir(), "pebble")},
		{dsn.RedisCluster, "redis+cluster://" + cluster.Addrs()[0]},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			store, err := dsn.Open(ctx, c.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			runs, err := bench.Limits(ctx, bench.LimitConfig{Store: store, StoreName: c.name, Clients: 4,
				Duration: 300 * time.Millisecond, PeerRedis: "redis://" + peer.Addr})
			if err != nil {
				t.Fatal(err)
			}
			want := []string{c.name + "/resp/CL.THROTTLE", c.name + "/http/take",
				"peer/redis-sliding-zset/appendfsync=always", "peer/redis-fixed-window/appendfsync=always"}
			if len(runs) != len(want) {
				t.Fatalf("%d runs, want %d: %+v", len(runs), len(want), runs)
			}
			for i, r := range runs {
				if r.Name != want[i] || r.Ops == 0 || r.Ops != r.Writes || r.Refused != 0 || r.Errors != 0 || !r.Verified ||
					r.Clients != 4 || r.Workload != bench.WorkloadLimit || r.P99MS < r.P50MS {
					t.Errorf("run %d = %+v, want %s: every take admitted and counted, none refused or failed", i, r, want[i])
				}
			}
			if n, err := peer.Do("DBSIZE"); err != nil || n != ":0" {
				t.Errorf("DBSIZE of the peer after the runs = %q, %v, want :0", n, err)
			}
		})
	}
}
