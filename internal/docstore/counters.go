package docstore

import (
	"bytes"
	"context"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
)

// DocKey names one of a counter's documents: its counter record (Shard -1)
// or shard Shard (from 0). Each store maps it to its layout.
type DocKey struct {
	ID    string
	Shard int
}

// Deleted, as a field's value in Tx.Put, removes the field.
var Deleted = &struct{ deleted bool }{true}

// CreateTime is the field under which Tx.Get returns a record's create
// time where the store keeps one of its own (Firestore's documents); no
// document has a field of that name, and Put never writes it.
const CreateTime = "\x00create_time"

// Tx is one atomic read-and-write of a counter's documents: what it
// writes commits only if nothing it read has changed since.
type Tx interface {
	// Get reads keys, each one's record or nil when it has none.
	Get(keys []DocKey) ([]Record, error)
	// Put merges fields into key's document as Get read it (creating it
	// when there was none); Delete removes it.
	Put(key DocKey, fields Record)
	Delete(key DocKey)
}

// Counters is what a store adapts so that its counters' administrative
// writes are written once, here: a transaction over its documents, and
// what its layout keeps in them.
type Counters interface {
	// Transact runs f and commits its writes, again while it meets
	// another writer, with the store's errors for op.
	Transact(ctx context.Context, op, id string, f func(Tx) error) error
	// NewCounter is a new counter's record; CounterOf reads one.
	NewCounter(id string, spec shardcounter.Spec, created time.Time) Record
	CounterOf(id string, rec Record) (shardcounter.Spec, time.Time, error)
	// ShardValue is the value a shard's record holds.
	ShardValue(rec Record) int64
	// Resharded is what to merge into the counter's record for n
	// shards; ShardFields into a shard's for a value of a counter of n
	// shards; wide: some shard is past ±MaxInt64/n.
	Resharded(n int, wide bool) Record
	ShardFields(id string, n int, val int64, wide bool) Record
	// Members lists a distinct counter's members; Forget drops what the
	// store caches of a counter.
	Members(ctx context.Context, id string, created time.Time) ([]string, error)
	Forget(id string)
}

// ReshardCounter rewrites counter id in one transaction to n shards: its
// shard count, every shard that stays (see Reshard: shard i of the new
// count takes the old shards j with j mod n = i, a distinct counter's
// are its members counted again, an approx counter's merge the sketches
// of those removed), new shards at 0 and the removed ones deleted. Every
// shard it keeps is rewritten, so that a writer that decided on the old
// count fails its precondition and decides again.
func ReshardCounter(ctx context.Context, c Counters, store, id string, n int) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	if err := shardcounter.ValidateShards(n); err != nil {
		return nil, err
	}
	var res *shardcounter.Counter
	err := c.Transact(ctx, "reshard", id, func(tx Tx) error {
		recs, err := tx.Get([]DocKey{{id, -1}})
		if err != nil {
			return err
		}
		if recs[0] == nil {
			return shardcounter.CounterNotFound(id)
		}
		spec, created, err := c.CounterOf(id, recs[0])
		if err != nil {
			return err
		}
		res = &shardcounter.Counter{ID: id, Spec: spec, CreatedAt: created}
		old := spec.Shards
		if old == n {
			return nil
		}
		keys := make([]DocKey, max(old, n))
		for i := range keys {
			keys[i] = DocKey{id, i}
		}
		shards, err := tx.Get(keys)
		if err != nil {
			return err
		}
		vals, prev := make([]int64, old), make([][]byte, old)
		for i := range old {
			vals[i] = c.ShardValue(shards[i])
			prev[i], _ = shards[i][PropSketch].([]byte)
		}
		vals, sks, wide, err := Reshard(store, id, KindOf(spec), vals, prev, n, func() ([]string, error) { return c.Members(ctx, id, created) })
		if err != nil {
			return err
		}
		tx.Put(DocKey{id, -1}, c.Resharded(n, wide))
		for i, k := range keys {
			if i >= n {
				tx.Delete(k)
				continue
			}
			f := c.ShardFields(id, n, vals[i], wide)
			had, _ := shards[i][PropSketch].([]byte)
			switch {
			case sks == nil || i < old && bytes.Equal(sks[i], had): // the sketch stays
			case len(sks[i]) == 0:
				f[PropSketch] = Deleted
			default:
				f[PropSketch] = sks[i]
			}
			tx.Put(k, f)
		}
		res.Spec.Shards = n
		return nil
	})
	c.Forget(id)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// CreateCounter writes counter id's record and its zeroed shards in one
// transaction, unless the record exists.
func CreateCounter(ctx context.Context, c Counters, id string, spec shardcounter.Spec, now time.Time) (*shardcounter.Counter, error) {
	spec, err := CheckCreate(id, spec)
	if err != nil {
		return nil, err
	}
	created := now.UTC().Truncate(time.Microsecond)
	err = c.Transact(ctx, "create counter", id, func(tx Tx) error {
		recs, err := tx.Get([]DocKey{{id, -1}})
		if err != nil {
			return err
		}
		if recs[0] != nil {
			return shardcounter.Errorf(shardcounter.EEXISTS, "counter %q already exists", id)
		}
		tx.Put(DocKey{id, -1}, c.NewCounter(id, spec, created))
		for i := range spec.Shards {
			tx.Put(DocKey{id, i}, c.ShardFields(id, spec.Shards, 0, false))
		}
		return nil
	})
	c.Forget(id)
	if err != nil {
		return nil, err
	}
	return &shardcounter.Counter{ID: id, Spec: spec, CreatedAt: created}, nil
}

// DeleteCounter deletes counter id's record and its shards in one
// transaction and returns the deleted counter's created_at. The store
// then sweeps the rest, its buckets, members and request ids, taking
// those Swept takes, so that those of a counter made again under the id
// meanwhile stay. Those a failure leaves behind are never read again: a
// counter made again under the id has another created_at (Owned).
func DeleteCounter(ctx context.Context, c Counters, id string) (time.Time, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return time.Time{}, err
	}
	var created time.Time
	err := c.Transact(ctx, "delete counter", id, func(tx Tx) error {
		recs, err := tx.Get([]DocKey{{id, -1}})
		if err != nil {
			return err
		}
		if recs[0] == nil {
			return shardcounter.CounterNotFound(id)
		}
		spec, at, err := c.CounterOf(id, recs[0])
		if err != nil {
			return err
		}
		created = at
		tx.Delete(DocKey{id, -1})
		for i := range spec.Shards {
			tx.Delete(DocKey{id, i})
		}
		return nil
	})
	c.Forget(id)
	return created, err
}

// Owned reports whether a record whose of is of (the created_at of the
// counter that wrote it) is the counter's created at created, as a window
// bucket is taken: one without of was written before buckets carried one,
// and counts as the counter's. (A member or request id without of is no
// counter's: View.TakeOwn.)
func Owned(of, created time.Time) bool { return of.IsZero() || of.Equal(created) }

// Swept reports whether a delete's sweep of the counter created at
// created takes the record named name (a member, a request id, a window
// bucket) whose of is of: one it Owned. Never a batch marker (Marker):
// one under the id may be that of a batch still settling a commit with no
// clear answer, of a counter made again under the id or of the deleted
// one in a batch with other counters, which would find no marker and
// commit again. The request-id expiry takes markers.
func Swept(name string, of, created time.Time) bool {
	return !strings.HasPrefix(name, MarkerPrefix) && Owned(of, created)
}
