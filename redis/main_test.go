package redis_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shardcounter/shardcounter/internal/redistest"
	"github.com/shardcounter/shardcounter/redis"
)

// The tests share one single server and one 3-master cluster, started on
// first use and stopped when the tests end; tests that kill a node start
// their own.
var shared struct {
	dir     string
	server  sync.Once
	srv     *redistest.Server
	srvErr  error
	cluster sync.Once
	cl      *redistest.Cluster
	clErr   error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shardcounter-redis-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared.dir = dir
	code := m.Run()
	if shared.srv != nil {
		shared.srv.Stop()
	}
	if shared.cl != nil {
		shared.cl.Stop()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// sharedServer returns the single server of the tests.
func sharedServer(tb testing.TB) *redistest.Server {
	tb.Helper()
	shared.server.Do(func() { shared.srv, shared.srvErr = redistest.Start(shared.dir) })
	if shared.srvErr != nil {
		tb.Fatal(shared.srvErr)
	}
	return shared.srv
}

// sharedCluster returns the 3-master cluster of the tests.
func sharedCluster(tb testing.TB) *redistest.Cluster {
	tb.Helper()
	shared.cluster.Do(func() { shared.cl, shared.clErr = redistest.StartCluster(shared.dir, 3) })
	if shared.clErr != nil {
		tb.Fatal(shared.clErr)
	}
	return shared.cl
}

func serverDSN(s *redistest.Server) string { return "redis://" + s.Addr }

func clusterDSN(c *redistest.Cluster) string {
	a := c.Addrs()
	return "redis+cluster://" + a[0] + "?addr=" + strings.Join(a[1:], "&addr=")
}

// MustOpen opens a store on dsn, closed when the test ends. Each call gives
// a new client with its own caches, as another process would have.
func MustOpen(tb testing.TB, dsn string) *redis.CounterStore {
	tb.Helper()
	s, err := redis.Open(context.Background(), dsn, redis.Options{})
	if err != nil {
		tb.Fatalf("Open(%q): %v", dsn, err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// backends runs f once on the single server and once on the cluster.
func backends(t *testing.T, f func(t *testing.T, dsn string)) {
	t.Run("Standalone", func(t *testing.T) { f(t, serverDSN(sharedServer(t))) })
	t.Run("Cluster", func(t *testing.T) { f(t, clusterDSN(sharedCluster(t))) })
}

var (
	run  = fmt.Sprintf("/%x", os.Getpid())
	runs atomic.Int64
)

// runID returns a suffix unique to this call, so ids do not collide with
// those of an earlier run on the same server, nor with those of an earlier
// run of the same test in this process (-count).
func runID() string { return fmt.Sprintf("%s.%d", run, runs.Add(1)) }

// MustStartServer starts a server of the test's own, for tests that stop it.
func MustStartServer(tb testing.TB) *redistest.Server { return redistest.MustStart(tb) }
