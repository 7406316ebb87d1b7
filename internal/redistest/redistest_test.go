package redistest_test

import (
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/internal/redistest"
)

// TestClusterFailover starts 3 masters with a replica each, kills a
// master and waits for its replica to take over.
func TestClusterFailover(t *testing.T) {
	c := redistest.MustStartClusterReplicas(t, 3)
	if len(c.Replicas) != 3 {
		t.Fatalf("%d replicas, want 3", len(c.Replicas))
	}
	c.Masters[1].Kill()
	r, err := c.WaitFailover(c.Masters[1], 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r != c.Replicas[1] {
		t.Fatalf("promoted %s, want the replica of the killed master, %s", r.Addr, c.Replicas[1].Addr)
	}
}
