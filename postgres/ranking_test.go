package postgres_test

import (
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/postgres"
	"github.com/shardcounter/shardcounter/storetest"
)

func TestRankings(t *testing.T) {
	dsn := pgtest.MustDatabase(t)
	s := mustOpenDSN(t, dsn, postgres.Options{})
	storetest.RunRankings(t, func(testing.TB) shardcounter.CounterStore { return s }, storetest.Options{
		OpenWithClock: func(tb testing.TB, now func() time.Time) shardcounter.CounterStore {
			return mustOpenDSN(tb, dsn, postgres.Options{Now: now})
		},
	})
}
