package pebble_test

import (
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/pebble"
	"github.com/shardcounter/shardcounter/storetest"
)

func TestRankings(t *testing.T) {
	storetest.RunRankings(t, func(tb testing.TB) shardcounter.CounterStore { return MustOpen(tb) }, storetest.Options{
		OpenWithClock: func(tb testing.TB, now func() time.Time) shardcounter.CounterStore {
			return MustOpenOptions(tb, pebble.Options{Now: now})
		},
	})
}
