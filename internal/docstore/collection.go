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

// Collections are the metadata side of a shardcounter.CollectionStore
// (seed 001's sharded timestamps) over a store's Records; the store adds
// its documents, whose layout and queries are its own. Each document
// carries its collection's created_at (CreatedOf), so that a writer that
// read a collection before it was deleted and made again cannot put
// documents into the new one (Current), and a reader skips those of an
// earlier collection of the name. A Collections is safe for concurrent
// use.
type Collections struct {
	records    Records
	table      Table
	deleteDocs func(ctx context.Context, name string) error
}

// NewCollections returns the collections whose metadata records are in
// t; deleteDocs deletes a collection's documents once its record is gone.
func NewCollections(r Records, t Table, deleteDocs func(ctx context.Context, name string) error) Collections {
	return Collections{records: r, table: t, deleteDocs: deleteDocs}
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
	return cs.deleteDocs(ctx, name)
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
