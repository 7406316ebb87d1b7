package datastore

import (
	"context"
	"errors"

	"cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// GetCounter returns the counter's metadata.
func (s *CounterStore) GetCounter(ctx context.Context, id string) (*shardcounter.Counter, error) {
	e, err := s.getEntity(ctx, id)
	if err != nil {
		return nil, err
	}
	return e.counter(id), nil
}

func (s *CounterStore) getEntity(ctx context.Context, id string) (*counterEntity, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	var e counterEntity
	err := s.client.Get(ctx, s.counterKey(id), &e)
	var fm *datastore.ErrFieldMismatch
	switch {
	case errors.Is(err, datastore.ErrNoSuchEntity):
		return nil, shardcounter.CounterNotFound(id)
	case err != nil && !errors.As(err, &fm):
		return nil, readError("read counter", err)
	}
	if err := e.check(s.counterKey(id)); err != nil {
		return nil, err
	}
	return &e, nil
}

// read reads the counters and all their shards as one snapshot
// (readOnce), again after a conflict with a writer, with backoff, up to a
// few dozen times.
func (s *CounterStore) read(ctx context.Context, ids []string) (sn *docstore.Snapshot, err error) {
	gaveUp, err := docstore.RetryConflicts(ctx, func(err error) bool { return errors.Is(err, errConflict) },
		func() (err error) { sn, err = s.readOnce(ctx, ids); return err })
	if gaveUp {
		return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "datastore: read counters kept meeting writers; try again")
	}
	return sn, err
}

// readOnce reads the counters and all their shards in one transaction,
// whose reads are one snapshot: one lookup of the counter entities and
// the shards the store expects them to have, and a second for any
// counter resharded since. (A lookup outside a transaction is not
// enough: the emulator lets it see part of a commit.) The transaction is
// read-only (two round trips, its begin and its lookup: it takes no
// locks, so it is neither committed nor rolled back), except on the
// emulator (lockedReads), whose read-only transactions are no snapshot:
// a lookup in one sees the entities a commit has written so far and not
// the rest, and the same lookup again sees them all. There it is a
// read-write transaction, whose lookups wait for the commits that hold
// the entities' locks, rolled back after its reads.
func (s *CounterStore) readOnce(ctx context.Context, ids []string) (*docstore.Snapshot, error) {
	opts := []datastore.TransactionOption{datastore.ReadOnly}
	if s.lockedReads {
		// Its calls run under a context that outlives ctx's end by
		// txGrace, as a write's do (see attempt): cut off, it would hold
		// its locks until the emulator expires it.
		opts = nil
		var cancel context.CancelFunc
		if d, ok := ctx.Deadline(); ok {
			ctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), d.Add(txGrace))
		} else {
			ctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
		}
		defer cancel()
	}
	tx, err := s.client.NewTransaction(ctx, opts...)
	if err != nil {
		return nil, readError("read counters", err)
	}
	if s.lockedReads {
		defer tx.Rollback() //nolint:errcheck // it wrote nothing: the rollback frees its locks
	}
	sn := &docstore.Snapshot{Counters: map[string]*shardcounter.Counter{}, Values: map[string][]int64{}, Sketches: map[string][][]byte{}, At: s.now()}
	ents := make(map[string]*counterEntity, len(ids))
	shards := make(map[string]map[int]*shardEntity, len(ids))
	var l loads
	want := func(id string, n int) bool {
		m := shards[id]
		if m == nil {
			m = map[int]*shardEntity{}
			shards[id] = m
		}
		more := false
		for i := range n {
			if m[i] == nil {
				se := &shardEntity{}
				m[i] = se
				l.add(s.ShardKey(id, i), se, func(bool) {})
				more = true
			}
		}
		return more
	}
	for _, id := range ids {
		e := new(counterEntity)
		l.add(s.counterKey(id), e, func(found bool) {
			if found {
				ents[id] = e
			}
		})
		if g, ok := s.shards.Peek(id); ok {
			want(id, int(g.NumShards))
		}
	}
	for {
		if err := l.run(tx); err != nil {
			if errors.Is(err, errConflict) {
				return nil, err
			}
			return nil, readError("read counters", err)
		}
		more := false
		for _, id := range ids {
			if e := ents[id]; e != nil && want(id, int(e.NumShards)) {
				more = true // the entities are read: at most once
			}
		}
		if !more {
			break
		}
	}
	for _, id := range ids {
		e := ents[id]
		if e == nil {
			continue
		}
		if err := e.check(s.counterKey(id)); err != nil {
			return nil, err
		}
		if g, ok := s.shards.Peek(id); !ok || g.NumShards != e.NumShards || g.Wide != e.Wide || !g.CreatedAt.Equal(e.CreatedAt) {
			s.shards.Add(id, e)
		}
		vals := make([]int64, e.NumShards)
		for i := range vals {
			vals[i] = shards[id][i].Count
		}
		if isApprox(e.Kind) {
			sks := make([][]byte, e.NumShards)
			for i := range sks {
				sks[i] = shards[id][i].Sketch
			}
			sn.Sketches[id] = sks
		}
		sn.Counters[id], sn.Values[id] = e.counter(id), vals
	}
	return sn, nil
}

// counterPage reads a page of counter entities in key order, which is
// id order (Escape keeps it), for docstore.Reads.ListCounters.
func (s *CounterStore) counterPage(ctx context.Context, from string, incl bool, n int) ([]docstore.Listed, error) {
	q := datastore.NewQuery(counterKind).Namespace(s.namespace).Order("__key__").Limit(n)
	switch {
	case from != "" && incl:
		q = q.FilterField("__key__", ">=", s.keyOf(from))
	case from != "":
		q = q.FilterField("__key__", ">", s.keyOf(from))
	}
	var es []counterEntity
	keys, err := s.client.GetAll(ctx, q, &es)
	var fm *datastore.ErrFieldMismatch
	if err != nil && !errors.As(err, &fm) {
		return nil, readError("list counters", err)
	}
	out := make([]docstore.Listed, len(keys))
	for i, k := range keys {
		out[i].Key = k.Name
		if id, err := Unescape(k.Name); err == nil && es[i].check(k) == nil {
			out[i].Name, out[i].C = id, es[i].counter(id)
		}
	}
	return out, nil
}
