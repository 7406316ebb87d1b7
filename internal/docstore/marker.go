package docstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/shardcounter/shardcounter"
)

// A commit that gets no clear answer (the connection cut while the reply
// was on its way, the deadline passing while the commit waited) may or
// may not have been applied; and Google's Firestore client sends a commit
// again after a cut (it retries UNAVAILABLE), so even a refusal (a
// precondition the first send's own writes made fail) says nothing of
// whether the batch applied. Every commit of a batch therefore creates one
// document (entity) more, the batch's marker: a request id's document
// under the batch's first counter whose name no request id escapes to
// (MarkerPrefix and 32 hex digits: Escape never puts a "." before
// anything but "_" or "~"), holding when it was written ("at") and which
// attempt of the batch wrote it ("attempt"). Every attempt of one Apply
// creates the same marker, so at most one of them commits: after a failed
// commit, the marker present says which attempt applied, and its
// decisions are the batch's answer; absent, the batch is decided again
// and committed with the same marker. Markers carry "at" as request ids
// do: the expiry of request ids deletes them once the dedupe window has
// passed.
type Marker[A any] struct {
	// Counter is the counter the marker lives under; Name its document's
	// (entity's) name.
	Counter, Name string
	// Attempt is the attempt being committed: a store counts it up before
	// it writes the marker of a new attempt.
	Attempt int64
	store   string
	unsure  bool  // a commit of the batch failed: it may have applied
	first   error // that commit's error
	sent    map[int64]sentAttempt[A]
}

// sentAttempt is an attempt whose commit was sent: what the batch answers
// if its marker shows it applied, and the store's own record of it.
type sentAttempt[A any] struct {
	a        A
	out      []shardcounter.Outcome
	recorded int
}

// MarkerPrefix starts every marker's name.
const MarkerPrefix = ".b"

// MarkerWait is the pause between two reads of a marker that failed.
const MarkerWait = 50 * time.Millisecond

// NewMarker returns the marker of a batch of store: under the first
// counter of incs with a valid id, or nil when there is none (the batch
// commits nothing).
func NewMarker[A any](store string, incs []shardcounter.Increment) *Marker[A] {
	for _, inc := range incs {
		if shardcounter.ValidateID("counter id", inc.Counter) != nil {
			continue
		}
		var r [16]byte
		rand.Read(r[:]) //nolint:errcheck // never fails (crypto/rand)
		return &Marker[A]{Counter: inc.Counter, Name: MarkerPrefix + hex.EncodeToString(r[:]), store: store, sent: map[int64]sentAttempt[A]{}}
	}
	return nil
}

// Send records attempt m.Attempt, about to commit, with its outcomes, the
// request ids it records, and a, the store's bookkeeping of it.
func (m *Marker[A]) Send(a A, out []shardcounter.Outcome, recorded int) {
	m.sent[m.Attempt] = sentAttempt[A]{a: a, out: append([]shardcounter.Outcome(nil), out...), recorded: recorded}
}

// Failed notes a commit of the batch that failed with err and may hide a
// send that applied (an unknown outcome; on Firestore a conflict too).
func (m *Marker[A]) Failed(err error) {
	if !m.unsure {
		m.unsure, m.first = true, err
	}
}

// Unsure reports whether some commit of the batch may have applied.
func (m *Marker[A]) Unsure() bool { return m != nil && m.unsure }

// Unknown is the error of a batch whose failed commit could not be
// settled before cause (its deadline): its outcome is unknown.
func (m *Marker[A]) Unknown(cause error) error {
	return shardcounter.OutcomeUnknownf("%s: commit failed (%v), and the batch was not settled before %v", m.store, m.first, cause)
}

// settle looks up the marker after an attempt failed with err, when some
// commit of the batch failed. Found, the attempt that wrote it applied:
// out gets its outcomes, Done its bookkeeping, and settle returns its
// request ids recorded and a nil error. Absent, it returns err, for the
// batch to go on; unreadable until ctx ends, ctx's error.
func (r *Attempts[A]) settle(ctx context.Context, out []shardcounter.Outcome, err error) (int, error) {
	m := r.Marker
	for {
		k, found, gerr := r.Get(ctx)
		if gerr == nil && !found {
			return 0, err
		}
		if gerr == nil {
			a, ok := m.sent[k]
			if !ok {
				return 0, shardcounter.OutcomeUnknownf("%s: the batch's marker names attempt %d, which this batch did not send", m.store, k)
			}
			copy(out, a.out)
			r.Done(a.a)
			r.Stats.Resolved.Add(1)
			return a.recorded, nil
		}
		if serr := Sleep(ctx, MarkerWait); serr != nil {
			return 0, serr
		}
	}
}
