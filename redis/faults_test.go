package redis_test

import (
	"context"
	"net"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter/internal/faultproxy"
	"github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestFaults runs the faults suite with every connection of the store
// going through proxies (one per Cluster node) that cut them during
// commits: slot groups whose reply was lost are settled by their markers.
func TestFaults(t *testing.T) {
	t.Run("Standalone", func(t *testing.T) {
		d, err := redis.ParseDSN(serverDSN(sharedServer(t)))
		if err != nil {
			t.Fatal(err)
		}
		px := faultproxy.Start(t, d.Addrs[0])
		opts := d.Options()
		opts.Addr = px.Addr()
		client := goredis.NewClient(opts)
		t.Cleanup(func() { client.Close() })
		s, err := redis.New(client, redis.Options{})
		if err != nil {
			t.Fatal(err)
		}
		storetest.RunFaults(t, s, []*faultproxy.Proxy{px}, storetest.FaultOptions{})
		t.Logf("%d slot groups settled by their markers", s.Stats().Resolved)
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
