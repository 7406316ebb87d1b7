package redis_test

import (
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/storetest"
)

// BenchmarkApproxLoad is storetest.BenchApproxLoad on this store:
//
//	go test ./redis -run '^$' -bench ApproxLoad -benchtime 1x
func BenchmarkApproxLoad(b *testing.B) {
	storetest.BenchApproxLoad(b, "Standalone", func(tb testing.TB) shardcounter.CounterStore { return MustOpen(tb, serverDSN(sharedServer(tb))) })
	storetest.BenchApproxLoad(b, "Cluster", func(tb testing.TB) shardcounter.CounterStore { return MustOpen(tb, clusterDSN(sharedCluster(tb))) })
}
