package datastore

import (
	"context"
	"encoding/json"
	"errors"

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
