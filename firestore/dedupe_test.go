package firestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/storetest"
)

func TestDedupeWindow(t *testing.T) {
	clk := storetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := MustOpen(t, firestore.Options{Now: clk.Now, DedupeWindow: time.Hour})
	storetest.RunDedupeWindow(t, s, time.Hour, clk.Advance)
	t.Run("Expiry", func(t *testing.T) {
		ids := func(tb testing.TB) int {
			tb.Helper()
			docs, err := s.Client().CollectionGroup("sc_requests").Documents(context.Background()).GetAll()
			if err != nil {
				tb.Fatal(err)
			}
			n := 0
			for _, d := range docs {
				if !firestore.IsMarker(d.Ref.ID) {
					n++
				}
			}
			return n
		}
		storetest.RunRequestIDExpiry(t, s, time.Hour, clk.Advance, ids, firestore.ExpireBatch)
	})
}
