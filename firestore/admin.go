package firestore

import (
	"context"
	"errors"
	"strings"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// CreateCounter writes the counter document and its zeroed shards in one
// commit (docstore.CreateCounter), as seed 000's createCounter does with
// a batch.
func (s *CounterStore) CreateCounter(ctx context.Context, id string, spec shardcounter.Spec) (*shardcounter.Counter, error) {
	return docstore.CreateCounter(ctx, counters{s}, id, spec, s.now())
}

// writeError maps a failed commit of an administrative write (nil: none).
func writeError(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(commitError(err), errConflict) {
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "firestore: %s: another writer came first; nothing applied, try again", op)
	}
	if e := commitError(err); shardcounter.IsOutcomeUnknown(e) {
		return shardcounter.OutcomeUnknownf("firestore: %s: %v", op, err)
	}
	return commitError(err)
}

// DeleteCounter deletes the counter document and its shards in one
// commit (docstore.DeleteCounter), then its buckets, members and request
// ids that carry its created_at or none (docstore.Swept): those of a
// counter made again under the id meanwhile stay, and so do batch markers.
func (s *CounterStore) DeleteCounter(ctx context.Context, id string) error {
	created, err := docstore.DeleteCounter(ctx, counters{s}, id)
	if err != nil {
		return err
	}
	if s.afterDeleteCommit != nil {
		if err := s.afterDeleteCommit(id); err != nil {
			return err
		}
	}
	for _, c := range []string{bucketsCollection, membersCollection, requestsCollection} {
		if err := s.deleteOwn(ctx, s.counterRef(id).Collection(c), created); err != nil {
			return err
		}
	}
	return nil
}

// deleteAll deletes every document of a collection, a commit per page.
func (s *CounterStore) deleteAll(ctx context.Context, col *firestore.CollectionRef) error {
	for {
		docs, err := col.Limit(400).Documents(ctx).GetAll()
		if err != nil {
			return readError("delete counter", err)
		}
		if len(docs) == 0 {
			return nil
		}
		wb := s.client.Batch() //nolint:staticcheck // see CreateCounter
		for _, d := range docs {
			wb.Delete(d.Ref)
		}
		if _, err := wb.Commit(ctx); err != nil {
			return writeError("delete counter", err)
		}
	}
}

// deleteOwn deletes the bucket, member or request documents of col that
// the counter created at created leaves (docstore.Swept), a page in document
// order and a commit at a time, each under the update time it was read
// at: one a counter made again under the id has written since fails the
// commit, and the page is read again.
func (s *CounterStore) deleteOwn(ctx context.Context, col *firestore.CollectionRef, created time.Time) error {
	var after *firestore.DocumentSnapshot
	for attempt := 0; ; {
		q := col.OrderBy(firestore.DocumentID, firestore.Asc).Limit(400)
		if after != nil {
			q = q.StartAfter(after)
		}
		docs, err := q.Documents(ctx).GetAll()
		if err != nil {
			return readError("delete counter", err)
		}
		if len(docs) == 0 {
			return nil
		}
		wb := s.client.Batch() //nolint:staticcheck // see CreateCounter
		n := 0
		for _, d := range docs {
			if of, _ := d.Data()[fieldOf].(time.Time); docstore.Swept(d.Ref.ID, of, created) {
				wb.Delete(d.Ref, firestore.LastUpdateTime(d.UpdateTime))
				n++
			}
		}
		if n > 0 {
			if _, err := wb.Commit(ctx); err != nil {
				if !errors.Is(commitError(err), errConflict) || attempt == 50 {
					return writeError("delete counter", err)
				}
				attempt++
				continue
			}
		}
		after = docs[len(docs)-1]
	}
}

// ReshardCounter rewrites the counter in one commit (see
// docstore.ReshardCounter), with the versions it read as preconditions.
func (s *CounterStore) ReshardCounter(ctx context.Context, id string, n int) (*shardcounter.Counter, error) {
	return docstore.ReshardCounter(ctx, counters{s}, "firestore", id, n)
}

// expire deletes up to docstore.ExpireBatch+recorded expired request
// ids, oldest first, and the expired batch markers among them, in a commit
// of their own after the batch's (see docstore.Base.Expire).
func (s *CounterStore) expire(ctx context.Context, recorded int) {
	s.Expire(s.now(), recorded, func(limit int, cut time.Time) (int, error) {
		docs, err := s.client.CollectionGroup(requestsCollection).Where(fieldAt, "<=", cut).
			OrderBy(fieldAt, firestore.Asc).Limit(limit).Documents(ctx).GetAll()
		if err != nil {
			return 0, err
		}
		wb := s.client.Batch() //nolint:staticcheck // see CreateCounter
		n, ids := 0, 0
		for _, d := range docs {
			if !strings.HasPrefix(d.Ref.ID, markerPrefix) {
				if ids == limit-1 {
					continue
				}
				ids++
			}
			wb.Delete(d.Ref, firestore.LastUpdateTime(d.UpdateTime))
			n++
		}
		if n > 0 {
			if _, err := wb.Commit(ctx); err != nil {
				return 0, err
			}
		}
		return len(docs), nil
	})
}
