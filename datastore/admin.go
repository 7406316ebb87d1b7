package datastore

import (
	"context"
	"errors"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// transact runs f in a transaction, again after a conflict (with backoff,
// counted in Stats.Conflicts), up to a few dozen times.
func (s *CounterStore) transact(ctx context.Context, op, id string, f func(tx *datastore.Transaction) error) error {
	defer s.Locks.LockCounters(id)()
	conflict := func(err error) bool {
		if errors.Is(err, errConflict) {
			s.Stats().Conflicts.Add(1)
			return true
		}
		return false
	}
	gaveUp, err := docstore.RetryConflicts(ctx, conflict, func() error {
		tx, err := s.client.NewTransaction(ctx)
		if err != nil {
			return readError(op, err)
		}
		if err := f(tx); err != nil {
			tx.Rollback()
			return err
		}
		if _, err := tx.Commit(); err != nil {
			if err = commitError(err); shardcounter.IsOutcomeUnknown(err) {
				return shardcounter.OutcomeUnknownf("datastore: %s: %v", op, err)
			}
			return err
		}
		return nil
	})
	if gaveUp {
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "datastore: %s kept meeting other writers; nothing applied, try again", op)
	}
	return err
}

// CreateCounter writes the counter entity and its zeroed shards in one
// transaction (docstore.CreateCounter).
func (s *CounterStore) CreateCounter(ctx context.Context, id string, spec shardcounter.Spec) (*shardcounter.Counter, error) {
	return docstore.CreateCounter(ctx, counters{s}, id, spec, s.now())
}

func txErr(err error) error {
	if err != nil {
		return txError("write", err)
	}
	return nil
}

// DeleteCounter deletes the counter entity and its shards in one
// transaction (docstore.DeleteCounter), then its buckets, members and
// request ids that carry its created_at or none (docstore.Swept): those
// of a counter made again under the id meanwhile stay, and so do batch
// markers.
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
	for _, kind := range []string{bucketKind, memberKind, requestKind} {
		if err := s.deleteOwn(ctx, id, kind, created); err != nil {
			return err
		}
	}
	return nil
}

// deleteOwn deletes the bucket, member or request entities (kind) under
// counter id that the counter created at created leaves (docstore.Swept),
// a page of keys in key order at a time, each page read again and deleted
// in a transaction: one a counter made again under the id writes
// meanwhile conflicts with it. Each is read as an ownEntity for its of (a
// bucket's other properties are a field mismatch).
func (s *CounterStore) deleteOwn(ctx context.Context, id, kind string, created time.Time) error {
	const op = "delete counter"
	ck := s.counterKey(id)
	var after *datastore.Key
	for {
		q := datastore.NewQuery(kind).Namespace(s.namespace).Ancestor(ck).Order("__key__").KeysOnly().Limit(400)
		if after != nil {
			q = q.FilterField("__key__", ">", after)
		}
		keys, err := s.client.GetAll(ctx, q, nil)
		if err != nil {
			return readError(op, err)
		}
		if len(keys) == 0 {
			return nil
		}
		err = s.transact(ctx, op, id, func(tx *datastore.Transaction) error {
			var l loads
			var del []*datastore.Key
			for _, k := range keys {
				e := new(ownEntity)
				l.add(k, e, func(found bool) {
					if found && docstore.Swept(k.Name, e.Of, created) {
						del = append(del, k)
					}
				})
			}
			if err := l.run(tx); err != nil {
				return err
			}
			return txErr(tx.DeleteMulti(del))
		})
		if err != nil {
			return err
		}
		after = keys[len(keys)-1]
	}
}

// deleteChildren deletes every entity of kind under parent, a commit per
// page.
func (s *CounterStore) deleteChildren(ctx context.Context, op string, parent *datastore.Key, kind string) error {
	for {
		q := datastore.NewQuery(kind).Namespace(s.namespace).Ancestor(parent).KeysOnly().Limit(400)
		keys, err := s.client.GetAll(ctx, q, nil)
		if err != nil {
			return readError(op, err)
		}
		if len(keys) == 0 {
			return nil
		}
		if err := s.client.DeleteMulti(ctx, keys); err != nil {
			return readError(op, err)
		}
	}
}

// ReshardCounter rewrites the counter in one transaction (see
// docstore.ReshardCounter).
func (s *CounterStore) ReshardCounter(ctx context.Context, id string, n int) (*shardcounter.Counter, error) {
	return docstore.ReshardCounter(ctx, counters{s}, "datastore", id, n)
}
