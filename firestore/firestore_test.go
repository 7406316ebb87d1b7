package firestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestMain starts the emulator this package's tests share (Firestore in
// native mode) and stops it, its JVM with it, at the end. Without the
// emulator the run fails: it never skips.
func TestMain(m *testing.M) { firestoretest.Main(m, firestoretest.Native) }

// MustOpen opens a store on a project of its own (an empty database of
// the emulator), closed at the end of the test.
func MustOpen(tb testing.TB, opts firestore.Options) *firestore.CounterStore {
	tb.Helper()
	return mustOpenProject(tb, firestoretest.Project(tb), opts)
}

func mustOpenProject(tb testing.TB, project string, opts firestore.Options) *firestore.CounterStore {
	tb.Helper()
	s, err := firestore.New(context.Background(), project, "", opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestCounterStore(t *testing.T) {
	project := firestoretest.Project(t)
	s := mustOpenProject(t, project, firestore.Options{})
	storetest.RunCounterStore(t, func(testing.TB) shardcounter.CounterStore { return s }, storetest.Options{
		OpenWithClock: func(tb testing.TB, now func() time.Time) shardcounter.CounterStore {
			return mustOpenProject(tb, project, firestore.Options{Now: now})
		},
		LoadScale: 0.25, // the emulator commits a few hundred batches a second
	})
}

// TestSnapshotReads checks that strong reads are one snapshot while
// commits touch several shards at once.
func TestSnapshotReads(t *testing.T) {
	storetest.RunSnapshotReads(t, MustOpen(t, firestore.Options{}))
}

// TestStrongReadsSeeWholeCommits checks that a strong read sees a commit
// that writes every shard of a counter whole or not at all.
func TestStrongReadsSeeWholeCommits(t *testing.T) {
	storetest.RunWholeCommitReads(t, MustOpen(t, firestore.Options{}))
}

func TestCollectionStore(t *testing.T) {
	s := MustOpen(t, firestore.Options{})
	storetest.RunCollectionStore(t, func(testing.TB) shardcounter.CollectionStore { return s.Collections() })
}
