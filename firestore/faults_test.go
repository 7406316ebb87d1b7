package firestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/faultproxy"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestFaults runs the faults suite with the store's gRPC connection to
// the emulator going through a proxy that cuts it during commits: a
// commit whose answer was lost (or that Google's client sent again after
// a cut) is settled by its marker, never applied twice. The store's
// connection dials again soon after a failed attempt
// (firestoretest.FastReconnect): with gRPC's default backoff, cuts of
// the reconnections themselves kept it away for the whole load in some
// runs, no write acknowledged.
func TestFaults(t *testing.T) {
	px := faultproxy.Start(t, firestoretest.Running(t).Addr)
	// Google's client reads the emulator's address when it is made.
	t.Setenv("FIRESTORE_EMULATOR_HOST", px.Addr())
	s, err := firestore.NewWith(context.Background(), firestoretest.Project(t), "", firestore.Options{ShardWriteInterval: -1},
		firestoretest.FastReconnect(t, px.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.RunFaults(t, s, []*faultproxy.Proxy{px}, storetest.FaultOptions{Writers: 8, Load: 4 * time.Second, FaultGap: 300 * time.Millisecond})
	t.Logf("%d batches settled by their markers", s.Stats().Resolved.Load())
}
