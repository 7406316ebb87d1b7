package datastore_test

import (
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/datastore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
)

// TestCrashMidBatch: SIGKILL mid-batch loses no acknowledged batch and
// leaves the one in flight whole or absent (firestoretest.CrashMidBatch).
func TestCrashMidBatch(t *testing.T) {
	firestoretest.CrashMidBatch(t, "SHARDCOUNTER_DATASTORE_CRASH", func(tb testing.TB, project string) shardcounter.CounterStore {
		return mustOpenProject(tb, project, datastore.Options{})
	})
}
