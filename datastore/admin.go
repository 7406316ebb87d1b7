package datastore

import (
	"context"
	"errors"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// errExists ends a create's transaction on a counter that exists.
var errExists = errors.New("datastore: counter exists")

// transact runs f in a transaction, again after a conflict (with backoff,
// counted in Stats.Conflicts), up to a few dozen times.
func (s *CounterStore) transact(ctx context.Context, op, id string, f func(tx *datastore.Transaction) error) error {
	defer s.Locks.LockCounters(id)()
	pause := time.Millisecond
	for attempt := 0; ; attempt++ {
		tx, err := s.client.NewTransaction(ctx)
		if err != nil {
			return readError(op, err)
		}
		err = f(tx)
		if err == nil {
			_, err = tx.Commit()
			if err == nil {
				return nil
			}
			err = commitError(err)
		} else {
			tx.Rollback()
			if !errors.Is(err, errConflict) {
				return err
			}
		}
		if !errors.Is(err, errConflict) {
			if shardcounter.IsOutcomeUnknown(err) {
				return shardcounter.OutcomeUnknownf("datastore: %s: %v", op, err)
			}
			return err
		}
		s.Stats().Conflicts.Add(1)
		if attempt == 40 || docstore.Sleep(ctx, pause) != nil {
			return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "datastore: %s kept meeting other writers; nothing applied, try again", op)
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// getIn reads the counter entity in tx; nil when it does not exist.
func (s *CounterStore) getIn(tx *datastore.Transaction, id string) (*counterEntity, error) {
	var e counterEntity
	err := tx.Get(s.counterKey(id), &e)
	var fm *datastore.ErrFieldMismatch
	switch {
	case errors.Is(err, datastore.ErrNoSuchEntity):
		return nil, nil
	case err != nil && !errors.As(err, &fm):
		return nil, txError("read counter", err)
	}
	return &e, e.check(s.counterKey(id))
}

// CreateCounter writes the counter entity and its zeroed shards in one
// transaction.
func (s *CounterStore) CreateCounter(ctx context.Context, id string, spec shardcounter.Spec) (*shardcounter.Counter, error) {
	spec, err := docstore.CheckCreate(id, spec)
	if err != nil {
		return nil, err
	}
	e := newCounterEntity(id, spec, s.now().UTC().Truncate(time.Microsecond))
	err = s.transact(ctx, "create counter", id, func(tx *datastore.Transaction) error {
		old, err := s.getIn(tx, id)
		if err != nil {
			return err
		}
		if old != nil {
			return errExists
		}
		muts := []*datastore.Mutation{datastore.NewInsert(s.counterKey(id), e)}
		for i := range spec.Shards {
			muts = append(muts, datastore.NewUpsert(s.ShardKey(id, i), &shardEntity{Target: id}))
		}
		_, err = tx.Mutate(muts...)
		return txErr(err)
	})
	if errors.Is(err, errExists) {
		return nil, shardcounter.Errorf(shardcounter.EEXISTS, "counter %q already exists", id)
	}
	if err != nil {
		return nil, err
	}
	s.shards.Add(id, e)
	return e.counter(id), nil
}

func txErr(err error) error {
	if err != nil {
		return txError("write", err)
	}
	return nil
}

// DeleteCounter deletes the counter entity and its shards in one
// transaction, then its members, buckets and request ids. Those left
// behind by a failure are never read again: they carry the deleted
// counter's created_at, which a counter made again under the id does not
// have.
func (s *CounterStore) DeleteCounter(ctx context.Context, id string) error {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return err
	}
	found := true
	err := s.transact(ctx, "delete counter", id, func(tx *datastore.Transaction) error {
		e, err := s.getIn(tx, id)
		if err != nil {
			return err
		}
		if found = e != nil; !found {
			return nil
		}
		keys := []*datastore.Key{s.counterKey(id)}
		for i := range int(e.NumShards) {
			keys = append(keys, s.ShardKey(id, i))
		}
		return txErr(tx.DeleteMulti(keys))
	})
	s.shards.Remove(id)
	if err != nil {
		return err
	}
	if !found {
		return shardcounter.CounterNotFound(id)
	}
	for _, kind := range []string{memberKind, bucketKind, requestKind} {
		if err := s.deleteChildren(ctx, "delete counter", s.counterKey(id), kind); err != nil {
			return err
		}
	}
	return nil
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
