package datastore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// A commit that gets no clear answer (the connection cut while the reply
// was on its way, the deadline passing while the commit waited) may or may
// not have been applied. Every commit of a batch therefore inserts one
// entity more, the batch's marker: a request entity (kind SC_Request,
// under the batch's first counter) whose name no request id escapes to
// (".b" and 32 hex digits: Escape never puts a "." before anything but
// "_" or "~"), holding when it was written and which attempt of the batch
// wrote it. Every attempt of one Apply inserts the same marker, so of two
// attempts at most one commits (the other finds the entity there, or
// conflicts with the first on the shards both read and write): after an
// unclear commit, the marker present says which attempt applied and its
// decisions are the batch's answer; absent, the batch is tried again with
// the same marker. Markers are request entities with their "at": the
// expiry of request ids deletes them once the dedupe window has passed.
type marker struct {
	key     *datastore.Key
	attempt int64
	unsure  bool  // a commit of the batch got no clear answer
	first   error // that commit's error
	sent    map[int64]sentAttempt
}

// sentAttempt is an attempt whose commit was sent: what the batch answers
// if its marker shows it applied.
type sentAttempt struct {
	b        *batch
	out      []shardcounter.Outcome
	recorded int
	sw       []shardWrite
}

// markerPrefix starts every marker's name.
const markerPrefix = ".b"

// newMarker returns the marker of a batch: under the first counter of
// incs with a valid id, or nil when there is none (the batch commits
// nothing).
func (s *CounterStore) newMarker(incs []shardcounter.Increment) *marker {
	for _, inc := range incs {
		if shardcounter.ValidateID("counter id", inc.Counter) != nil {
			continue
		}
		var r [16]byte
		rand.Read(r[:]) //nolint:errcheck // never fails (crypto/rand)
		return &marker{key: childKey(s.counterKey(inc.Counter), requestKind, markerPrefix+hex.EncodeToString(r[:])), sent: map[int64]sentAttempt{}}
	}
	return nil
}

// entity is the marker as the current attempt writes it.
func (m *marker) entity(now time.Time) *ownEntity { return &ownEntity{At: now, Attempt: m.attempt} }

// send records the attempt about to commit, with its outcomes.
func (m *marker) send(b *batch, out []shardcounter.Outcome, sw []shardWrite) {
	m.sent[m.attempt] = sentAttempt{b: b, out: append([]shardcounter.Outcome(nil), out...), recorded: b.recorded, sw: sw}
}

// markerWait is the pause between two reads of a marker that failed.
const markerWait = 50 * time.Millisecond

// settle looks up the marker after an attempt failed with err, when some
// commit of the batch had no clear answer. Found, the attempt that wrote
// it applied: out gets its outcomes and settle returns its request ids
// recorded, and a nil error. Absent, it returns err, for Apply to try the
// batch again; unreadable until ctx ends, it returns ctx's error.
func (s *CounterStore) settle(ctx context.Context, m *marker, out []shardcounter.Outcome, err error) (int, error) {
	var e ownEntity
	for {
		gerr := s.client.Get(ctx, m.key, &e)
		if errors.Is(gerr, datastore.ErrNoSuchEntity) {
			return 0, err
		}
		var fm *datastore.ErrFieldMismatch
		if gerr == nil || errors.As(gerr, &fm) {
			break
		}
		if serr := docstore.Sleep(ctx, markerWait); serr != nil {
			return 0, serr
		}
	}
	a, ok := m.sent[e.Attempt]
	if !ok {
		return 0, shardcounter.OutcomeUnknownf("datastore: the batch's marker names attempt %d, which this batch did not send", e.Attempt)
	}
	copy(out, a.out)
	a.b.committed(a.sw)
	s.Stats().Resolved.Add(1)
	return a.recorded, nil
}

// unknown is the error of a batch whose unclear commit could not be
// settled before its deadline: its outcome is unknown.
func (m *marker) unknown(cause error) error {
	return shardcounter.OutcomeUnknownf("datastore: commit failed (%v), and the batch was not settled before %v", m.first, cause)
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
