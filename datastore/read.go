package datastore

import (
	"context"
	"errors"
	"strings"

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

// read reads the counters and all their shards in a read-only
// transaction, whose reads are one snapshot: one lookup of the counter
// entities and the shards the store expects them to have, and a second
// for any counter resharded since. (A lookup outside a transaction is not
// enough: the emulator lets it see part of a commit.) A read-only
// transaction takes no locks, so it is neither committed nor rolled back:
// two round trips, its begin and its lookup.
func (s *CounterStore) read(ctx context.Context, ids []string) (*docstore.Snapshot, error) {
	tx, err := s.client.NewTransaction(ctx, datastore.ReadOnly)
	if err != nil {
		return nil, readError("read counters", err)
	}
	sn, _, err := s.readIn(ctx, tx, ids)
	return sn, err
}

// readIn reads the counters in tx.
func (s *CounterStore) readIn(ctx context.Context, tx *datastore.Transaction, ids []string) (sn *docstore.Snapshot, ok bool, err error) {
	sn = &docstore.Snapshot{Counters: map[string]*shardcounter.Counter{}, Values: map[string][]int64{}, Sketches: map[string][][]byte{}, At: s.now()}
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
	for round := range 2 {
		if err := l.runIn(ctx, s.client, tx); err != nil {
			return nil, false, readError("read counters", err)
		}
		more := false
		for _, id := range ids {
			if e := ents[id]; e != nil && want(id, int(e.NumShards)) {
				more = true
			}
		}
		if !more {
			break
		}
		if tx == nil || round == 1 {
			for _, id := range ids {
				if e := ents[id]; e != nil {
					s.shards.Add(id, e)
				}
			}
			return nil, false, nil
		}
	}
	for _, id := range ids {
		e := ents[id]
		if e == nil {
			continue
		}
		if err := e.check(s.counterKey(id)); err != nil {
			return nil, false, err
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
	return sn, true, nil
}

// ListCounters lists counter entities in key order, which is id order
// (Escape keeps it).
func (s *CounterStore) ListCounters(ctx context.Context, prefix, after string, limit int) ([]*shardcounter.Counter, error) {
	if limit <= 0 {
		limit = shardcounter.DefaultListLimit
	}
	q := datastore.NewQuery(counterKind).Namespace(s.namespace).Order("__key__")
	switch {
	case after >= prefix && after != "":
		q = q.FilterField("__key__", ">", s.counterKey(after))
	case prefix != "":
		q = q.FilterField("__key__", ">=", s.counterKey(prefix))
	}
	var out []*shardcounter.Counter
	for len(out) < limit {
		page := limit - len(out) + 8 // a few to spare for entities not of ours
		var es []counterEntity
		keys, err := s.client.GetAll(ctx, q.Limit(page), &es)
		var fm *datastore.ErrFieldMismatch
		if err != nil && !errors.As(err, &fm) {
			return nil, readError("list counters", err)
		}
		for i, k := range keys {
			id, err := Unescape(k.Name)
			if err != nil || es[i].check(k) != nil {
				continue // not an entity of ours
			}
			if !strings.HasPrefix(id, prefix) || len(out) == limit {
				return out, nil
			}
			out = append(out, es[i].counter(id))
		}
		if len(keys) < page {
			break
		}
		q = datastore.NewQuery(counterKind).Namespace(s.namespace).Order("__key__").FilterField("__key__", ">", keys[len(keys)-1])
	}
	return out, nil
}
