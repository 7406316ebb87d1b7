package datastore_test

import (
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/datastore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestRankings runs the definitions' contract (RunRankings' Definitions
// case is storetest.RunRankingStore) and the engine's rankings over the
// store against the brute-force checker.
func TestRankings(t *testing.T) {
	project := firestoretest.Project(t)
	s := mustOpenProject(t, project, datastore.Options{})
	storetest.RunRankings(t, func(testing.TB) shardcounter.CounterStore { return s }, storetest.Options{
		OpenWithClock: func(tb testing.TB, now func() time.Time) shardcounter.CounterStore {
			return mustOpenProject(tb, project, datastore.Options{Now: now})
		},
		LoadScale: 0.25, // the emulator commits a few hundred transactions a second
	})
}

// TestRankingStoreNamespace keeps definitions of two namespaces of one
// project apart.
func TestRankingStoreNamespace(t *testing.T) {
	project := firestoretest.Project(t)
	storetest.RunRankingStore(t, mustOpenProject(t, project, datastore.Options{Namespace: "ns1"}))
	other := mustOpenProject(t, project, datastore.Options{Namespace: "ns2"})
	if rs, err := other.ListRankings(t.Context()); err != nil || len(rs) != 0 {
		t.Fatalf("ListRankings in another namespace = %v, %v; want none", rs, err)
	}
}
