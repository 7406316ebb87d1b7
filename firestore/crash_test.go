package firestore_test

import (
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestCrashMidBatch: SIGKILL mid-batch loses no acknowledged batch and
// leaves the one in flight whole or absent (a commit is atomic).
func TestCrashMidBatch(t *testing.T) {
	storetest.RunCrashMidBatch(t, storetest.Crash{
		Env:      "SHARDCOUNTER_FIRESTORE_CRASH",
		Target:   func(t *testing.T) string { return firestoretest.Project(t) },
		ChildEnv: []string{firestoretest.ChildEnv + "=1"}, // the parent's emulator serves the child
		Batches:  10,
		Open: func(tb testing.TB, project string) shardcounter.CounterStore {
			return mustOpenProject(tb, project, firestore.Options{})
		},
	})
}
