package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docindex"
	"github.com/shardcounter/shardcounter/internal/specrec"
)

// Collections share the counters' directory (keys.go):
//
//	'C' name                     → collection record (JSON)
//	'D' name 0x00 id             → document record (JSON)
//	'X' name 0x00 index value shard ts id → empty
//
// In the index, index and value are each a uvarint length and the bytes,
// shard is a uint16 and ts the document's Unix microseconds with the sign
// bit flipped, big-endian, so keys sort by (index, value, shard, timestamp,
// id): one shard's entries for one index value are a contiguous range in
// time order (seed 001: the shard first, then the timestamp), and a scan
// is a seek and a walk. Index "" (value "") holds every document.

// CollectionStore is a shardcounter.CollectionStore in the directory of a
// CounterStore. It is safe for concurrent use. Its writes are built under
// the store's write lock and synced as the counters' are; its reads are
// snapshots returned once durable.
type CollectionStore struct {
	s *CounterStore
}

var _ shardcounter.CollectionStore = (*CollectionStore)(nil)

// Collections returns the collection store that shares s's directory.
func (s *CounterStore) Collections() *CollectionStore { return &CollectionStore{s: s} }

// MaxScanShards is 1: each shard's entries are their own key range.
func (cs *CollectionStore) MaxScanShards() int { return 1 }

// collRecord and docRecord are the records of a collection and a
// document, as both embedded stores keep them.
type (
	collRecord = specrec.Collection
	docRecord  = specrec.Document
)

func collKey(name string) []byte { return append([]byte{prefixCollection}, name...) }

func docPrefix(name string) []byte {
	return append(append([]byte{prefixDocument}, name...), 0)
}

func docKey(name, id string) []byte { return append(docPrefix(name), id...) }

func indexPrefix(name string) []byte {
	return append(append([]byte{prefixDocIndex}, name...), 0)
}

// rangePrefix is the index prefix of one shard's entries for one index
// value.
func rangePrefix(name, index, value string, shard int) []byte {
	k := indexPrefix(name)
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

// getColl reads a collection's record. When c is not nil the record must
// be c's incarnation: one deleted and made again is another collection.
func getColl(r pdb.Reader, name string, c *shardcounter.Collection) (collRecord, error) {
	var rec collRecord
	v, closer, err := r.Get(collKey(name))
	if errors.Is(err, pdb.ErrNotFound) {
		return rec, shardcounter.CollectionNotFound(name)
	}
	if err != nil {
		return rec, err
	}
	defer closer.Close()
	if err := json.Unmarshal(v, &rec); err != nil {
		return rec, fmt.Errorf("pebble: corrupt record of collection %q: %w", name, err)
	}
	if c != nil && rec.CreatedAt != c.CreatedAt.UnixNano() {
		return rec, shardcounter.CollectionNotFound(name)
	}
	return rec, nil
}

// entryKeys returns the index keys of a document: one for the index of
// every document, one per indexed field it has an indexable value for.
func entryKeys(name string, r collRecord, shard int, pos shardcounter.Position, data map[string]any) ([][]byte, error) {
	vals, err := docindex.Entries(&shardcounter.Collection{Indexes: r.Indexes}, data)
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

func decodeDoc(id string, v []byte) (*shardcounter.Document, error) {
	var r docRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, fmt.Errorf("pebble: corrupt document %q: %w", id, err)
	}
	d := json.NewDecoder(bytes.NewReader(r.Data))
	d.UseNumber() // keep integers past 2^53 exact
	var data map[string]any
	if err := d.Decode(&data); err != nil {
		return nil, fmt.Errorf("pebble: corrupt data of document %q: %w", id, err)
	}
	return &shardcounter.Document{ID: id, Shard: r.Shard, Timestamp: time.UnixMicro(r.TS).UTC(), Data: data}, nil
}

// getDoc reads a document, nil when it is absent.
func getDoc(r pdb.Reader, name, id string) (*shardcounter.Document, error) {
	v, closer, err := r.Get(docKey(name, id))
	if errors.Is(err, pdb.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return decodeDoc(id, v)
}

// write builds a batch with fn under the store's write lock and commits
// it. An error from fn discards the batch: nothing applied.
func (cs *CollectionStore) write(ctx context.Context, fn func(b *pdb.Batch) error) error {
	s := cs.s
	if err := s.locked(ctx); err != nil {
		return err
	}
	b := s.db.NewBatch()
	if err := fn(b); err != nil {
		b.Close()
		var e *shardcounter.Error
		if errors.As(err, &e) {
			return s.refuse(err)
		}
		s.mu.Unlock()
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "pebble: write failed, nothing applied: %v", err)
	}
	return s.commit(b, nil)
}

// CreateCollection records c.
func (cs *CollectionStore) CreateCollection(ctx context.Context, c *shardcounter.Collection) error {
	v, err := json.Marshal(collRecord{Shards: c.Shards, TimestampField: c.TimestampField, Indexes: c.Indexes, ShardKey: string(c.ShardKey), CreatedAt: c.CreatedAt.UnixNano()})
	if err != nil {
		return err
	}
	return cs.write(ctx, func(b *pdb.Batch) error {
		if _, err := getColl(cs.s.db, c.Name, nil); err == nil {
			return shardcounter.Errorf(shardcounter.EEXISTS, "collection %q already exists", c.Name)
		} else if shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
			return err
		}
		return b.Set(collKey(c.Name), v, nil)
	})
}

// GetCollection returns a collection's metadata.
func (cs *CollectionStore) GetCollection(ctx context.Context, name string) (*shardcounter.Collection, error) {
	var c *shardcounter.Collection
	err := cs.s.durableRead(ctx, func(r pdb.Reader) error {
		rec, err := getColl(r, name, nil)
		c = rec.Collection(name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// GrowCollection raises the shard count.
func (cs *CollectionStore) GrowCollection(ctx context.Context, name string, shards int) (*shardcounter.Collection, error) {
	if err := shardcounter.ValidateShards(shards); err != nil {
		return nil, err
	}
	var c *shardcounter.Collection
	err := cs.write(ctx, func(b *pdb.Batch) error {
		rec, err := getColl(cs.s.db, name, nil)
		if err != nil {
			return err
		}
		if shards < rec.Shards {
			return shardcounter.Errorf(shardcounter.EINVALID, "collection %q has %d shards: a shard count only grows", name, rec.Shards)
		}
		rec.Shards = shards
		v, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		c = rec.Collection(name)
		return b.Set(collKey(name), v, nil)
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// DeleteCollection removes the collection, its documents and its index
// entries in one batch: three deletions, two of them of ranges.
func (cs *CollectionStore) DeleteCollection(ctx context.Context, name string) error {
	return cs.write(ctx, func(b *pdb.Batch) error {
		if _, err := getColl(cs.s.db, name, nil); err != nil {
			return err
		}
		if err := b.Delete(collKey(name), nil); err != nil {
			return err
		}
		for _, p := range [][]byte{docPrefix(name), indexPrefix(name)} {
			if err := b.DeleteRange(p, prefixEnd(p), nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// PutDocuments writes the documents in one batch, replacing documents
// with the same ids and their index entries.
func (cs *CollectionStore) PutDocuments(ctx context.Context, c *shardcounter.Collection, docs []*shardcounter.Document) error {
	return cs.write(ctx, func(b *pdb.Batch) error {
		rec, err := getColl(cs.s.db, c.Name, c)
		if err != nil {
			return err
		}
		written := make(map[string]*shardcounter.Document) // by this batch, which a read does not see
		for _, d := range docs {
			if d.Shard < 0 || d.Shard >= rec.Shards {
				return shardcounter.Errorf(shardcounter.EINVALID, "document %q: shard %d is not below the shard count %d", d.ID, d.Shard, rec.Shards)
			}
			old, seen := written[d.ID]
			if !seen {
				if old, err = getDoc(cs.s.db, c.Name, d.ID); err != nil {
					return err
				}
			}
			if old != nil {
				keys, err := entryKeys(c.Name, rec, old.Shard, old.Position(), old.Data)
				if err != nil {
					return err
				}
				for _, k := range keys {
					if err := b.Delete(k, nil); err != nil {
						return err
					}
				}
			}
			data, err := json.Marshal(d.Data)
			if err != nil {
				return shardcounter.Errorf(shardcounter.EINVALID, "document %q: data cannot be encoded as JSON: %v", d.ID, err)
			}
			v, err := json.Marshal(docRecord{Shard: d.Shard, TS: d.Timestamp.UnixMicro(), Data: data})
			if err != nil {
				return err
			}
			if err := b.Set(docKey(c.Name, d.ID), v, nil); err != nil {
				return err
			}
			keys, err := entryKeys(c.Name, rec, d.Shard, d.Position(), d.Data)
			if err != nil {
				return err
			}
			for _, k := range keys {
				if err := b.Set(k, nil, nil); err != nil {
					return err
				}
			}
			written[d.ID] = d
		}
		return nil
	})
}

// GetDocument returns one document.
func (cs *CollectionStore) GetDocument(ctx context.Context, c *shardcounter.Collection, id string) (*shardcounter.Document, error) {
	var d *shardcounter.Document
	err := cs.s.durableRead(ctx, func(r pdb.Reader) error {
		if _, err := getColl(r, c.Name, c); err != nil {
			return err
		}
		var err error
		if d, err = getDoc(r, c.Name, id); err == nil && d == nil {
			err = shardcounter.DocumentNotFound(c.Name, id)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// DeleteDocument removes one document and its index entries.
func (cs *CollectionStore) DeleteDocument(ctx context.Context, c *shardcounter.Collection, id string) error {
	return cs.write(ctx, func(b *pdb.Batch) error {
		rec, err := getColl(cs.s.db, c.Name, c)
		if err != nil {
			return err
		}
		old, err := getDoc(cs.s.db, c.Name, id)
		if err != nil {
			return err
		}
		if old == nil {
			return shardcounter.DocumentNotFound(c.Name, id)
		}
		keys, err := entryKeys(c.Name, rec, old.Shard, old.Position(), old.Data)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := b.Delete(k, nil); err != nil {
				return err
			}
		}
		return b.Delete(docKey(c.Name, id), nil)
	})
}

// ScanDocuments walks each shard's key range from its bound, on one
// snapshot. For several shards it reads up to r.Limit from each and
// merges them; the service asks for one shard at a time (MaxScanShards).
func (cs *CollectionStore) ScanDocuments(ctx context.Context, c *shardcounter.Collection, sr shardcounter.ScanRange) ([]*shardcounter.Document, error) {
	var out []*shardcounter.Document
	err := cs.s.durableRead(ctx, func(r pdb.Reader) error {
		if _, err := getColl(r, c.Name, c); err != nil {
			return err
		}
		for _, shard := range sr.Shards {
			ids, err := scanShard(r, rangePrefix(c.Name, sr.Index, sr.Value, shard), sr)
			if err != nil {
				return err
			}
			for _, id := range ids {
				d, err := getDoc(r, c.Name, id)
				if err != nil {
					return err
				}
				if d == nil {
					return fmt.Errorf("pebble: index entry of collection %q points at missing document %q", c.Name, id)
				}
				out = append(out, d)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(sr.Shards) > 1 {
		out = docindex.Sort(out, sr.Order, sr.Limit)
	}
	return out, nil
}

// scanShard returns the ids of up to sr.Limit entries under prefix p that
// lie strictly between sr.After and sr.Before, in sr.Order.
func scanShard(r pdb.Reader, p []byte, sr shardcounter.ScanRange) ([]string, error) {
	opts := &pdb.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)}
	if sr.After != nil {
		// Exclusive: the least key after every key with this prefix.
		opts.LowerBound = append(appendPos(slices.Clone(p), *sr.After), 0)
	}
	if sr.Before != nil {
		opts.UpperBound = appendPos(slices.Clone(p), *sr.Before)
	}
	it, err := r.NewIter(opts)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var ids []string
	ok := it.First()
	next := it.Next
	if sr.Order != shardcounter.Asc {
		ok, next = it.Last(), it.Prev
	}
	for ; ok && len(ids) < sr.Limit; ok = next() {
		if k := it.Key(); len(k) >= len(p)+8 {
			ids = append(ids, string(k[len(p)+8:]))
		}
	}
	return ids, it.Error()
}
