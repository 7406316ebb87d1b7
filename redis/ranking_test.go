package redis_test

import (
	"testing"

	"github.com/shardcounter/shardcounter/storetest"
)

func TestRankingStore(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		storetest.RunRankingStore(t, MustOpen(t, dsn))
	})
}
