package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docindex"
	"github.com/shardcounter/shardcounter/internal/specrec"
)

// Collection buckets, beside the counter buckets in the same file:
//
//	collections  name                      → collection record (JSON)
//	documents    name 0x00 id              → document record (JSON)
//	docindex     name 0x00 index value shard ts id → empty
//
// In docindex, index and value are each a uvarint length and the bytes,
// shard is a uint16 and ts the document's Unix microseconds with the sign
// bit flipped, big-endian, so keys sort by (index, value, shard, timestamp,
// id): one shard's entries for one index value are a contiguous range in
// time order, and a scan is a cursor seek and a walk. Index "" (value "")
// holds every document, for queries without a filter. Names hold no 0x00
// (shardcounter.ValidateID), so "name 0x00" belongs to one collection.
var (
	bucketCollections = []byte("collections")
	bucketDocuments   = []byte("documents")
	bucketDocIndex    = []byte("docindex")
)

// CollectionStore is a shardcounter.CollectionStore in the bbolt file of a
// CounterStore. It is safe for concurrent use. Writes are serial in bbolt,
// so sharding buys no write throughput here; the store keeps the sharded
// layout so that every store answers the same queries the same way.
type CollectionStore struct {
	db       *bbolt.DB
	counters *CounterStore // for its transaction wrappers
}

var _ shardcounter.CollectionStore = (*CollectionStore)(nil)

// Collections returns the collection store that shares s's file, creating
// its buckets when they are missing.
func (s *CounterStore) Collections() (*CollectionStore, error) {
	err := s.db.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketCollections, bucketDocuments, bucketDocIndex} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: create collection buckets: %w", err)
	}
	return &CollectionStore{db: s.db, counters: s}, nil
}

// MaxScanShards is 1: each shard's entries are their own key range.
func (s *CollectionStore) MaxScanShards() int { return 1 }

// collRecord and docRecord are the records of a collection and a
// document, as both embedded stores keep them.
type (
	collRecord = specrec.Collection
	docRecord  = specrec.Document
)

// getColl reads a collection's record. When c is not nil the record must
// be c's incarnation: one deleted and made again is another collection.
func getColl(tx *bbolt.Tx, name string, c *shardcounter.Collection) (collRecord, error) {
	var r collRecord
	v := tx.Bucket(bucketCollections).Get([]byte(name))
	if v == nil {
		return r, shardcounter.CollectionNotFound(name)
	}
	if err := json.Unmarshal(v, &r); err != nil {
		return r, fmt.Errorf("bolt: corrupt record of collection %q: %w", name, err)
	}
	if c != nil && r.CreatedAt != c.CreatedAt.UnixNano() {
		return r, shardcounter.CollectionNotFound(name)
	}
	return r, nil
}

func collPrefix(name string) []byte { return append([]byte(name), 0) }

func docKey(name, id string) []byte { return append(collPrefix(name), id...) }

// rangePrefix is the docindex prefix of one shard's entries for one index
// value.
func rangePrefix(name, index, value string, shard int) []byte {
	k := collPrefix(name)
	k = binary.AppendUvarint(k, uint64(len(index)))
	k = append(k, index...)
	k = binary.AppendUvarint(k, uint64(len(value)))
	k = append(k, value...)
	return binary.BigEndian.AppendUint16(k, uint16(shard))
}

// appendPos appends a position: sortable microseconds, then the id.
func appendPos(k []byte, p shardcounter.Position) []byte {
	k = binary.BigEndian.AppendUint64(k, uint64(p.Time.UnixMicro())^(1<<63))
	return append(k, p.ID...)
}

// entryKeys returns the docindex keys of a document: one for the index
// of every document, one per indexed field it has an indexable value for.
func entryKeys(name string, r collRecord, shard int, pos shardcounter.Position, data map[string]any) ([][]byte, error) {
	c := &shardcounter.Collection{Indexes: r.Indexes}
	vals, err := docindex.Entries(c, data)
	if err != nil {
		return nil, err
	}
	keys := [][]byte{appendPos(rangePrefix(name, "", "", shard), pos)}
	for _, f := range r.Indexes {
		if v, ok := vals[f]; ok {
			keys = append(keys, appendPos(rangePrefix(name, f, v, shard), pos))
		}
	}
	return keys, nil
}

func decodeData(raw []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber() // keep integers past 2^53 exact
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("bolt: corrupt document data: %w", err)
	}
	return m, nil
}

func decodeDoc(id string, v []byte) (*shardcounter.Document, error) {
	var r docRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, fmt.Errorf("bolt: corrupt document %q: %w", id, err)
	}
	data, err := decodeData(r.Data)
	if err != nil {
		return nil, err
	}
	return &shardcounter.Document{ID: id, Shard: r.Shard, Timestamp: time.UnixMicro(r.TS).UTC(), Data: data}, nil
}

// removeDoc deletes a document's record and index entries, and reports
// whether it was there.
func removeDoc(tx *bbolt.Tx, name string, r collRecord, id string) (bool, error) {
	docs := tx.Bucket(bucketDocuments)
	v := docs.Get(docKey(name, id))
	if v == nil {
		return false, nil
	}
	old, err := decodeDoc(id, v)
	if err != nil {
		return false, err
	}
	keys, err := entryKeys(name, r, old.Shard, old.Position(), old.Data)
	if err != nil {
		return false, err
	}
	idx := tx.Bucket(bucketDocIndex)
	for _, k := range keys {
		if err := idx.Delete(k); err != nil {
			return false, err
		}
	}
	return true, docs.Delete(docKey(name, id))
}

// CreateCollection records c.
func (s *CollectionStore) CreateCollection(ctx context.Context, c *shardcounter.Collection) error {
	r := collRecord{Shards: c.Shards, TimestampField: c.TimestampField, Indexes: c.Indexes, ShardKey: string(c.ShardKey), CreatedAt: c.CreatedAt.UnixNano()}
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.counters.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketCollections)
		if b.Get([]byte(c.Name)) != nil {
			return shardcounter.Errorf(shardcounter.EEXISTS, "collection %q already exists", c.Name)
		}
		return b.Put([]byte(c.Name), v)
	})
}

// GetCollection returns a collection's metadata.
func (s *CollectionStore) GetCollection(ctx context.Context, name string) (*shardcounter.Collection, error) {
	var c *shardcounter.Collection
	err := s.counters.view(ctx, func(tx *bbolt.Tx) error {
		r, err := getColl(tx, name, nil)
		c = r.Collection(name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// GrowCollection raises the shard count in one transaction.
func (s *CollectionStore) GrowCollection(ctx context.Context, name string, shards int) (*shardcounter.Collection, error) {
	if err := shardcounter.ValidateShards(shards); err != nil {
		return nil, err
	}
	var c *shardcounter.Collection
	err := s.counters.update(ctx, func(tx *bbolt.Tx) error {
		r, err := getColl(tx, name, nil)
		if err != nil {
			return err
		}
		if shards < r.Shards {
			return shardcounter.Errorf(shardcounter.EINVALID, "collection %q has %d shards: a shard count only grows", name, r.Shards)
		}
		r.Shards = shards
		v, err := json.Marshal(r)
		if err != nil {
			return err
		}
		c = r.Collection(name)
		return tx.Bucket(bucketCollections).Put([]byte(name), v)
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// DeleteCollection removes the collection, its documents and its index
// entries in one transaction.
func (s *CollectionStore) DeleteCollection(ctx context.Context, name string) error {
	return s.counters.update(ctx, func(tx *bbolt.Tx) error {
		if _, err := getColl(tx, name, nil); err != nil {
			return err
		}
		if err := tx.Bucket(bucketCollections).Delete([]byte(name)); err != nil {
			return err
		}
		if err := deletePrefix(tx.Bucket(bucketDocuments), collPrefix(name)); err != nil {
			return err
		}
		return deletePrefix(tx.Bucket(bucketDocIndex), collPrefix(name))
	})
}

// PutDocuments writes the batch in one synced transaction, replacing
// documents with the same ids and their index entries.
func (s *CollectionStore) PutDocuments(ctx context.Context, c *shardcounter.Collection, docs []*shardcounter.Document) error {
	return s.counters.update(ctx, func(tx *bbolt.Tx) error {
		r, err := getColl(tx, c.Name, c)
		if err != nil {
			return err
		}
		idx, b := tx.Bucket(bucketDocIndex), tx.Bucket(bucketDocuments)
		for _, d := range docs {
			if d.Shard < 0 || d.Shard >= r.Shards {
				return shardcounter.Errorf(shardcounter.EINVALID, "document %q: shard %d is not below the shard count %d", d.ID, d.Shard, r.Shards)
			}
			if _, err := removeDoc(tx, c.Name, r, d.ID); err != nil {
				return err
			}
			data, err := json.Marshal(d.Data)
			if err != nil {
				return shardcounter.Errorf(shardcounter.EINVALID, "document %q: data cannot be encoded as JSON: %v", d.ID, err)
			}
			v, err := json.Marshal(docRecord{Shard: d.Shard, TS: d.Timestamp.UnixMicro(), Data: data})
			if err != nil {
				return err
			}
			if err := b.Put(docKey(c.Name, d.ID), v); err != nil {
				return err
			}
			keys, err := entryKeys(c.Name, r, d.Shard, d.Position(), d.Data)
			if err != nil {
				return err
			}
			for _, k := range keys {
				if err := idx.Put(k, nil); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// GetDocument returns one document.
func (s *CollectionStore) GetDocument(ctx context.Context, c *shardcounter.Collection, id string) (*shardcounter.Document, error) {
	var d *shardcounter.Document
	err := s.counters.view(ctx, func(tx *bbolt.Tx) error {
		if _, err := getColl(tx, c.Name, c); err != nil {
			return err
		}
		v := tx.Bucket(bucketDocuments).Get(docKey(c.Name, id))
		if v == nil {
			return shardcounter.DocumentNotFound(c.Name, id)
		}
		var err error
		d, err = decodeDoc(id, v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// DeleteDocument removes one document and its index entries.
func (s *CollectionStore) DeleteDocument(ctx context.Context, c *shardcounter.Collection, id string) error {
	return s.counters.update(ctx, func(tx *bbolt.Tx) error {
		r, err := getColl(tx, c.Name, c)
		if err != nil {
			return err
		}
		found, err := removeDoc(tx, c.Name, r, id)
		if err == nil && !found {
			err = shardcounter.DocumentNotFound(c.Name, id)
		}
		return err
	})
}

// ScanDocuments walks each shard's key range from its bound, in one read
// transaction. For several shards it reads up to r.Limit from each and
// merges them; the service asks for one shard at a time (MaxScanShards).
func (s *CollectionStore) ScanDocuments(ctx context.Context, c *shardcounter.Collection, r shardcounter.ScanRange) ([]*shardcounter.Document, error) {
	var out []*shardcounter.Document
	err := s.counters.view(ctx, func(tx *bbolt.Tx) error {
		if _, err := getColl(tx, c.Name, c); err != nil {
			return err
		}
		docs := tx.Bucket(bucketDocuments)
		for _, shard := range r.Shards {
			ids := scanShard(tx.Bucket(bucketDocIndex).Cursor(), rangePrefix(c.Name, r.Index, r.Value, shard), r)
			for _, id := range ids {
				v := docs.Get(docKey(c.Name, id))
				if v == nil {
					return fmt.Errorf("bolt: index entry of collection %q points at missing document %q", c.Name, id)
				}
				d, err := decodeDoc(id, v)
				if err != nil {
					return err
				}
				out = append(out, d)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(r.Shards) > 1 {
		out = docindex.Sort(out, r.Order, r.Limit)
	}
	return out, nil
}

// scanShard returns the ids of up to r.Limit entries under prefix p that
// lie strictly between r.After and r.Before, in r.Order.
func scanShard(c *bbolt.Cursor, p []byte, r shardcounter.ScanRange) []string {
	var lo, hi []byte // exclusive bounds, nil when open
	if r.After != nil {
		lo = appendPos(slices.Clone(p), *r.After)
	}
	if r.Before != nil {
		hi = appendPos(slices.Clone(p), *r.Before)
	}
	var ids []string
	take := func(k []byte) bool {
		if k == nil || !bytes.HasPrefix(k, p) || len(k) < len(p)+8 ||
			(lo != nil && bytes.Compare(k, lo) <= 0) || (hi != nil && bytes.Compare(k, hi) >= 0) {
			return false
		}
		ids = append(ids, string(k[len(p)+8:]))
		return len(ids) < r.Limit
	}
	if r.Order == shardcounter.Asc {
		k, _ := c.Seek(p)
		if lo != nil {
			if k, _ = c.Seek(lo); bytes.Equal(k, lo) {
				k, _ = c.Next()
			}
		}
		for ; take(k); k, _ = c.Next() {
		}
		return ids
	}
	end := hi
	if end == nil {
		end = prefixEnd(p)
	}
	k, _ := c.Seek(end)
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	for ; take(k); k, _ = c.Prev() {
	}
	return ids
}

// prefixEnd returns the least key greater than every key with prefix p.
// p ends in a shard number below 1024, so its last byte is never 0xff
// with all before it 0xff.
func prefixEnd(p []byte) []byte {
	end := slices.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
