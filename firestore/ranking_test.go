package firestore_test

import (
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

func TestRankings(t *testing.T) {
	project := firestoretest.Project(t)
	s := mustOpenProject(t, project, firestore.Options{})
	storetest.RunRankings(t, func(testing.TB) shardcounter.CounterStore { return s }, storetest.Options{
		OpenWithClock: func(tb testing.TB, now func() time.Time) shardcounter.CounterStore {
			return mustOpenProject(tb, project, firestore.Options{Now: now})
		},
		LoadScale: 0.25,
	})
}
