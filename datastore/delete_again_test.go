package datastore_test

import (
	"context"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/datastore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestDeleteSparesCounterMadeAgain runs storetest.RunDeleteMadeAgain
// through the delete's seam between its commit and its sweep.
func TestDeleteSparesCounterMadeAgain(t *testing.T) {
	clk := storetest.NewClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	s := mustOpenProject(t, firestoretest.Project(t), datastore.Options{Namespace: "deleteagain", Now: clk.Now})
	storetest.RunDeleteMadeAgain(t, storetest.DeleteSeam{Store: s, Clock: clk,
		SetHook: func(f func(string) error) { datastore.SetAfterDeleteCommit(s, f) },
		Left:    func(ctx context.Context, id string) (storetest.Left, error) { return datastore.Left(ctx, s, id) }})
}
