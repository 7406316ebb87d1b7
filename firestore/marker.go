package firestore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shardcounter/shardcounter"
)

// A commit that gets no clear answer (the connection cut while the reply
// was on its way, the deadline passing) may or may not have been applied;
// and Google's client sends a commit again after a cut (it retries
// UNAVAILABLE), so even a refusal (a precondition the first send's own
// writes made fail) says nothing of whether the batch applied. Every
// commit of a batch therefore creates one document more, the batch's
// marker: a document of sc_requests under the batch's first counter,
// named ".b" and 32 hex digits (no request id escapes to it: Escape puts
// "." only before "_" or "~"), holding when it was written ("at") and
// which attempt of the batch wrote it. Every attempt of one Apply creates
// the same marker, so at most one of them commits: after a failed commit,
// the marker present says which attempt applied, and its decisions are
// the batch's answer; absent, the batch is decided again and committed
// with the same marker. Markers carry "at" as request ids do: the expiry
// of request ids deletes them once the dedupe window has passed.
type marker struct {
	ref     *firestore.DocumentRef
	attempt int64
	unsure  bool  // a commit of the batch failed: it may have applied
	first   error // that commit's error
	sent    map[int64]sentAttempt
}

// sentAttempt is an attempt whose commit was sent: what the batch answers
// if its marker shows it applied.
type sentAttempt struct {
	b        *batchState
	out      []shardcounter.Outcome
	recorded int
	sw       []shardWrite
	order    []string
}

// markerPrefix starts every marker's document id.
const markerPrefix = ".b"

// fieldAttempt is the marker's field naming the attempt that wrote it.
const fieldAttempt = "attempt"

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
		ref := s.counterRef(inc.Counter).Collection(requestsCollection).Doc(markerPrefix + hex.EncodeToString(r[:]))
		return &marker{ref: ref, sent: map[int64]sentAttempt{}}
	}
	return nil
}

// send records the attempt about to commit, with its outcomes, and adds
// the marker's creation to its commit.
func (m *marker) send(wb *firestore.WriteBatch, b *batchState, out []shardcounter.Outcome, sw []shardWrite, order []string) { //nolint:staticcheck // see applyOnce
	m.attempt++
	wb.Create(m.ref, m.fields(b.now, m.attempt))
	m.sent[m.attempt] = sentAttempt{b: b, out: append([]shardcounter.Outcome(nil), out...), recorded: b.recorded, sw: sw, order: order}
}

// fields are the marker's fields as attempt writes it.
func (m *marker) fields(now time.Time, attempt int64) map[string]any {
	return map[string]any{fieldAt: now, fieldAttempt: attempt}
}

// failed notes a commit of the batch that failed with err, a conflict or
// an unknown outcome: either may hide a first send that applied.
func (m *marker) failed(err error) {
	if !m.unsure {
		m.unsure, m.first = true, err
	}
}

// markerWait is the pause between two reads of a marker that failed.
const markerWait = 50 * time.Millisecond

// settle looks up the marker after an attempt failed with err, when some
// commit of the batch failed. Found, the attempt that wrote it applied:
// out gets its outcomes and settle returns its request ids recorded and a
// nil error. Absent, it returns err, for Apply to go on with the batch;
// unreadable until ctx ends, it returns ctx's error.
func (s *CounterStore) settle(ctx context.Context, m *marker, out []shardcounter.Outcome, err error) (int, error) {
	var snap *firestore.DocumentSnapshot
	for {
		var gerr error
		snap, gerr = m.ref.Get(ctx)
		if status.Code(gerr) == codes.NotFound {
			return 0, err
		}
		if gerr == nil {
			break
		}
		t := time.NewTimer(markerWait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
	}
	k, _ := snap.Data()[fieldAttempt].(int64)
	a, ok := m.sent[k]
	if !ok {
		return 0, shardcounter.OutcomeUnknownf("firestore: the batch's marker names attempt %d, which this batch did not send", k)
	}
	copy(out, a.out)
	for _, w := range a.sw {
		s.Stats().Committed(w.t.id, w.shard)
	}
	for _, id := range a.order {
		if t := a.b.targets[id]; t.st != nil && t.touched && t.create {
			s.fullHint.Delete(id)
		}
	}
	s.Stats().Resolved.Add(1)
	return a.recorded, nil
}

// unknown is the error of a batch whose failed commit could not be
// settled before its deadline: its outcome is unknown.
func (m *marker) unknown(cause error) error {
	return shardcounter.OutcomeUnknownf("firestore: commit failed (%v), and the batch was not settled before %v", m.first, cause)
}
