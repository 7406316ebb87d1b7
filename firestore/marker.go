package firestore

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shardcounter/shardcounter/internal/docstore"
)

// A batch's commits are marked (docstore.Marker) by a document of
// sc_requests under the batch's first counter, fields "at" and "attempt":
// Google's client sends a commit again after a cut, so a refusal, like a
// commit with no answer, says nothing of whether the batch applied, and
// the marker does.
type marker = docstore.Marker[sentAttempt]

// sentAttempt is an attempt whose commit was sent: the bookkeeping of its
// commit, if its marker shows it applied.
type sentAttempt struct {
	b     *batchState
	sw    []shardWrite
	order []string
}

// markerPrefix starts every marker's document id.
const markerPrefix = docstore.MarkerPrefix

// fieldAttempt is the marker's field naming the attempt that wrote it.
const fieldAttempt = "attempt"

// markerRef is the marker's document.
func (s *CounterStore) markerRef(m *marker) *firestore.DocumentRef {
	return s.counterRef(m.Counter).Collection(requestsCollection).Doc(m.Name)
}

// markerFields are the marker's fields as attempt writes it.
func markerFields(now time.Time, attempt int64) map[string]any {
	return map[string]any{fieldAt: now, fieldAttempt: attempt}
}

// markerAttempt reads the marker: the attempt it names, found false
// when it is absent.
func markerAttempt(ctx context.Context, ref *firestore.DocumentRef) (int64, bool, error) {
	snap, err := ref.Get(ctx)
	if status.Code(err) == codes.NotFound {
		return 0, false, nil
	} else if err != nil {
		return 0, false, err
	}
	k, _ := snap.Data()[fieldAttempt].(int64)
	return k, true, nil
}

// settled is the bookkeeping of a sent attempt that its marker shows
// applied.
func (s *CounterStore) settled(a sentAttempt) {
	for _, w := range a.sw {
		s.Stats().Committed(w.t.id, w.shard)
	}
	for _, id := range a.order {
		if t := a.b.targets[id]; t.st != nil && t.Touched && t.Create {
			s.fullHint.Delete(id)
		}
	}
	a.b.forgetRemoved()
}
