package datastore_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/api/option"

	"github.com/shardcounter/shardcounter/datastore"
	"github.com/shardcounter/shardcounter/internal/faultproxy"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestFaults runs the faults suite with the store's gRPC connection to
// the emulator going through a proxy that cuts it during commits: a
// commit whose answer was lost (or that Google's client sent again after
// a cut) is settled by its marker, never applied twice. The store's
// connection dials again soon after a failed attempt
// (firestoretest.FastConnect, beside the store's own dial options): with gRPC's default backoff, cuts of
// the reconnections themselves keep it away for most of the load.
func TestFaults(t *testing.T) {
	px := faultproxy.Start(t, firestoretest.Running(t).Addr)
	// Google's client reads the emulator's address when it is made.
	t.Setenv("DATASTORE_EMULATOR_HOST", px.Addr())
	s, err := datastore.NewWith(context.Background(), firestoretest.Project(t), datastore.Options{ShardWriteInterval: -1},
		option.WithGRPCDialOption(firestoretest.FastConnect))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.RunFaults(t, s, []*faultproxy.Proxy{px}, storetest.FaultOptions{Writers: 8, Load: 4 * time.Second, FaultGap: 300 * time.Millisecond})
	t.Logf("%d batches settled by their markers", s.Stats().Resolved.Load())
}
