package datastore

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter/internal/docstore"
)

// A batch's commits are marked (docstore.Marker) by a request entity
// (kind SC_Request, under the batch's first counter) with its "at" and
// "attempt". Of two attempts at most one commits: the other finds the
// entity there, or conflicts with the first on the shards both read and
// write.
type marker = docstore.Marker[sentAttempt]

// sentAttempt is an attempt whose commit was sent: the bookkeeping of its
// commit, if its marker shows it applied.
type sentAttempt struct {
	b  *batch
	sw []shardWrite
}

// markerPrefix starts every marker's name.
const markerPrefix = docstore.MarkerPrefix

// markerKey is the marker's entity.
func (s *CounterStore) markerKey(m *marker) *datastore.Key {
	return childKey(s.counterKey(m.Counter), requestKind, m.Name)
}

// markerAttempt reads the marker: the attempt it names, found false
// when it is absent.
func (s *CounterStore) markerAttempt(ctx context.Context, key *datastore.Key) (int64, bool, error) {
	var e ownEntity
	err := s.client.Get(ctx, key, &e)
	var fm *datastore.ErrFieldMismatch
	switch {
	case errors.Is(err, datastore.ErrNoSuchEntity):
		return 0, false, nil
	case err == nil || errors.As(err, &fm):
		return e.Attempt, true, nil
	}
	return 0, false, err
}

// serviceConfig is the gRPC service config of the store's client: the
// one Google's client sets (retry UNAVAILABLE, and for reads more), but
// no retry of Commit. A commit cut off after the database applied it
// would be sent again, and its transaction, already committed, refused
// ("Transaction is invalid or closed"), which says nothing of whether it
// was applied; sent once, an unclear commit is settled by its marker.
var serviceConfig = fmt.Sprintf(`{"methodConfig": [
  {"name": [{"service": %[1]q}], "timeout": "60s", "waitForReady": true,
   "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.100s", "maxBackoff": "60s", "backoffMultiplier": 1.3, "retryableStatusCodes": ["UNAVAILABLE"]}},
  {"name": [{"service": %[1]q, "method": "Lookup"}, {"service": %[1]q, "method": "RunQuery"}, {"service": %[1]q, "method": "RunAggregationQuery"}, {"service": %[1]q, "method": "ReserveIds"}],
   "timeout": "60s", "waitForReady": true,
   "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.100s", "maxBackoff": "60s", "backoffMultiplier": 1.3, "retryableStatusCodes": ["UNAVAILABLE", "DEADLINE_EXCEEDED", "INTERNAL", "RESOURCE_EXHAUSTED"]}},
  {"name": [{"service": %[1]q, "method": "Commit"}], "timeout": "60s", "waitForReady": true}
]}`, "google.datastore.v1.Datastore")
