package firestore

import (
	"context"
	"errors"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// records adapts the store to docstore.Records: a record is a document of
// a top-level collection (sc_collections, sc_rankings), its id the escaped
// name, its fields the record's.
type records struct{ s *CounterStore }

// GetRecord reads a record's document.
func (r records) GetRecord(ctx context.Context, t docstore.Table, name string) (docstore.Record, error) {
	snap, err := r.s.client.Collection(t.Name).Doc(Escape(name)).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, readError("read "+t.Noun, err)
	}
	return snap.Data(), nil
}

// ListRecords reads the table's documents.
func (r records) ListRecords(ctx context.Context, t docstore.Table) ([]docstore.Record, error) {
	snaps, err := r.s.client.Collection(t.Name).Documents(ctx).GetAll()
	if err != nil {
		return nil, readError("list "+t.Noun+"s", err)
	}
	out := make([]docstore.Record, len(snaps))
	for i, snap := range snaps {
		out[i] = snap.Data()
	}
	return out, nil
}

// PutRecord writes with the version it read as precondition: a Create
// where it found none, which Firestore refuses when the document exists.
// It reads again after a conflict, up to ten times.
func (r records) PutRecord(ctx context.Context, op string, t docstore.Table, name string, f func(docstore.Record) (docstore.Record, bool, error)) error {
	ref := r.s.client.Collection(t.Name).Doc(Escape(name))
	for attempt := 0; ; attempt++ {
		snap, err := ref.Get(ctx)
		var old docstore.Record
		switch {
		case err == nil:
			old = snap.Data()
		case status.Code(err) != codes.NotFound:
			return readError("read "+t.Noun, err)
		}
		rec, write, err := f(old)
		if err != nil || !write {
			return err
		}
		switch {
		case old == nil:
			_, err = ref.Create(ctx, rec)
		case rec == nil:
			_, err = ref.Delete(ctx, firestore.LastUpdateTime(snap.UpdateTime))
		default:
			ups := make([]firestore.Update, 0, len(rec))
			for k, v := range rec {
				ups = append(ups, firestore.Update{Path: k, Value: v})
			}
			_, err = ref.Update(ctx, ups, firestore.LastUpdateTime(snap.UpdateTime))
		}
		if err == nil || !errors.Is(commitError(err), errConflict) || attempt == 10 {
			return writeError(op, err)
		}
	}
}

// rankingsTable holds one document per ranking (docstore.Rankings).
var rankingsTable = docstore.Table{Name: "sc_rankings", Noun: "ranking"}

var _ shardcounter.RankingStore = (*CounterStore)(nil)

// counters adapts the store to docstore.Counters: a transaction is a
// commit with the update times of the documents it read as preconditions
// (Create where it found none), holding the in-process locks of the
// shards it read meanwhile.
type counters struct{ s *CounterStore }

type tx struct {
	s      *CounterStore
	ctx    context.Context
	op     string
	read   map[docstore.DocKey]time.Time // update times; zero: none
	wb     *firestore.WriteBatch
	writes int
	// stripes: the shards' stripes Get locked; written: those written.
	stripes, written []int
	unlock           func()
}

func (c counters) ref(k docstore.DocKey) *firestore.DocumentRef {
	if k.Shard < 0 {
		return c.s.counterRef(k.ID)
	}
	return shardRef(c.s.counterRef(k.ID), k.Shard)
}

// Transact commits f's writes in one batch, again after a conflict.
func (c counters) Transact(ctx context.Context, op, id string, f func(docstore.Tx) error) error {
	conflict := func(err error) bool {
		if errors.Is(commitError(err), errConflict) {
			c.s.Stats().Conflicts.Add(1)
			return true
		}
		return false
	}
	gaveUp, err := docstore.RetryConflicts(ctx, conflict, func() error {
		t := &tx{s: c.s, ctx: ctx, op: op, read: map[docstore.DocKey]time.Time{}, unlock: func() {}}
		defer func() { t.unlock() }() // Get or the commit below may set it
		t.wb = c.s.client.Batch()     //nolint:staticcheck // see CreateCounter
		err := f(t)
		if err == nil && t.writes > 0 {
			if t.stripes == nil { // locks the shards it writes, unread
				t.unlock = c.s.Locks.Lock(t.written)
			}
			if _, err = t.wb.Commit(ctx); err != nil && !errors.Is(commitError(err), errConflict) {
				err = writeError(op, err)
			}
		}
		return err
	})
	if gaveUp {
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "firestore: %s of %q kept meeting writers; nothing applied, try again", op, id)
	}
	return err
}

// Get reads keys in one GetAll, first locking the shards among them.
func (t *tx) Get(keys []docstore.DocKey) ([]docstore.Record, error) {
	var stripes []int
	refs := make([]*firestore.DocumentRef, len(keys))
	for i, k := range keys {
		refs[i] = counters{t.s}.ref(k)
		if k.Shard >= 0 {
			stripes = append(stripes, docstore.StripeOf(k.ID, k.Shard))
		}
	}
	if len(stripes) > 0 {
		t.unlock()
		t.stripes, t.unlock = stripes, t.s.Locks.Lock(stripes)
	}
	snaps, err := t.s.client.GetAll(t.ctx, refs)
	if err != nil {
		return nil, readError(t.op, err)
	}
	out := make([]docstore.Record, len(keys))
	for i, snap := range snaps {
		t.read[keys[i]] = snap.UpdateTime
		if snap.Exists() {
			out[i] = snap.Data()
			out[i][docstore.CreateTime] = snap.CreateTime
		}
	}
	return out, nil
}

func (t *tx) write(k docstore.DocKey) {
	t.writes++
	if k.Shard >= 0 {
		t.written = append(t.written, docstore.StripeOf(k.ID, k.Shard))
	}
}

// Put updates a document it read, or creates one it found none of.
func (t *tx) Put(k docstore.DocKey, fields docstore.Record) {
	t.write(k)
	ut := t.read[k]
	if ut.IsZero() {
		rec := docstore.Record{}
		for f, v := range fields {
			if v != docstore.Deleted {
				rec[f] = v
			}
		}
		t.wb.Create(counters{t.s}.ref(k), rec)
		return
	}
	ups := make([]firestore.Update, 0, len(fields))
	for f, v := range fields {
		if v == docstore.Deleted {
			v = firestore.Delete
		}
		ups = append(ups, firestore.Update{Path: f, Value: v})
	}
	t.wb.Update(counters{t.s}.ref(k), ups, firestore.LastUpdateTime(ut))
}

// Delete deletes a document, under its update time when it read one.
func (t *tx) Delete(k docstore.DocKey) {
	t.write(k)
	if ut := t.read[k]; !ut.IsZero() {
		t.wb.Delete(counters{t.s}.ref(k), firestore.LastUpdateTime(ut))
		return
	}
	t.wb.Delete(counters{t.s}.ref(k))
}

// NewCounter is a new counter document (metaFields).
func (counters) NewCounter(id string, spec shardcounter.Spec, created time.Time) docstore.Record {
	return metaFields(id, meta{spec: spec, created: created})
}

// CounterOf reads a counter document (metaOf).
func (c counters) CounterOf(id string, rec docstore.Record) (shardcounter.Spec, time.Time, error) {
	ct, _ := rec[docstore.CreateTime].(time.Time)
	m, err := metaOf(c.ref(docstore.DocKey{ID: id, Shard: -1}).Path, rec, ct, time.Time{})
	return m.spec, m.created, err
}

// ShardValue is a shard document's count field.
func (c counters) ShardValue(rec docstore.Record) int64 {
	v, _ := rec[c.s.field].(int64)
	return v
}

// Resharded sets the counter document's num_shards, as the seed keeps it.
func (c counters) Resharded(n int, _ bool) docstore.Record {
	return docstore.Record{fieldNumShards: int64(n)}
}

// ShardFields are a shard document's count, num_shards, writer (fieldBy)
// and wide mark, absent when not wide.
func (c counters) ShardFields(_ string, n int, val int64, wide bool) docstore.Record {
	rec := docstore.Record{c.s.field: val, fieldNumShards: int64(n), fieldBy: c.s.writer, fieldWide: docstore.Deleted}
	if wide {
		rec[fieldWide] = true
	}
	return rec
}

// Members lists a distinct counter's members.
func (c counters) Members(ctx context.Context, id string, created time.Time) ([]string, error) {
	return c.s.Members(ctx, id, created)
}

// Forget drops the counter's cached state and hint.
func (c counters) Forget(id string) {
	c.s.cache.Remove(id)
	c.s.fullHint.Delete(id)
}
