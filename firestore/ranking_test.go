package firestore_test

import (
	"testing"

	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/storetest"
)

func TestRankingStore(t *testing.T) {
	storetest.RunRankingStore(t, MustOpen(t, firestore.Options{}))
}
