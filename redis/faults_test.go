package redis_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/faultproxy"
	"github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestFaults runs the faults suite with every connection of the store
// going through proxies (one per Cluster node) that cut them during
// commits: slot groups whose reply was lost are settled by their markers.
// StandalonePartition black-holes the network for 1.5 s instead, past the
// commits' deadline (0.5 s): the writes caught in it are outcome unknown,
// and settle when retried with their request ids.
func TestFaults(t *testing.T) {
	t.Run("Standalone", func(t *testing.T) { testFaultsStandalone(t, storetest.FaultOptions{}) })
	t.Run("StandalonePartition", func(t *testing.T) {
		testFaultsStandalone(t, storetest.FaultOptions{Partition: 1500 * time.Millisecond, FlushTimeout: 500 * time.Millisecond, Writers: 8})
	})
	t.Run("Cluster", func(t *testing.T) {
		cl := sharedCluster(t)
		d, err := redis.ParseDSN(clusterDSN(cl))
		if err != nil {
			t.Fatal(err)
		}
		// The cluster names its nodes by their own addresses: the dialer
		// sends each through the proxy of that node.
		var proxies []*faultproxy.Proxy
		byAddr := make(map[string]*faultproxy.Proxy)
		for _, a := range cl.Addrs() {
			px := faultproxy.Start(t, a)
			byAddr[a] = px
			proxies = append(proxies, px)
		}
		opts := d.ClusterOptions()
		opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if px := byAddr[addr]; px != nil {
				addr = px.Addr()
			}
			var dl net.Dialer
			return dl.DialContext(ctx, network, addr)
		}
		client := goredis.NewClusterClient(opts)
		t.Cleanup(func() { client.Close() })
		s, err := redis.New(client, redis.Options{})
		if err != nil {
			t.Fatal(err)
		}
		storetest.RunFaults(t, s, proxies, storetest.FaultOptions{})
		t.Logf("%d slot groups settled by their markers", s.Stats().Resolved)
	})
}

func testFaultsStandalone(t *testing.T, opts storetest.FaultOptions) {
	d, err := redis.ParseDSN(serverDSN(sharedServer(t)))
	if err != nil {
		t.Fatal(err)
	}
	px := faultproxy.Start(t, d.Addrs[0])
	co := d.Options()
	co.Addr = px.Addr()
	client := goredis.NewClient(co)
	t.Cleanup(func() { client.Close() })
	s, err := redis.New(client, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	storetest.RunFaults(t, s, []*faultproxy.Proxy{px}, opts)
	t.Logf("%d slot groups settled by their markers", s.Stats().Resolved)
}

// TestFaultsCreateOnWrite cuts the reply to a batch that creates its
// counter on write, in its middle, after the server ran it (or some of
// it): the store settles the batch by its marker, running the commands
// that create the counter's shards again (they change nothing where
// they ran), so the write is acknowledged and counted once, never
// outcome unknown.
func TestFaultsCreateOnWrite(t *testing.T) {
	d, err := redis.ParseDSN(serverDSN(sharedServer(t)))
	if err != nil {
		t.Fatal(err)
	}
	px := faultproxy.Start(t, d.Addrs[0])
	co := d.Options()
	co.Addr = px.Addr()
	client := goredis.NewClient(co)
	t.Cleanup(func() { client.Close() })
	s, err := redis.New(client, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := "createonwrite" + runID() + "/"
	write := func(id string) error {
		out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 1, Create: &shardcounter.Spec{Shards: 4}}})
		if err == nil {
			err = out[0].Err
		}
		return err
	}
	if err := write(p + "warm"); err != nil { // the scripts loaded
		t.Fatal(err)
	}
	// Which reply answers the commit depends on the reads before it: cut
	// each of the first few. A cut read is unavailable, nothing applied.
	for skip := range 4 {
		for i := range 3 {
			id := fmt.Sprintf("%s%d-%d", p, skip, i)
			px.CutReplyAfter(skip)
			err := write(id)
			px.CutReplies(0)
			want := int64(1)
			switch {
			case err == nil:
			case shardcounter.ErrorCode(err) == shardcounter.EUNAVAILABLE:
				want = 0
			default:
				t.Fatalf("cut after %d replies: %v; want success, or unavailable", skip, err)
			}
			if _, err := s.GetCounter(ctx, id); want == 0 && err == nil {
				t.Fatalf("cut after %d replies: the write was answered unavailable, but its counter exists", skip)
			} else if want == 1 {
				if v := storetest.MustRead(t, s, id); v != 1 {
					t.Fatalf("cut after %d replies: %s = %d, want 1", skip, id, v)
				}
			}
		}
	}
	if s.Stats().Resolved == 0 {
		t.Fatal("no cut fell on a commit: the test tested nothing")
	}
	t.Logf("%d connections cut, %d slot groups settled by their markers", px.Cuts(), s.Stats().Resolved)
}
