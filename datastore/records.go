package datastore

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// records adapts the store to docstore.Records: a record is an entity of
// its table's kind (SC_Collection, SC_Ranking) keyed by the escaped name,
// every property unindexed (nothing queries them), a list as its JSON.
type records struct{ s *CounterStore }

func (r records) key(t docstore.Table, name string) *datastore.Key {
	var parent *datastore.Key
	if t.Parent != nil {
		parent = r.key(*t.Parent, t.ParentName)
	}
	k := datastore.NameKey(t.Name, Escape(name), parent)
	k.Namespace = r.s.namespace
	return k
}

// recordLock is the stripe a record's transactions hold (and those of a
// collection's documents, which read its record): apart from any
// counter's, so that the transactions on one record queue in this
// process.
func recordLock(t docstore.Table, name string) string { return "\x00" + t.Name + "/" + name }

func recordOf(ps datastore.PropertyList) docstore.Record {
	rec := make(docstore.Record, len(ps))
	for _, p := range ps {
		rec[p.Name] = p.Value
	}
	return rec
}

// GetRecord reads a record's entity.
func (r records) GetRecord(ctx context.Context, t docstore.Table, name string) (docstore.Record, error) {
	var ps datastore.PropertyList
	err := r.s.client.Get(ctx, r.key(t, name), &ps)
	if errors.Is(err, datastore.ErrNoSuchEntity) {
		return nil, nil
	}
	if err != nil {
		return nil, readError("read "+t.Noun, err)
	}
	return recordOf(ps), nil
}

// getIn reads a record's entity in tx; nil when there is none.
func (r records) getIn(tx *datastore.Transaction, t docstore.Table, name string) (docstore.Record, error) {
	var ps datastore.PropertyList
	err := tx.Get(r.key(t, name), &ps)
	if errors.Is(err, datastore.ErrNoSuchEntity) {
		return nil, nil
	}
	if err != nil {
		return nil, txError("read "+t.Noun, err)
	}
	return recordOf(ps), nil
}

// ListRecords queries the table's kind.
func (r records) ListRecords(ctx context.Context, t docstore.Table) ([]docstore.Record, error) {
	var pss []datastore.PropertyList
	if _, err := r.s.client.GetAll(ctx, datastore.NewQuery(t.Name).Namespace(r.s.namespace), &pss); err != nil {
		return nil, readError("list "+t.Noun+"s", err)
	}
	out := make([]docstore.Record, len(pss))
	for i, ps := range pss {
		out[i] = recordOf(ps)
	}
	return out, nil
}

// PutRecord writes in a transaction that reads the entity first, since
// Datastore has no precondition outside one (and a delete of a missing
// entity succeeds). A create that loses to a concurrent one aborts, is
// tried again, and then finds the winner.
func (r records) PutRecord(ctx context.Context, op string, t docstore.Table, name string, f func(docstore.Record) (docstore.Record, bool, error)) error {
	k := r.key(t, name)
	return r.s.transact(ctx, op, recordLock(t, name), func(tx *datastore.Transaction) error {
		old, err := r.getIn(tx, t, name)
		if err != nil {
			return err
		}
		rec, write, err := f(old)
		if err != nil || !write {
			return err
		}
		if rec == nil {
			return txErr(tx.Delete(k))
		}
		ps := make(datastore.PropertyList, 0, len(rec))
		for name, v := range rec {
			if l, ok := v.([]string); ok {
				b, _ := json.Marshal(l)
				v = string(b)
			}
			ps = append(ps, datastore.Property{Name: name, Value: v, NoIndex: true})
		}
		_, err = tx.Put(k, &ps)
		return txErr(err)
	})
}

// rankingsTable holds one entity per ranking (docstore.Rankings), as the
// Firestore store keeps them.
var rankingsTable = docstore.Table{Name: "SC_Ranking", Noun: "ranking"}

var _ shardcounter.RankingStore = (*CounterStore)(nil)

// counters adapts the store to docstore.Counters: a transaction is one
// of Datastore's, its reads paged lookups (maxLookup keys each), its
// writes upserts of the properties read with the fields merged in (every
// one unindexed but num_shards and the seed's target).
type counters struct{ s *CounterStore }

type tx struct {
	s    *CounterStore
	tx   *datastore.Transaction
	read map[docstore.DocKey]datastore.PropertyList
	muts []*datastore.Mutation
}

func (c counters) key(k docstore.DocKey) *datastore.Key {
	if k.Shard < 0 {
		return c.s.counterKey(k.ID)
	}
	return c.s.ShardKey(k.ID, k.Shard)
}

// Transact runs f in a transaction (transact) and mutates what it wrote.
func (c counters) Transact(ctx context.Context, op, id string, f func(docstore.Tx) error) error {
	return c.s.transact(ctx, op, id, func(dtx *datastore.Transaction) error {
		t := &tx{s: c.s, tx: dtx, read: map[docstore.DocKey]datastore.PropertyList{}}
		if err := f(t); err != nil || len(t.muts) == 0 {
			return err
		}
		_, err := dtx.Mutate(t.muts...)
		return txErr(err)
	})
}

// Get reads keys in the transaction.
func (t *tx) Get(keys []docstore.DocKey) ([]docstore.Record, error) {
	var l loads
	pss := make([]datastore.PropertyList, len(keys))
	out := make([]docstore.Record, len(keys))
	for i, k := range keys {
		l.add(counters{t.s}.key(k), &pss[i], func(found bool) {
			if found {
				t.read[k], out[i] = pss[i], recordOf(pss[i])
			}
		})
	}
	return out, l.run(t.tx)
}

// Put upserts the entity read with fields in place of its properties.
func (t *tx) Put(k docstore.DocKey, fields docstore.Record) {
	ps := slices.DeleteFunc(slices.Clone(t.read[k]), func(p datastore.Property) bool { _, ok := fields[p.Name]; return ok })
	for name, v := range fields {
		if v != docstore.Deleted {
			ps = append(ps, datastore.Property{Name: name, Value: v, NoIndex: name != "num_shards" && name != "target"})
		}
	}
	t.muts = append(t.muts, datastore.NewUpsert(counters{t.s}.key(k), &ps))
}

// Delete deletes an entity.
func (t *tx) Delete(k docstore.DocKey) {
	t.muts = append(t.muts, datastore.NewDelete(counters{t.s}.key(k)))
}

// NewCounter is a new counter entity.
func (counters) NewCounter(id string, spec shardcounter.Spec, created time.Time) docstore.Record {
	ps, _ := newCounterEntity(id, spec, created).Save()
	return recordOf(ps)
}

// CounterOf reads a counter entity (counterEntity).
func (c counters) CounterOf(id string, rec docstore.Record) (shardcounter.Spec, time.Time, error) {
	var e counterEntity
	e.load(rec)
	return e.spec(), e.CreatedAt.UTC(), e.check(c.s.counterKey(id))
}

// ShardValue is a shard entity's count.
func (counters) ShardValue(rec docstore.Record) int64 {
	v, _ := rec["count"].(int64)
	return v
}

// Resharded sets the counter entity's num_shards and its wide mark.
func (counters) Resharded(n int, wide bool) docstore.Record {
	return docstore.Record{"num_shards": int64(n), "wide": wide}
}

// ShardFields are a shard entity's target and count, as the seed's.
func (counters) ShardFields(id string, _ int, val int64, _ bool) docstore.Record {
	return docstore.Record{"target": id, "count": val}
}

// Members lists a distinct counter's members.
func (c counters) Members(ctx context.Context, id string, created time.Time) ([]string, error) {
	return c.s.Members(ctx, id, created)
}

// Forget drops the counter's cached entity.
func (c counters) Forget(id string) { c.s.shards.Remove(id) }
