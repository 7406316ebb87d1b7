package firestore_test

import (
	"context"
	"testing"

	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestDeleteSparesCounterMadeAgain runs storetest.RunDeleteMadeAgain
// through the delete's seam between its commit and its sweep.
func TestDeleteSparesCounterMadeAgain(t *testing.T) {
	s := mustOpenProject(t, firestoretest.Project(t), firestore.Options{})
	storetest.RunDeleteMadeAgain(t, s, func(f func(string)) { firestore.SetAfterDeleteCommit(s, f) },
		func(ctx context.Context, id string) ([]string, []string, error) { return firestore.OwnLeft(ctx, s, id) })
}
