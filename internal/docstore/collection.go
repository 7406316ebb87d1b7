package docstore

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
)

// Collections are a shardcounter.CollectionStore (seed 001's sharded
// timestamps) over a store's Records, but for the writes and queries of
// documents, whose layout and queries are the store's own (Docs). Each
// document carries its collection's created_at (CreatedOf), so that a
// writer that read a collection before it was deleted and made again
// cannot put documents into the new one (Current), and a reader skips
// those of an earlier collection of the name. A Collections is safe for
// concurrent use.
type Collections struct {
	records Records
	table   Table
	docs    Docs
}

// Docs is what a store adapts for the documents of its collections: each
// is a record of the collection's table, read by Records.
type Docs interface {
	// Table is the table of c's documents.
	Table(c *shardcounter.Collection) Table
	// Document is the record of c's document id as one, or false when
	// there is none (rec nil) or it belongs to an earlier collection of
	// the name.
	Document(c *shardcounter.Collection, id string, rec Record) (*shardcounter.Document, bool)
	// DeleteAll deletes the documents of the collection name, whose
	// metadata record is gone.
	DeleteAll(ctx context.Context, name string) error
}

// NewCollections returns the collections whose metadata records are in t.
func NewCollections(r Records, t Table, docs Docs) Collections {
	return Collections{records: r, table: t, docs: docs}
}

// GetDocument reads one document.
func (cs Collections) GetDocument(ctx context.Context, c *shardcounter.Collection, id string) (*shardcounter.Document, error) {
	rec, err := cs.records.GetRecord(ctx, cs.docs.Table(c), id)
	if err != nil {
		return nil, err
	}
	d, ok := cs.docs.Document(c, id, rec)
	if !ok {
		return nil, shardcounter.DocumentNotFound(c.Name, id)
	}
	return d, nil
}

// DeleteDocument deletes one document, the version it read.
func (cs Collections) DeleteDocument(ctx context.Context, c *shardcounter.Collection, id string) error {
	return cs.records.PutRecord(ctx, "delete document", cs.docs.Table(c), id, func(rec Record) (Record, bool, error) {
		if _, ok := cs.docs.Document(c, id, rec); !ok {
			return nil, false, shardcounter.DocumentNotFound(c.Name, id)
		}
		return nil, true, nil
	})
}

// CreatedOf is the created_at of c as its record and documents hold it:
// to the microsecond, in UTC.
func CreatedOf(c *shardcounter.Collection) time.Time {
	return c.CreatedAt.UTC().Truncate(time.Microsecond)
}

// Current is nil when rec, a collection's metadata record (nil when there
// is none), is still the collection c.
func Current(c *shardcounter.Collection, rec Record) error {
	if t, _ := rec["created_at"].(time.Time); rec == nil || !t.Equal(CreatedOf(c)) {
		return shardcounter.CollectionNotFound(c.Name)
	}
	return nil
}

// CreateCollection writes the collection's metadata record, unless one of
// the name exists.
func (cs Collections) CreateCollection(ctx context.Context, c *shardcounter.Collection) error {
	c.CreatedAt = CreatedOf(c)
	return cs.records.PutRecord(ctx, "create collection", cs.table, c.Name, func(old Record) (Record, bool, error) {
		if old != nil {
			return nil, false, shardcounter.Errorf(shardcounter.EEXISTS, "collection %q already exists", c.Name)
		}
		return Record{
			"name": c.Name, "shards": int64(c.Shards), "timestamp_field": c.TimestampField,
			"indexes": c.Indexes, "shard_key": string(c.ShardKey), "created_at": c.CreatedAt,
		}, true, nil
	})
}

// collectionOf reads a metadata record.
func collectionOf(rec Record) *shardcounter.Collection {
	c := &shardcounter.Collection{Indexes: []string{}}
	c.Name, _ = rec["name"].(string)
	n, _ := rec["shards"].(int64)
	c.Shards = int(n)
	c.TimestampField, _ = rec["timestamp_field"].(string)
	k, _ := rec["shard_key"].(string)
	c.ShardKey = shardcounter.ShardKey(k)
	t, _ := rec["created_at"].(time.Time)
	c.CreatedAt = t.UTC()
	switch ix := rec["indexes"].(type) {
	case []any:
		for _, f := range ix {
			if s, ok := f.(string); ok {
				c.Indexes = append(c.Indexes, s)
			}
		}
	case string:
		if json.Unmarshal([]byte(ix), &c.Indexes) != nil || c.Indexes == nil {
			c.Indexes = []string{}
		}
	}
	return c
}

// GetCollection reads the metadata record.
func (cs Collections) GetCollection(ctx context.Context, name string) (*shardcounter.Collection, error) {
	rec, err := cs.records.GetRecord(ctx, cs.table, name)
	if err != nil || rec == nil {
		return nil, cmp.Or(err, shardcounter.CollectionNotFound(name))
	}
	c := collectionOf(rec)
	c.Name = name
	return c, nil
}

// GrowCollection raises the shard count in the metadata record.
func (cs Collections) GrowCollection(ctx context.Context, name string, shards int) (*shardcounter.Collection, error) {
	var c *shardcounter.Collection
	err := cs.records.PutRecord(ctx, "grow collection", cs.table, name, func(rec Record) (Record, bool, error) {
		if rec == nil {
			return nil, false, shardcounter.CollectionNotFound(name)
		}
		c = collectionOf(rec)
		c.Name = name
		if shards < c.Shards {
			return nil, false, shardcounter.Errorf(shardcounter.EINVALID, "collection %q has %d shards: a count never shrinks, documents stay on the shard they were written to", name, c.Shards)
		}
		rec["shards"] = int64(shards)
		return rec, shards > c.Shards, nil
	})
	if err != nil {
		return nil, err
	}
	c.Shards = shards
	return c, nil
}

// DeleteCollection deletes the metadata record, then the documents:
// those a failure leaves are never read again, their created_at is no
// collection's.
func (cs Collections) DeleteCollection(ctx context.Context, name string) error {
	err := cs.records.PutRecord(ctx, "delete collection", cs.table, name, func(rec Record) (Record, bool, error) {
		if rec == nil {
			return nil, false, shardcounter.CollectionNotFound(name)
		}
		return nil, true, nil
	})
	if err != nil {
		return err
	}
	return cs.docs.DeleteAll(ctx, name)
}

// ListCollections returns every collection, by name (for export): one
// query of the metadata records, which a store holds few of.
func (cs Collections) ListCollections(ctx context.Context) ([]*shardcounter.Collection, error) {
	recs, err := cs.records.ListRecords(ctx, cs.table)
	if err != nil {
		return nil, err
	}
	out := make([]*shardcounter.Collection, 0, len(recs))
	for _, rec := range recs {
		out = append(out, collectionOf(rec))
	}
	slices.SortFunc(out, func(a, b *shardcounter.Collection) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
