package firestore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// Collections (seed 001's sharded timestamps) live as the seed's example
// keeps its instruments: each document of collection NAME is a Firestore
// document of the top-level collection NAME (escaped), its data as its
// fields, the timestamp field a Firestore timestamp, and a `shard` field;
// a query runs once per chunk of shards (`shard in [...]`, Firestore's
// limit of 30 values) ordered by the timestamp then the document id, and
// package collection merges the chunks. The metadata is in
// sc_collections/NAME; each document also has `sc_of`, its collection's
// created_at, so that a writer that read a collection before it was
// deleted and made again cannot put documents into the new one.
const (
	collectionsCollection = "sc_collections"
	fieldShard            = "shard"
	fieldDocOf            = "sc_of"
)

// collectionsTable holds the collections' metadata records.
var collectionsTable = docstore.Table{Name: collectionsCollection, Noun: "collection"}

// CollectionStore is a shardcounter.CollectionStore on the same database
// as a CounterStore: docstore.Collections on the store's records, and the
// documents. It is safe for concurrent use.
type CollectionStore struct {
	docstore.Collections
	s *CounterStore
}

var _ shardcounter.CollectionStore = (*CollectionStore)(nil)

// Collections returns the collection store on the counters' database.
func (s *CounterStore) Collections() *CollectionStore {
	return &CollectionStore{Collections: docstore.NewCollections(records{s}, collectionsTable, docs{s}), s: s}
}

// docs adapts the store to docstore.Docs: a collection's documents are
// those of the top-level collection of its escaped name.
type docs struct{ s *CounterStore }

func (docs) Table(c *shardcounter.Collection) docstore.Table {
	return docstore.Table{Name: Escape(c.Name), Noun: "document"}
}

func (d docs) DeleteAll(ctx context.Context, name string) error {
	return d.s.deleteAll(ctx, d.s.docs(name))
}

// MaxScanShards is Firestore's limit on the values of one `in` filter.
func (cs *CollectionStore) MaxScanShards() int { return 30 }

func (s *CounterStore) docs(name string) *firestore.CollectionRef {
	return s.client.Collection(Escape(name))
}

// CreateCollection writes the collection's metadata document, unless the
// name's documents would be among the store's own.
func (cs *CollectionStore) CreateCollection(ctx context.Context, c *shardcounter.Collection) error {
	if n := Escape(c.Name); n == countersCollection || strings.HasPrefix(n, "sc_") {
		return shardcounter.Errorf(shardcounter.EINVALID, "collection name %q is taken by the store's own documents on Firestore: choose another", c.Name)
	}
	return cs.Collections.CreateCollection(ctx, c)
}

// PutDocuments checks the metadata document, then writes the documents
// in one commit, each replacing any document of its id.
func (cs *CollectionStore) PutDocuments(ctx context.Context, c *shardcounter.Collection, docs []*shardcounter.Document) error {
	rec, err := records{cs.s}.GetRecord(ctx, collectionsTable, c.Name)
	if err != nil {
		return err
	}
	if err := docstore.Current(c, rec); err != nil {
		return err
	}
	wb := cs.s.client.Batch() //nolint:staticcheck // see CreateCounter
	for _, doc := range docs {
		fields, err := toFields(c, doc, docstore.CreatedOf(c))
		if err != nil {
			return err
		}
		wb.Set(cs.s.docs(c.Name).Doc(Escape(doc.ID)), fields)
	}
	if _, err := wb.Commit(ctx); err != nil {
		return writeError("put documents", err)
	}
	return nil
}

// toFields is a document as Firestore fields: its data, the timestamp
// field as a timestamp, its shard and its collection's created_at.
func toFields(c *shardcounter.Collection, d *shardcounter.Document, of time.Time) (map[string]any, error) {
	for _, f := range []string{fieldShard, fieldDocOf} {
		if _, ok := d.Data[f]; ok {
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "document %q has a field %q, which the Firestore store keeps for itself: rename it", d.ID, f)
		}
	}
	fields := setPath(d.Data, strings.Split(c.TimestampField, "."), d.Timestamp)
	fields[fieldShard] = int64(d.Shard)
	fields[fieldDocOf] = of
	return fields, nil
}

// setPath returns a copy of m with the value at path set to v, copying
// the maps on the way.
func setPath(m map[string]any, path []string, v any) map[string]any {
	out := make(map[string]any, len(m)+2)
	for k, x := range m {
		out[k] = x
	}
	if len(path) == 1 {
		out[path[0]] = v
		return out
	}
	sub, _ := out[path[0]].(map[string]any)
	out[path[0]] = setPath(sub, path[1:], v)
	return out
}

// Document is a Firestore document's fields as a document of c, or false
// when there is none or it belongs to an earlier collection of the name.
func (docs) Document(c *shardcounter.Collection, id string, data docstore.Record) (*shardcounter.Document, bool) {
	if data == nil || !sameTime(data[fieldDocOf], docstore.CreatedOf(c)) {
		return nil, false
	}
	n, _ := data[fieldShard].(int64)
	delete(data, fieldShard)
	delete(data, fieldDocOf)
	d := &shardcounter.Document{ID: id, Shard: int(n), Data: data}
	path := strings.Split(c.TimestampField, ".")
	if t, ok := lookupTime(data, path); ok {
		d.Timestamp = t.UTC()
		d.Data = setPath(data, path, d.Timestamp.Format(time.RFC3339Nano))
	}
	return d, true
}

func lookupTime(m map[string]any, path []string) (time.Time, bool) {
	v, ok := m[path[0]]
	if !ok {
		return time.Time{}, false
	}
	if len(path) == 1 {
		t, ok := v.(time.Time)
		return t, ok
	}
	sub, ok := v.(map[string]any)
	if !ok {
		return time.Time{}, false
	}
	return lookupTime(sub, path[1:])
}

// ScanDocuments runs the seed's query: shard in r.Shards, the index
// field equal to the value, ordered by the timestamp and then the
// document id (which is id order: Escape keeps it), between the bounds.
func (cs *CollectionStore) ScanDocuments(ctx context.Context, c *shardcounter.Collection, r shardcounter.ScanRange) ([]*shardcounter.Document, error) {
	shards := make([]any, len(r.Shards))
	for i, s := range r.Shards {
		shards[i] = int64(s)
	}
	q := cs.s.docs(c.Name).Query
	if len(shards) == 1 {
		q = q.Where(fieldShard, "==", shards[0])
	} else {
		q = q.Where(fieldShard, "in", shards)
	}
	if r.Index != "" {
		v, err := indexValue(r.Value)
		if err != nil {
			return nil, err
		}
		q = q.WherePath(firestore.FieldPath(strings.Split(r.Index, ".")), "==", v)
	}
	dir := firestore.Asc
	if r.Order == shardcounter.Desc {
		dir = firestore.Desc
	}
	q = q.OrderByPath(firestore.FieldPath(strings.Split(c.TimestampField, ".")), dir).OrderBy(firestore.DocumentID, dir)
	// A bound without an id is one on the timestamp alone: a filter. One
	// with an id is a cursor on (timestamp, document id).
	ts := firestore.FieldPath(strings.Split(c.TimestampField, "."))
	lo, hi := r.After, r.Before // the bounds in position order
	if lo != nil && lo.ID == "" {
		q, lo = q.WherePath(ts, ">=", lo.Time), nil
	}
	if hi != nil && hi.ID == "" {
		q, hi = q.WherePath(ts, "<", hi.Time), nil
	}
	if dir == firestore.Desc {
		lo, hi = hi, lo // the cursor that starts the scan, and the one that ends it
	}
	if lo != nil {
		q = q.StartAfter(lo.Time, Escape(lo.ID))
	}
	if hi != nil {
		q = q.EndBefore(hi.Time, Escape(hi.ID))
	}
	it := q.Documents(ctx)
	defer it.Stop()
	var out []*shardcounter.Document
	for len(out) < r.Limit {
		snap, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, readError("query documents", err)
		}
		id, err := Unescape(snap.Ref.ID)
		if d, ok := (docs{}).Document(c, id, snap.Data()); ok && err == nil {
			out = append(out, d)
		}
	}
	return out, nil
}

// indexValue turns shardcounter.IndexValue's form back into the value a
// Firestore equality filter compares: numbers as float64, which Firestore
// compares by value with integers.
func indexValue(v string) (any, error) {
	switch {
	case strings.HasPrefix(v, "s"):
		return v[1:], nil
	case v == "t":
		return true, nil
	case v == "f":
		return false, nil
	case strings.HasPrefix(v, "n"):
		f, err := strconv.ParseFloat(v[1:], 64)
		if err == nil {
			return f, nil
		}
	}
	return nil, shardcounter.Errorf(shardcounter.EINVALID, "index value %q cannot be queried", v)
}
