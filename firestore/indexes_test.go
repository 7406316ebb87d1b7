package firestore_test

import (
	"encoding/json"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/firestore"
)

// TestIndexes checks the generated firestore.indexes.json for seed 001's
// instruments: the shard first in every index, the timestamp last, both
// orders, and the expiry index on sc_requests.
func TestIndexes(t *testing.T) {
	b, err := firestore.Indexes([]*shardcounter.Collection{{Name: "instruments", Shards: 3, TimestampField: "timestamp", Indexes: []string{"exchange", "price.currency"}}})
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Indexes []struct {
			CollectionGroup string
			Fields          []struct{ FieldPath, Order string }
		}
		FieldOverrides []struct{ CollectionGroup, FieldPath string }
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Indexes) != 6 || len(f.FieldOverrides) != 1 || f.FieldOverrides[0].CollectionGroup != "sc_requests" {
		t.Fatalf("indexes:\n%s", b)
	}
	for _, ix := range f.Indexes {
		first, last := ix.Fields[0], ix.Fields[len(ix.Fields)-1]
		if ix.CollectionGroup != "instruments" || first.FieldPath != "shard" || last.FieldPath != "timestamp" {
			t.Fatalf("index %+v: want shard first and the timestamp last", ix)
		}
	}
}
