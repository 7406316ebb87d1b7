package transfer

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/dsn"
)

// collectionLister is a CollectionStore that lists its collections:
// every store's does.
type collectionLister interface {
	ListCollections(ctx context.Context) ([]*shardcounter.Collection, error)
}

// collectionsOf returns the collection store beside store, or nil for a
// store without collections.
func collectionsOf(store shardcounter.CounterStore) shardcounter.CollectionStore {
	cs, err := dsn.Collections(store)
	if err != nil {
		return nil
	}
	return cs
}

// exportCollections writes every collection whose name starts with
// opts.Prefix and its documents: shard by shard, each shard's in
// (timestamp, id) order, a page of 1000 at a time.
func exportCollections(ctx context.Context, store shardcounter.CounterStore, enc *Encoder, opts ExportOptions, st *Stats) error {
	cs := collectionsOf(store)
	l, ok := cs.(collectionLister)
	if !ok {
		return nil
	}
	colls, err := l.ListCollections(ctx)
	if err != nil {
		return err
	}
	slices.SortFunc(colls, func(a, b *shardcounter.Collection) int { return strings.Compare(a.Name, b.Name) })
	for _, c := range colls {
		if !strings.HasPrefix(c.Name, opts.Prefix) {
			continue
		}
		idx := c.Indexes
		if idx == nil {
			idx = []string{}
		}
		if err := enc.Collection(&Collection{Name: c.Name, Shards: c.Shards, TimestampField: c.TimestampField, Indexes: idx, ShardKey: c.ShardKey}); err != nil {
			return err
		}
		st.Collections++
		for k := range c.Shards {
			if err := exportShard(ctx, cs, enc, c, k, st); err != nil {
				return fmt.Errorf("collection %q: %w", c.Name, err)
			}
		}
	}
	return nil
}

func exportShard(ctx context.Context, cs shardcounter.CollectionStore, enc *Encoder, c *shardcounter.Collection, k int, st *Stats) error {
	var after *shardcounter.Position
	for {
		docs, err := cs.ScanDocuments(ctx, c, shardcounter.ScanRange{Shards: []int{k}, After: after, Order: shardcounter.Asc, Limit: pageSize})
		if err != nil {
			return err
		}
		for _, d := range docs {
			if err := enc.Document(&Document{Collection: c.Name, ID: d.ID, Shard: d.Shard, Timestamp: d.Timestamp.UTC(), Data: d.Data}); err != nil {
				return err
			}
			st.Documents++
		}
		if len(docs) < pageSize {
			return nil
		}
		p := docs[len(docs)-1].Position()
		after = &p
	}
}

// collImport is the collection an import is writing.
type collImport struct {
	c    *shardcounter.Collection // as the store has it
	skip bool
	docs []*shardcounter.Document
}

// collection starts a collection of the export: it creates it, or
// checks that the store's has the same options.
func (im *importer) collection(ctx context.Context, rec *Collection) error {
	if err := im.flushDocs(ctx); err != nil {
		return err
	}
	im.st.Collections++
	cs := collectionsOf(im.store)
	if cs == nil {
		return fmt.Errorf("collection %q: this store has no collections", rec.Name)
	}
	want := rec.Options()
	have, err := cs.GetCollection(ctx, rec.Name)
	switch {
	case shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND:
	case err != nil:
		return err
	case have.Shards == want.Shards && have.TimestampField == want.TimestampField && slices.Equal(have.Indexes, want.Indexes) && have.ShardKey == want.ShardKey:
		im.coll = &collImport{c: have}
		return nil
	case !im.opts.Replace:
		im.st.Conflicts++
		if im.opts.CollectionConflict != nil {
			im.opts.CollectionConflict(rec.Name)
		}
		im.coll = &collImport{skip: true}
		return nil
	default:
		if err := cs.DeleteCollection(ctx, rec.Name); err != nil && shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
			return err
		}
		im.st.Replaced++
	}
	if err := shardcounter.ValidateCollection(want); err != nil {
		return err
	}
	want.CreatedAt = shardcounter.TruncateTimestamp(im.now())
	if err := cs.CreateCollection(ctx, want); err != nil {
		return fmt.Errorf("create collection %q: %w", rec.Name, err)
	}
	c, err := cs.GetCollection(ctx, rec.Name)
	if err != nil {
		return err
	}
	im.coll = &collImport{c: c}
	return nil
}

// document adds a document to the current collection's batch.
func (im *importer) document(ctx context.Context, d *Document) error {
	im.st.Documents++
	if im.coll.skip {
		return nil
	}
	im.coll.docs = append(im.coll.docs, &shardcounter.Document{ID: d.ID, Shard: d.Shard, Timestamp: d.Timestamp, Data: d.Data})
	if len(im.coll.docs) >= shardcounter.MaxDocumentBatch {
		return im.flushDocs(ctx)
	}
	return nil
}

// flushDocs writes the current collection's pending documents; a
// document of the same id is replaced, so writing it again changes
// nothing.
func (im *importer) flushDocs(ctx context.Context) error {
	if im.coll == nil || len(im.coll.docs) == 0 {
		return nil
	}
	if err := collectionsOf(im.store).PutDocuments(ctx, im.coll.c, im.coll.docs); err != nil {
		return fmt.Errorf("collection %q: %w", im.coll.c.Name, err)
	}
	im.coll.docs = im.coll.docs[:0]
	return nil
}
