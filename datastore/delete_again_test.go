package datastore_test

import (
	"context"
	"testing"

	"github.com/shardcounter/shardcounter/datastore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestDeleteSparesCounterMadeAgain runs storetest.RunDeleteMadeAgain
// through the delete's seam between its commit and its sweep.
func TestDeleteSparesCounterMadeAgain(t *testing.T) {
	s := mustOpenProject(t, firestoretest.Project(t), datastore.Options{Namespace: "deleteagain"})
	storetest.RunDeleteMadeAgain(t, s, func(f func(string)) { datastore.SetAfterDeleteCommit(s, f) },
		func(ctx context.Context, id string) ([]string, []string, error) { return datastore.OwnLeft(ctx, s, id) })
}
