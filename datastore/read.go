package datastore

import (
	"context"
	"errors"
	"strings"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
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

// snapshot is counters read in one read-only transaction: each one's
// entity and shard values.
type snapshot struct {
	ents   map[string]*counterEntity
	values map[string][]int64
	// sketches are an approx counter's shards' sketches; its values are
	// each shard's own estimate.
	sketches map[string][][]byte
	at       time.Time
}

// read reads the counters and all their shards in a read-only
// transaction, whose reads are one snapshot: one lookup of the counter
// entities and the shards the store expects them to have, and a second
// for any counter resharded since. (A lookup outside a transaction is not
// enough: the emulator lets it see part of a commit.) A read-only
// transaction takes no locks, so it is neither committed nor rolled back:
// two round trips, its begin and its lookup.
func (s *CounterStore) read(ctx context.Context, ids []string) (*snapshot, error) {
	tx, err := s.client.NewTransaction(ctx, datastore.ReadOnly)
	if err != nil {
		return nil, readError("read counters", err)
	}
	sn, _, err := s.readIn(ctx, tx, ids)
	return sn, err
}

// readIn reads the counters in tx.
func (s *CounterStore) readIn(ctx context.Context, tx *datastore.Transaction, ids []string) (sn *snapshot, ok bool, err error) {
	sn = &snapshot{ents: map[string]*counterEntity{}, values: map[string][]int64{}, sketches: map[string][][]byte{}, at: s.now()}
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
			sn.sketches[id] = sks
		}
		sn.ents[id], sn.values[id] = e, vals
	}
	return sn, true, nil
}

// ReadCounter sums the counter's shards, read with its entity in one
// snapshot: linearizable.
func (s *CounterStore) ReadCounter(ctx context.Context, id string) (*shardcounter.Reading, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	rs, err := s.ReadCounters(ctx, []string{id})
	if err != nil {
		return nil, err
	}
	if rs[0] == nil {
		return nil, shardcounter.CounterNotFound(id)
	}
	return rs[0], nil
}

// ReadCounters reads many counters in one snapshot.
func (s *CounterStore) ReadCounters(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	if err := shardcounter.CheckReadBatch(len(ids)); err != nil {
		return nil, err
	}
	out := make([]*shardcounter.Reading, len(ids))
	var uniq []string
	seen := make(map[string]bool)
	for _, id := range ids {
		if !seen[id] && shardcounter.ValidateID("counter id", id) == nil {
			seen[id] = true
			uniq = append(uniq, id)
		}
	}
	if len(uniq) == 0 {
		return out, nil
	}
	sn, err := s.read(ctx, uniq)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		e, ok := sn.ents[id]
		if !ok {
			continue
		}
		v, ok := overflow.Sum(sn.values[id])
		if !ok {
			return nil, shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: its shards sum to more than int64 holds", id)
		}
		if isApprox(e.Kind) {
			if v, err = approxValue(id, sn.sketches[id]); err != nil {
				return nil, err
			}
		}
		out[i] = &shardcounter.Reading{ID: id, Value: v, Shards: int(e.NumShards), Consistency: shardcounter.Strong, AsOf: sn.at}
	}
	return out, nil
}

// ReadShards returns the counter and each shard's value, one snapshot.
func (s *CounterStore) ReadShards(ctx context.Context, id string) (*shardcounter.Counter, []int64, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, nil, err
	}
	sn, err := s.read(ctx, []string{id})
	if err != nil {
		return nil, nil, err
	}
	e, ok := sn.ents[id]
	if !ok {
		return nil, nil, shardcounter.CounterNotFound(id)
	}
	vals := sn.values[id]
	if isApprox(e.Kind) { // each shard's own estimate
		vals = make([]int64, e.NumShards)
		for i, b := range sn.sketches[id] {
			if vals[i], err = approxValue(id, [][]byte{b}); err != nil {
				return nil, nil, err
			}
		}
	}
	return e.counter(id), vals, nil
}

// Placement names each shard's entity as its node: the database spreads
// entities over its servers itself.
func (s *CounterStore) Placement(ctx context.Context, id string) (*shardcounter.Placement, error) {
	c, vals, err := s.ReadShards(ctx, id)
	if err != nil {
		return nil, err
	}
	p := &shardcounter.Placement{ID: id, Shards: c.Shards, AsOf: s.now()}
	for i, v := range vals {
		p.Places = append(p.Places, shardcounter.ShardPlacement{Shard: i, Value: v, Node: s.node(id, i)})
	}
	return p, nil
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
