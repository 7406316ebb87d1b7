package postgres_test

import (
	"context"
	"encoding/binary"
	"net/url"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/faultproxy"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/postgres"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestFaults runs the faults suite with every connection of the store
// going through a proxy that cuts them during commits: batches whose
// commit answer was lost are settled by their markers.
//
// Partition black-holes the network for 1.5 s instead, past the commits'
// deadline (0.5 s): the batches caught in it are outcome unknown, and
// settle when retried with their request ids.
func TestFaults(t *testing.T) {
	for name, opts := range map[string]storetest.FaultOptions{"Cuts": {}, "Partition": {Partition: 1500 * time.Millisecond, FlushTimeout: 500 * time.Millisecond, Writers: 8}} {
		t.Run(name, func(t *testing.T) {
			u, err := url.Parse(pgtest.MustDatabase(t))
			if err != nil {
				t.Fatal(err)
			}
			px := faultproxy.Start(t, u.Host)
			u.Host = px.Addr()
			s := mustOpenDSN(t, u.String(), postgres.Options{})
			storetest.RunFaults(t, s, []*faultproxy.Proxy{px}, opts)
			t.Logf("%d batches settled by their markers", s.Resolved())
		})
	}
}

// TestMarkerExpiry checks that batches delete expired markers: one ten
// minutes and a second old is gone after two batches, one a minute old
// stays.
func TestMarkerExpiry(t *testing.T) {
	s := MustOpen(t)
	ctx := context.Background()
	marker := func(age time.Duration) []byte {
		m := make([]byte, 16)
		binary.BigEndian.PutUint64(m, uint64(time.Now().Add(-age).UnixMicro()))
		return m
	}
	old, young := marker(10*time.Minute+time.Second), marker(time.Minute)
	if _, err := s.Pool().Exec(ctx, "INSERT INTO shardcounter.batches (id) VALUES ($1), ($2)", old, young); err != nil {
		t.Fatal(err)
	}
	storetest.MustCreate(t, s, "expiry", 1)
	for range 2 {
		if _, err := s.Apply(ctx, []shardcounter.Increment{{Counter: "expiry", Delta: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	var oldLeft, youngLeft bool
	if err := s.Pool().QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM shardcounter.batches WHERE id = $1), EXISTS (SELECT 1 FROM shardcounter.batches WHERE id = $2)", old, young).Scan(&oldLeft, &youngLeft); err != nil {
		t.Fatal(err)
	}
	if oldLeft || !youngLeft {
		t.Fatalf("after two batches: expired marker kept %v, young marker kept %v; want false, true", oldLeft, youngLeft)
	}
}
