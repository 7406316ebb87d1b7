package datastore

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"cloud.google.com/go/datastore"
	"google.golang.org/api/iterator"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docindex"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// Collections (seed 001's sharded timestamps) live in two kinds: a
// collection's metadata in an SC_Collection entity keyed by its escaped
// name, and each document in an SC_Document entity, child of it, keyed
// by the escaped document id, with its shard and timestamp as indexed
// properties (the shard first, as seed 001 puts it in every index that
// holds the timestamp), its data as JSON, and one indexed "ix" value per
// declared index field it has a value for. A query reads one shard: shard
// equal, the index value equal, ordered by timestamp and then key (which
// is id order: Escape keeps it). Each document also carries its
// collection's created_at ("of"), so that a writer that read a collection
// before it was deleted and made again cannot put documents into the new
// one.
const (
	collectionKind = "SC_Collection"
	documentKind   = "SC_Document"
)

// collectionsTable holds the collections' metadata entities.
var collectionsTable = docstore.Table{Name: collectionKind, Noun: "collection"}

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
// the SC_Document children of its SC_Collection entity.
type docs struct{ s *CounterStore }

func (docs) Table(c *shardcounter.Collection) docstore.Table {
	return docstore.Table{Name: documentKind, Noun: "document", Parent: &collectionsTable, ParentName: c.Name}
}

func (d docs) DeleteAll(ctx context.Context, name string) error {
	return d.s.deleteChildren(ctx, "delete collection", d.s.metaKey(name), documentKind)
}

// MaxScanShards is 1: a query reads one shard's index range.
func (cs *CollectionStore) MaxScanShards() int { return 1 }

func (s *CounterStore) metaKey(name string) *datastore.Key {
	return records{s}.key(collectionsTable, name)
}

// docProps is a document as an entity's properties.
func docProps(c *shardcounter.Collection, d *shardcounter.Document) (datastore.PropertyList, error) {
	entries, err := docindex.Entries(c, d.Data)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(d.Data)
	if err != nil {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "document %q: %v", d.ID, err)
	}
	ix := make([]any, 0, len(entries))
	for f, v := range entries {
		ix = append(ix, f+shardcounter.HashSeparator+v)
	}
	ps := datastore.PropertyList{
		{Name: "shard", Value: int64(d.Shard)},
		{Name: "ts", Value: d.Timestamp.UTC().Truncate(time.Microsecond)},
		{Name: "of", Value: c.CreatedAt.UTC().Truncate(time.Microsecond), NoIndex: true},
		{Name: "data", Value: string(data), NoIndex: true},
	}
	if len(ix) > 0 {
		ps = append(ps, datastore.Property{Name: "ix", Value: ix})
	}
	return ps, nil
}

// Document is an entity's properties as a document of c, or false when
// there is none or it belongs to an earlier collection of the name.
func (docs) Document(c *shardcounter.Collection, id string, rec docstore.Record) (*shardcounter.Document, bool) {
	if of, _ := rec["of"].(time.Time); rec == nil || !of.Equal(docstore.CreatedOf(c)) {
		return nil, false
	}
	n, _ := rec["shard"].(int64)
	ts, _ := rec["ts"].(time.Time)
	data, _ := rec["data"].(string)
	d := &shardcounter.Document{ID: id, Shard: int(n), Timestamp: ts.UTC()}
	dec := json.NewDecoder(strings.NewReader(data))
	dec.UseNumber() // keep integers past 2^53 exact
	return d, dec.Decode(&d.Data) == nil
}

// PutDocuments writes the documents in one transaction that checks the
// collection is still the one c describes.
func (cs *CollectionStore) PutDocuments(ctx context.Context, c *shardcounter.Collection, ds []*shardcounter.Document) error {
	keys := make([]*datastore.Key, len(ds))
	props := make([]datastore.PropertyList, len(ds))
	for i, doc := range ds {
		var err error
		if props[i], err = docProps(c, doc); err != nil {
			return err
		}
		keys[i] = records{cs.s}.key(docs{}.Table(c), doc.ID)
	}
	return cs.s.transact(ctx, "put documents", recordLock(collectionsTable, c.Name), func(tx *datastore.Transaction) error {
		rec, err := records{cs.s}.getIn(tx, collectionsTable, c.Name)
		if err != nil {
			return err
		}
		if err := docstore.Current(c, rec); err != nil {
			return err
		}
		_, err = tx.PutMulti(keys, props)
		return txErr(err)
	})
}

// ScanDocuments runs the queries of one shard: shard equal, the index
// value equal, ordered by timestamp and key (id order). A bound with an
// id is a position (timestamp, id), which a Datastore query cannot
// compare as one: the scan first reads the documents of the start bound's
// timestamp past its key, then those past its timestamp; the end bound is
// checked as documents come.
func (cs *CollectionStore) ScanDocuments(ctx context.Context, c *shardcounter.Collection, r shardcounter.ScanRange) ([]*shardcounter.Document, error) {
	if len(r.Shards) != 1 {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "datastore: a scan reads one shard, not %d", len(r.Shards))
	}
	desc := r.Order == shardcounter.Desc
	from, to := r.After, r.Before // the bound the scan starts from, and the one it ends at
	past, upto, ord := ">", "<=", ""
	if desc {
		from, to = to, from
		past, upto, ord = "<", ">=", "-"
	}
	base := func() *datastore.Query {
		q := datastore.NewQuery(documentKind).Namespace(cs.s.namespace).Ancestor(cs.s.metaKey(c.Name)).FilterField("shard", "=", int64(r.Shards[0]))
		if r.Index != "" {
			q = q.FilterField("ix", "=", r.Index+shardcounter.HashSeparator+r.Value)
		}
		return q
	}
	var queries []*datastore.Query
	main := base()
	if from != nil {
		if from.ID != "" {
			queries = append(queries, base().FilterField("ts", "=", from.Time.UTC()).
				FilterField("__key__", past, records{cs.s}.key(docs{}.Table(c), from.ID)).Order(ord+"__key__"))
			main = main.FilterField("ts", past, from.Time.UTC())
		} else {
			main = main.FilterField("ts", map[bool]string{false: ">=", true: "<="}[desc], from.Time.UTC())
		}
	}
	if to != nil {
		main = main.FilterField("ts", upto, to.Time.UTC())
	}
	queries = append(queries, main.Order(ord+"ts").Order(ord+"__key__"))
	var out []*shardcounter.Document
	for _, q := range queries {
		for len(out) < r.Limit {
			// A page a little past what is missing: documents of an
			// earlier collection of the name, or at the start's
			// timestamp, may be skipped.
			page := r.Limit - len(out) + 8
			it := cs.s.client.Run(ctx, q.Limit(page))
			rows, done, err := cs.scanPage(c, it, from, to, desc, r.Limit, &out)
			if err != nil || done {
				return out, err
			}
			if rows < page {
				break // the query has no more
			}
			cur, err := it.Cursor()
			if err != nil {
				return nil, readError("query documents", err)
			}
			q = q.Start(cur)
		}
	}
	return out, nil
}

// scanPage appends to out the documents of a page of a scan's query that
// lie between from and to, up to limit; done when it reached to.
func (cs *CollectionStore) scanPage(c *shardcounter.Collection, it *datastore.Iterator, from, to *shardcounter.Position, desc bool, limit int, out *[]*shardcounter.Document) (rows int, done bool, err error) {
	for len(*out) < limit {
		var ps datastore.PropertyList
		k, err := it.Next(&ps)
		if errors.Is(err, iterator.Done) {
			return rows, false, nil
		}
		if err != nil {
			return rows, false, readError("query documents", err)
		}
		rows++
		id, err := Unescape(k.Name)
		d, ok := (docs{}).Document(c, id, recordOf(ps))
		if !ok || err != nil {
			continue
		}
		p := d.Position()
		if from != nil && (p.Compare(*from) <= 0) != desc || from != nil && p.Compare(*from) == 0 {
			continue // not past the start (its timestamp alone, when it has no id)
		}
		if to != nil && (p.Compare(*to) >= 0) != desc || to != nil && p.Compare(*to) == 0 {
			return rows, true, nil
		}
		*out = append(*out, d)
	}
	return rows, true, nil
}
