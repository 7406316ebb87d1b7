package postgres_test

import (
	"net/url"
	"testing"
	"time"

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
