package postgres_test

import (
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/storetest"
)

// BenchmarkApproxLoad is storetest.BenchApproxLoad on this store:
//
//	go test ./postgres -run '^$' -bench ApproxLoad -benchtime 1x
func BenchmarkApproxLoad(b *testing.B) {
	storetest.BenchApproxLoad(b, "PostgreSQL", func(tb testing.TB) shardcounter.CounterStore { return MustOpen(tb) })
}
