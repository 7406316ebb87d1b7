package datastore_test

import (
	"context"
	"testing"
	"time"

	gds "cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter/datastore"
	"github.com/shardcounter/shardcounter/storetest"
)

func TestDedupeWindow(t *testing.T) {
	clk := storetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := MustOpen(t, datastore.Options{Now: clk.Now, DedupeWindow: time.Hour})
	storetest.RunDedupeWindow(t, s, time.Hour, clk.Advance)
	t.Run("Expiry", func(t *testing.T) {
		ids := func(tb testing.TB) int {
			tb.Helper()
			keys, err := s.Client().GetAll(context.Background(), gds.NewQuery("SC_Request").KeysOnly(), nil)
			if err != nil {
				tb.Fatal(err)
			}
			n := 0
			for _, k := range keys {
				if !datastore.IsMarker(k.Name) {
					n++
				}
			}
			return n
		}
		storetest.RunRequestIDExpiry(t, s, time.Hour, clk.Advance, ids, datastore.ExpireBatch)
	})
}
