package firestore

import (
	"encoding/json"

	"github.com/shardcounter/shardcounter"
)

// indexFile is the firestore.indexes.json format of the Firebase CLI
// (`firebase deploy --only firestore:indexes`).
type indexFile struct {
	Indexes        []compositeIndex `json:"indexes"`
	FieldOverrides []fieldOverride  `json:"fieldOverrides"`
}

type compositeIndex struct {
	CollectionGroup string       `json:"collectionGroup"`
	QueryScope      string       `json:"queryScope"`
	Fields          []indexField `json:"fields"`
}

type indexField struct {
	FieldPath string `json:"fieldPath"`
	Order     string `json:"order"`
}

type fieldOverride struct {
	CollectionGroup string            `json:"collectionGroup"`
	FieldPath       string            `json:"fieldPath"`
	Indexes         []overrideIndexes `json:"indexes"`
}

type overrideIndexes struct {
	Order      string `json:"order"`
	QueryScope string `json:"queryScope"`
}

// Indexes returns the firestore.indexes.json a real project needs for the
// store and these collections: for each collection, as seed 001 says, the
// shard first in every index that holds the timestamp, one index per
// declared field and order (shard, field, timestamp) plus (shard,
// timestamp), each ascending and descending by timestamp; and the
// collection-group index on sc_requests.at that request-id expiry
// queries. The emulator needs none of them.
func Indexes(colls []*shardcounter.Collection) ([]byte, error) {
	f := indexFile{
		Indexes: []compositeIndex{},
		FieldOverrides: []fieldOverride{{
			CollectionGroup: requestsCollection, FieldPath: fieldAt,
			Indexes: []overrideIndexes{{Order: "ASCENDING", QueryScope: "COLLECTION"}, {Order: "ASCENDING", QueryScope: "COLLECTION_GROUP"}},
		}},
	}
	for _, c := range colls {
		for _, field := range append([]string{""}, c.Indexes...) {
			for _, order := range []string{"ASCENDING", "DESCENDING"} {
				fields := []indexField{{FieldPath: fieldShard, Order: "ASCENDING"}}
				if field != "" {
					fields = append(fields, indexField{FieldPath: field, Order: "ASCENDING"})
				}
				fields = append(fields, indexField{FieldPath: c.TimestampField, Order: order})
				f.Indexes = append(f.Indexes, compositeIndex{CollectionGroup: Escape(c.Name), QueryScope: "COLLECTION", Fields: fields})
			}
		}
	}
	return json.MarshalIndent(f, "", "  ")
}
