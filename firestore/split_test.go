package firestore_test

import (
	"context"
	"testing"

	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestCommitSplit lowers the commit limit to 16 KiB and counts the
// commits the client sends, and their sizes (storetest.RunCommitSplit).
func TestCommitSplit(t *testing.T) {
	watch, commits, err := firestoretest.CountCommits()
	if err != nil {
		t.Fatal(err)
	}
	s, err := firestore.NewWith(context.Background(), firestoretest.Project(t), "", firestore.Options{}, watch)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const limit = 16 << 10
	firestore.SetCommitLimit(s, limit)
	storetest.RunCommitSplit(t, s, limit, commits)
}

// TestEngineTxnSplit checks that an engine marks a MULTI's writes as one
// transaction, which the store refuses whole past its (lowered) limit
// (storetest.RunEngineTxnSplit).
func TestEngineTxnSplit(t *testing.T) {
	s, err := firestore.New(context.Background(), firestoretest.Project(t), "", firestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	firestore.SetCommitLimit(s, 16<<10)
	storetest.RunEngineTxnSplit(t, s)
}
