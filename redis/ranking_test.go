package redis_test

import (
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/storetest"
)

func TestRankings(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		storetest.RunRankings(t, func(tb testing.TB) shardcounter.CounterStore { return MustOpen(tb, dsn) }, suiteOptions(dsn))
	})
}
