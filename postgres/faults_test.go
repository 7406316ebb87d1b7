package postgres_test

import (
	"net/url"
	"testing"

	"github.com/shardcounter/shardcounter/internal/faultproxy"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/postgres"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestFaults runs the faults suite with every connection of the store
// going through a proxy that cuts them during commits: batches whose
// commit answer was lost are settled by their markers.
func TestFaults(t *testing.T) {
	u, err := url.Parse(pgtest.MustDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	px := faultproxy.Start(t, u.Host)
	u.Host = px.Addr()
	s := mustOpenDSN(t, u.String(), postgres.Options{})
	storetest.RunFaults(t, s, []*faultproxy.Proxy{px}, storetest.FaultOptions{})
	t.Logf("%d batches settled by their markers", s.Resolved())
}
