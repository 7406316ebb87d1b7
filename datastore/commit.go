package datastore

import (
	"context"
	"strings"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter/internal/docstore"
)

// sweep finds, in the transaction, the buckets past retention the
// commit deletes (docstore.Sweep).
func (b *batch) sweep(ctx context.Context) (err error) {
	b.sweeps, err = docstore.Sweep(&b.View, b.order, func(id string, cut time.Time) ([]*datastore.Key, error) {
		t := b.targets[id]
		q := datastore.NewQuery(bucketKind).Namespace(b.s.namespace).Ancestor(t.key).FilterField("__key__", "<", childKey(t.key, bucketKind, bucketName(cut.Unix()))).
			KeysOnly().Limit(docstore.SweepBatch).Transaction(b.tx)
		keys, err := b.s.client.GetAll(ctx, q, nil)
		if err != nil {
			return nil, txError("read window buckets", err)
		}
		return keys, nil
	})
	return err
}

// shardWrite is a shard entity the commit writes.
type shardWrite struct {
	t     *target
	shard int
}

// mutations returns the commit's writes: for each counter the batch
// touched its entity (when created, or newly wide), the shards it changed
// (every shard of one it creates), members, the bucket of now; then the
// request ids and the swept buckets.
func (b *batch) mutations() ([]*datastore.Mutation, []shardWrite) {
	var muts []*datastore.Mutation
	var sw []shardWrite
	at := time.Now().UnixNano() // the pace stamp (see paceWait): the servers' clock, not the store's
	b.size = docstore.NewSizes()
	put := func(k *datastore.Key, e any) {
		muts = append(muts, datastore.NewUpsert(k, e))
		b.count(k, e)
	}
	del := func(k *datastore.Key) {
		muts = append(muts, datastore.NewDelete(k))
		b.count(k, nil)
	}
	for _, id := range b.order {
		t := b.targets[id]
		if !t.Touched {
			continue
		}
		b.size.For(id)
		if t.Create || (t.Wide && !t.st.Wide) {
			e := *t.st
			e.Wide = e.Wide || t.Wide
			put(t.key, &e)
		}
		for i := range int(t.st.NumShards) {
			sk, newSketch := t.Sketch[i]
			if !t.Create && !t.Written[i] && !newSketch {
				continue
			}
			se := t.shards[i]
			if se == nil || t.Create {
				se = &shardEntity{}
			}
			e := *se
			e.Target, e.Count, e.By, e.At = t.id, t.Vals[i], b.s.stamp, at
			if newSketch {
				e.Sketch = sk
			}
			put(b.s.ShardKey(t.id, i), &e)
			sw = append(sw, shardWrite{t: t, shard: i})
		}
		for m, present := range t.Present {
			k := childKey(t.key, memberKind, Escape(m))
			if present {
				put(k, &ownEntity{Of: t.st.CreatedAt})
			} else {
				del(k)
			}
		}
		if n := len(t.Buckets); n > 0 { // the last: more than one only when the batch's deltas leave int64
			be := bucketEntity{Start: t.Buckets[n-1].Start, Count: t.Buckets[n-1].Value, Of: t.st.CreatedAt}
			put(childKey(t.key, bucketKind, bucketName(be.Start.Unix())), &be)
		}
	}
	for _, r := range b.Records {
		t := b.targets[r.Counter]
		b.size.For(r.Counter)
		put(childKey(t.key, requestKind, Escape(r.ID)), &ownEntity{Of: t.st.CreatedAt, At: b.now})
	}
	for _, id := range b.Removes {
		// An idle limit state the batch removes (docstore.View.Removes):
		// its entity and shards, which the transaction read, so that a
		// take committed since aborts it. Its request ids stay for the
		// request-id expiry: they carry its created_at, which a state made
		// again does not have (docstore.View.TakeOwn). It has no members
		// and no buckets.
		t := b.targets[id]
		b.size.For(id)
		for i := range int(t.ent.NumShards) {
			del(b.s.ShardKey(id, i))
		}
		del(t.key)
	}
	for _, k := range b.sweeps {
		id, _ := Unescape(k.Parent.Name) // a bucket of the counter
		b.size.For(id)
		del(k)
	}
	b.size.For("")
	return muts, sw
}

// count adds a mutation of key k, writing entity e (nil for a delete),
// to the commit's estimated size.
func (b *batch) count(k *datastore.Key, e any) {
	b.size.Write(b.s.project + k.Namespace + k.String())
	var ps []datastore.Property
	switch e := e.(type) {
	case nil:
	case datastore.PropertyLoadSaver:
		ps, _ = e.Save()
	default:
		ps, _ = datastore.SaveStruct(e)
	}
	for _, p := range ps {
		b.size.Field(p.Name, p.Value)
	}
}

// committed takes in a committed batch: the per-entity commit counts, and
// the counters' entities as the commit left them.
func (b *batch) committed(sw []shardWrite) {
	for _, w := range sw {
		b.s.Stats().Committed(w.t.id, w.shard)
	}
	for _, id := range b.order {
		t := b.targets[id]
		if t.Touched && (t.Create || t.Wide) {
			e := *t.st
			e.Wide = e.Wide || t.Wide
			b.s.shards.Add(id, &e)
		}
	}
	for _, id := range b.Removes {
		for i := range int(b.targets[id].ent.NumShards) {
			b.s.Stats().Committed(id, i)
		}
		b.s.shards.Remove(id)
	}
}

// expire deletes up to docstore.ExpireBatch+recorded expired request
// ids, oldest first, and the expired batch markers among them, in a
// transaction of their own after the batch's, which checks that each is
// still expired (see docstore.Base.Expire).
func (s *CounterStore) expire(ctx context.Context, recorded int) {
	s.Expire(s.now(), recorded, func(limit int, cut time.Time) (int, error) {
		q := datastore.NewQuery(requestKind).Namespace(s.namespace).FilterField("at", "<=", cut).Order("at").KeysOnly().Limit(limit)
		found, err := s.client.GetAll(ctx, q, nil)
		if err != nil {
			return 0, err
		}
		var keys []*datastore.Key
		n := 0 // request ids among keys
		for _, k := range found {
			if !strings.HasPrefix(k.Name, markerPrefix) {
				if n == limit-1 {
					continue
				}
				n++
			}
			keys = append(keys, k)
		}
		if len(keys) > 0 {
			var ids []string
			for _, k := range keys {
				if id, err := Unescape(k.Parent.Name); err == nil {
					ids = append(ids, id)
				}
			}
			unlock := s.Locks.LockCounters(ids...)
			defer unlock()
			_, err := s.client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
				es := make([]ownEntity, len(keys))
				if err := tx.GetMulti(keys, es); err != nil {
					if _, ok := err.(datastore.MultiError); !ok {
						return err
					}
				}
				var del []*datastore.Key
				for i, e := range es {
					if !e.At.IsZero() && !e.At.After(cut) {
						del = append(del, keys[i])
					}
				}
				return tx.DeleteMulti(del)
			})
			if err != nil {
				return 0, err
			}
		}
		return len(found), nil
	})
}
