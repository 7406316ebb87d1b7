package firestore

import (
	"context"
	"errors"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// CreateCounter writes the counter document and its zeroed shards in one
// commit, as seed 000's createCounter does with a batch.
func (s *CounterStore) CreateCounter(ctx context.Context, id string, spec shardcounter.Spec) (*shardcounter.Counter, error) {
	spec, err := docstore.CheckCreate(id, spec)
	if err != nil {
		return nil, err
	}
	m := meta{spec: spec, created: s.now().UTC().Truncate(time.Microsecond)}
	ref := s.counterRef(id)
	wb := s.client.Batch() //nolint:staticcheck // the one atomic commit in one round trip
	wb.Create(ref, metaFields(id, m))
	for i := range spec.Shards {
		wb.Create(shardRef(ref, i), map[string]any{s.field: int64(0), fieldNumShards: int64(spec.Shards), fieldBy: s.writer})
	}
	if _, err := wb.Commit(ctx); err != nil {
		if status.Code(err) == codes.AlreadyExists {
			return nil, shardcounter.Errorf(shardcounter.EEXISTS, "counter %q already exists", id)
		}
		return nil, writeError("create counter", err)
	}
	s.fullHint.Delete(id)
	s.cache.Remove(id)
	return m.counter(id), nil
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
// commit, then its members, buckets and request ids. Those left behind by
// a failure are never read again: they carry the deleted counter's
// created_at, which a counter made again under the id does not have.
func (s *CounterStore) DeleteCounter(ctx context.Context, id string) error {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return err
	}
	ref := s.counterRef(id)
	for attempt := 0; ; attempt++ {
		sn, err := s.read(ctx, []string{id})
		if err != nil {
			return err
		}
		m, ok := sn.metas[id]
		if !ok {
			return shardcounter.CounterNotFound(id)
		}
		unlock := s.lockAll(id, m.spec.Shards)
		wb := s.client.Batch() //nolint:staticcheck // see CreateCounter
		wb.Delete(ref, firestore.Exists)
		for i := range m.spec.Shards {
			wb.Delete(shardRef(ref, i))
		}
		_, err = wb.Commit(ctx)
		s.cache.Remove(id)
		unlock()
		if err == nil {
			break
		}
		if !errors.Is(commitError(err), errConflict) || attempt == 5 {
			return writeError("delete counter", err)
		}
	}
	s.fullHint.Delete(id)
	for _, c := range []string{membersCollection, bucketsCollection, requestsCollection} {
		if err := s.deleteAll(ctx, ref.Collection(c)); err != nil {
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

// lockAll takes the in-process locks of every shard of a counter.
func (s *CounterStore) lockAll(id string, n int) func() {
	keys := make([]int, 0, n)
	for i := range n {
		keys = append(keys, docstore.StripeOf(id, i))
	}
	return s.Locks.Lock(keys)
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
