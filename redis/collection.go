package redis

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docindex"
)

// Collection keys, with the default prefix "shardcounter:":
//
//	shardcounter:coll:NAME                 hash: n, t (timestamp field), i (indexes, JSON),
//	                                       k (shard key), c (created, Unix µs)
//	shardcounter:{TAG}d:INC:NAME:ID         string: the document (JSON: shard, µs, data)
//	shardcounter:{TAG}x:INC:NAME:IDX:VAL:K  sorted set: the entries of index IDX, value
//	                                       VAL, shard K; every score 0, each member
//	                                       16 hex digits of the sortable µs, then the id
//
// INC is the collection's creation time, so a collection made again under
// a deleted one's name shares no key with it. NAME, IDX and VAL are
// length-prefixed. With equal scores a sorted set orders its members by
// bytes, so ZRANGEBYLEX reads a shard's entries in (timestamp, id) order
// from any position, exactly, where a float score would lose microseconds
// past 2^53.
//
// The TAG of an index set puts shard K of (collection, index, value) in
// slot base + K·10127, as a counter's shards are placed: the n sets of one
// hot index value, the index that takes every new document, spread over
// the masters of a cluster. A document key's tag hashes its id.
//
// A document and its entries live in different slots, so a put is not
// atomic on a cluster. A put therefore adds the new entries, then writes
// the document, then removes the entries of the document it replaced; a
// scan keeps only entries that agree with the document they name (shard,
// timestamp and indexed value). An entry left by an interrupted put, or by
// two racing rewrites of one id, is skipped by every read.

// CollectionStore is a shardcounter.CollectionStore on the Redis server
// or cluster of a CounterStore. It is safe for concurrent use, also by
// several processes sharing one Redis.
type CollectionStore struct {
	s *CounterStore
}

var _ shardcounter.CollectionStore = (*CollectionStore)(nil)

// Collections returns the collection store on s's Redis.
func (s *CounterStore) Collections() *CollectionStore { return &CollectionStore{s: s} }

// MaxScanShards is 1: each shard's entries are their own sorted set.
func (s *CollectionStore) MaxScanShards() int { return 1 }

// growScript raises the shard count of the collection KEYS[1] to ARGV[1].
// It returns -1 when there is no collection (or it is being deleted), -2
// when the count is above ARGV[1] (it only grows), else the count before.
var growScript = goredis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'n', 'st')
local n = m[1]
if not n or m[2] then return -1 end
if tonumber(ARGV[1]) < tonumber(n) then return -2 end
redis.call('HSET', KEYS[1], 'n', ARGV[1])
return tonumber(n)
`)

func lp(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

func (s *CollectionStore) metaKey(name string) string { return s.s.prefix + "coll:" + name }

// collectionIncarnation names the keys of one collection's life: its
// creation time, so a collection made again under a deleted one's name
// shares no key with it.
func collectionIncarnation(c *shardcounter.Collection) string {
	return strconv.FormatInt(c.CreatedAt.UnixMicro(), 10)
}

func (s *CollectionStore) docKey(c *shardcounter.Collection, id string) string {
	h := fnv.New64a()
	h.Write([]byte(c.Name))
	h.Write([]byte{0})
	h.Write([]byte(id))
	b := []byte(s.s.prefix + "{" + slotTags()[h.Sum64()%NumSlots] + "}d:" + collectionIncarnation(c) + ":")
	b = lp(b, c.Name)
	b = lp(b, id)
	return string(b)
}

func (s *CollectionStore) indexKey(c *shardcounter.Collection, index, value string, shard int) string {
	tail := lp(lp(lp(nil, c.Name), index), value)
	h := fnv.New64a()
	h.Write([]byte(collectionIncarnation(c)))
	h.Write(tail)
	slot := (int(h.Sum64()%NumSlots) + shard*slotStride) % NumSlots
	return s.s.prefix + "{" + slotTags()[slot] + "}x:" + collectionIncarnation(c) + ":" + string(tail) + ":" + strconv.Itoa(shard)
}

// member is an index entry: sortable microseconds in hex, then the id.
func member(p shardcounter.Position) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(p.Time.UnixMicro())^(1<<63))
	return hex.EncodeToString(b[:]) + p.ID
}

func parseMember(m string) (shardcounter.Position, error) {
	if len(m) <= 16 {
		return shardcounter.Position{}, fmt.Errorf("index entry %q is too short", m)
	}
	b, err := hex.DecodeString(m[:16])
	if err != nil {
		return shardcounter.Position{}, fmt.Errorf("index entry %q: %w", m, err)
	}
	us := int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
	return shardcounter.Position{Time: time.UnixMicro(us).UTC(), ID: m[16:]}, nil
}

// docRecord is a document as stored.
type docRecord struct {
	Shard int             `json:"s"`
	TS    int64           `json:"t"`
	Data  json.RawMessage `json:"d"`
}

func decodeDoc(id string, v string) (*shardcounter.Document, error) {
	var r docRecord
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "redis: corrupt document %q: %v", id, err)
	}
	d := json.NewDecoder(bytes.NewReader(r.Data))
	d.UseNumber() // keep integers past 2^53 exact
	var data map[string]any
	if err := d.Decode(&data); err != nil {
		return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "redis: corrupt data of document %q: %v", id, err)
	}
	return &shardcounter.Document{ID: id, Shard: r.Shard, Timestamp: time.UnixMicro(r.TS).UTC(), Data: data}, nil
}

// entries returns the index keys and member of a document in c: one for
// the index of every document, one per indexed field it has a value for.
func (s *CollectionStore) entries(c *shardcounter.Collection, d *shardcounter.Document) ([]string, string, error) {
	vals, err := docindex.Entries(c, d.Data)
	if err != nil {
		return nil, "", err
	}
	keys := []string{s.indexKey(c, "", "", d.Shard)}
	for _, f := range c.Indexes {
		if v, ok := vals[f]; ok {
			keys = append(keys, s.indexKey(c, f, v, d.Shard))
		}
	}
	return keys, member(d.Position()), nil
}

func collNotFound(name string) error {
	return shardcounter.Errorf(shardcounter.ENOTFOUND, "collection %q not found", name)
}

func docNotFound(name, id string) error {
	return shardcounter.Errorf(shardcounter.ENOTFOUND, "document %q not found in collection %q", id, name)
}

// CreateCollection records c unless its name is taken. A name whose
// collection is being deleted is taken until the deletion is finished,
// which this call then does.
func (s *CollectionStore) CreateCollection(ctx context.Context, c *shardcounter.Collection) error {
	idx, err := json.Marshal(c.Indexes)
	if err != nil {
		return err
	}
	for range maxAttempts {
		res, err := s.s.runScript(ctx, createScript, []string{s.metaKey(c.Name)},
			"n", c.Shards, "t", c.TimestampField, "i", string(idx), "k", string(c.ShardKey), "c", c.CreatedAt.UnixMicro()).Int()
		if err != nil {
			return storeErr("create collection", err, true)
		}
		if res == 1 {
			return s.s.sync(ctx, s.metaKey(c.Name))
		}
		if _, err := s.GetCollection(ctx, c.Name); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
			if err != nil {
				return err
			}
			return shardcounter.Errorf(shardcounter.EEXISTS, "collection %q already exists", c.Name)
		}
	}
	return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "redis: collection %q keeps changing: try again", c.Name)
}

// GetCollection returns a collection's metadata. A collection whose
// deletion was recorded is not found; this call finishes the deletion
// first, so one cut short by a crash is finished by whoever meets it.
func (s *CollectionStore) GetCollection(ctx context.Context, name string) (*shardcounter.Collection, error) {
	m, err := s.s.client.HGetAll(ctx, s.metaKey(name)).Result()
	if err != nil {
		return nil, storeErr("read collection", err, false)
	}
	if len(m) == 0 {
		return nil, collNotFound(name)
	}
	c := &shardcounter.Collection{Name: name, TimestampField: m["t"], ShardKey: shardcounter.ShardKey(m["k"])}
	us, err1 := strconv.ParseInt(m["c"], 10, 64)
	n, err2 := strconv.Atoi(m["n"])
	err3 := json.Unmarshal([]byte(m["i"]), &c.Indexes)
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "redis: collection %q has corrupt metadata: %v", name, err)
	}
	c.Shards, c.CreatedAt = n, time.UnixMicro(us).UTC()
	if m["st"] == stateDelete {
		if err := s.finishDelete(ctx, c); err != nil {
			return nil, err
		}
		return nil, collNotFound(name)
	}
	return c, nil
}

// GrowCollection raises the shard count in one atomic step.
func (s *CollectionStore) GrowCollection(ctx context.Context, name string, shards int) (*shardcounter.Collection, error) {
	if err := shardcounter.ValidateShards(shards); err != nil {
		return nil, err
	}
	res, err := growScript.Run(ctx, s.s.client, []string{s.metaKey(name)}, shards).Int()
	if err != nil {
		return nil, storeErr("grow collection", err, true)
	}
	switch res {
	case -1:
		return nil, collNotFound(name)
	case -2:
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "collection %q has more than %d shards: a shard count only grows", name, shards)
	}
	if err := s.s.sync(ctx, s.metaKey(name)); err != nil {
		return nil, err
	}
	return s.GetCollection(ctx, name)
}

// current checks that c is still the collection under its name (the same
// incarnation, not being deleted) and returns its shard count now.
func (s *CollectionStore) current(ctx context.Context, c *shardcounter.Collection) (int, error) {
	v, err := s.s.client.HMGet(ctx, s.metaKey(c.Name), "c", "n", "st").Result()
	if err != nil {
		return 0, storeErr("read collection", err, false)
	}
	created, _ := v[0].(string)
	if created != collectionIncarnation(c) || v[2] != nil {
		return 0, collNotFound(c.Name)
	}
	n, _ := v[1].(string)
	return strconv.Atoi(n)
}

// DeleteCollection records the deletion in the metadata, which makes the
// collection not found at once, then removes every document and entry,
// and the metadata last. Whoever meets the record (GetCollection,
// CreateCollection of the name) finishes the job, so a crash in between
// leaves no documents behind for good.
func (s *CollectionStore) DeleteCollection(ctx context.Context, name string) error {
	c, err := s.GetCollection(ctx, name)
	if err != nil {
		return err
	}
	ok, err := s.s.runScript(ctx, markDeleteScript, []string{s.metaKey(name)}).Int()
	if err != nil {
		return storeErr("delete collection", err, true)
	}
	if ok == 0 {
		return collNotFound(name)
	}
	if err := s.s.step("collection-delete"); err != nil {
		return err
	}
	return s.finishDelete(ctx, c)
}

// finishDelete runs the idempotent steps of a recorded deletion: every
// document and entry, found through the index of every document, shard by
// shard, then the metadata.
func (s *CollectionStore) finishDelete(ctx context.Context, c *shardcounter.Collection) error {
	for shard := range c.Shards {
		all := s.indexKey(c, "", "", shard)
		for {
			ms, err := s.s.client.ZRangeByLex(ctx, all, &goredis.ZRangeBy{Min: "-", Max: "+", Count: 500}).Result()
			if err != nil {
				return storeErr("delete collection documents", err, true)
			}
			if len(ms) == 0 {
				break
			}
			for _, m := range ms {
				p, err := parseMember(m)
				if err != nil {
					return shardcounter.Errorf(shardcounter.EINTERNAL, "redis: %v", err)
				}
				if _, err := s.remove(ctx, c, p.ID); err != nil {
					return err
				}
				// A stale entry names a document that is elsewhere or gone.
				if err := s.s.client.ZRem(ctx, all, m).Err(); err != nil {
					return storeErr("delete collection documents", err, true)
				}
			}
		}
	}
	if err := s.s.runScript(ctx, deleteMetaScript, []string{s.metaKey(c.Name)}).Err(); err != nil {
		return storeErr("delete collection", err, true)
	}
	return s.s.syncAll(ctx)
}

// PutDocuments adds each document's entries, writes the documents, and
// then removes the entries of the documents they replaced, each step one
// pipeline.
func (s *CollectionStore) PutDocuments(ctx context.Context, c *shardcounter.Collection, docs []*shardcounter.Document) error {
	n, err := s.current(ctx, c)
	if err != nil {
		return err
	}
	olds, err := s.getDocs(ctx, c, docIDs(docs))
	if err != nil {
		return err
	}
	type write struct {
		keys   []string
		member string
		value  []byte
	}
	ws := make([]write, len(docs))
	for i, d := range docs {
		if d.Shard < 0 || d.Shard >= n {
			return shardcounter.Errorf(shardcounter.EINVALID, "document %q: shard %d is not below the shard count %d", d.ID, d.Shard, n)
		}
		data, err := json.Marshal(d.Data)
		if err != nil {
			return shardcounter.Errorf(shardcounter.EINVALID, "document %q: data cannot be encoded as JSON: %v", d.ID, err)
		}
		if ws[i].value, err = json.Marshal(docRecord{Shard: d.Shard, TS: d.Timestamp.UnixMicro(), Data: data}); err != nil {
			return err
		}
		if ws[i].keys, ws[i].member, err = s.entries(c, d); err != nil {
			return err
		}
	}
	_, err = s.s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, w := range ws {
			for _, k := range w.keys {
				p.ZAdd(ctx, k, goredis.Z{Member: w.member})
			}
		}
		return nil
	})
	if err != nil {
		return storeErr("add index entries", err, true)
	}
	_, err = s.s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, w := range ws {
			p.Set(ctx, s.docKey(c, docs[i].ID), w.value, 0)
		}
		return nil
	})
	if err != nil {
		return storeErr("write documents", err, true)
	}
	var stale [][2]string // key, member
	for i, old := range olds {
		if old == nil {
			continue
		}
		keys, m, err := s.entries(c, old)
		if err != nil {
			continue // written before a limit it now breaks: it has no entry under that index
		}
		for _, k := range keys {
			if m != ws[i].member || !slices.Contains(ws[i].keys, k) {
				stale = append(stale, [2]string{k, m})
			}
		}
	}
	written := make([]string, 0, 2*len(docs))
	for i, w := range ws {
		written = append(written, s.docKey(c, docs[i].ID))
		written = append(written, w.keys...)
	}
	if len(stale) > 0 {
		_, err = s.s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, e := range stale {
				p.ZRem(ctx, e[0], e[1])
			}
			return nil
		})
		// The documents are written; an entry left behind is skipped by reads.
		if err != nil {
			return storeErr("remove replaced index entries", err, true)
		}
	}
	return s.s.sync(ctx, written...)
}

func docIDs(docs []*shardcounter.Document) []string {
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	return ids
}

// getDocs reads documents in one pipeline; a missing one is nil.
func (s *CollectionStore) getDocs(ctx context.Context, c *shardcounter.Collection, ids []string) ([]*shardcounter.Document, error) {
	cmds := make([]*goredis.StringCmd, len(ids))
	_, err := s.s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.Get(ctx, s.docKey(c, id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, storeErr("read documents", err, false)
	}
	out := make([]*shardcounter.Document, len(ids))
	for i, cmd := range cmds {
		v, err := cmd.Result()
		if errors.Is(err, goredis.Nil) {
			continue
		}
		if err != nil {
			return nil, storeErr("read documents", err, false)
		}
		if out[i], err = decodeDoc(ids[i], v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// GetDocument returns one document.
func (s *CollectionStore) GetDocument(ctx context.Context, c *shardcounter.Collection, id string) (*shardcounter.Document, error) {
	docs, err := s.getDocs(ctx, c, []string{id})
	if err != nil {
		return nil, err
	}
	if docs[0] == nil {
		return nil, docNotFound(c.Name, id)
	}
	return docs[0], nil
}

// DeleteDocument removes the document, then its entries.
func (s *CollectionStore) DeleteDocument(ctx context.Context, c *shardcounter.Collection, id string) error {
	if _, err := s.current(ctx, c); err != nil {
		return err
	}
	found, err := s.remove(ctx, c, id)
	if err == nil && !found {
		err = docNotFound(c.Name, id)
	}
	if err != nil {
		return err
	}
	return s.s.sync(ctx, s.docKey(c, id))
}

// remove deletes a document and then its entries, and reports whether it
// was there.
func (s *CollectionStore) remove(ctx context.Context, c *shardcounter.Collection, id string) (bool, error) {
	d, err := s.GetDocument(ctx, c, id)
	if shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := s.s.client.Del(ctx, s.docKey(c, id)).Err(); err != nil {
		return false, storeErr("delete document", err, true)
	}
	keys, m, err := s.entries(c, d)
	if err != nil {
		return true, nil // it has no entries under the index it breaks
	}
	_, err = s.s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, k := range keys {
			p.ZRem(ctx, k, m)
		}
		return nil
	})
	return true, storeErr("remove index entries", err, true)
}

// ScanDocuments reads each shard's sorted set with ZRANGEBYLEX (or
// ZREVRANGEBYLEX) from its bound, fetches the named documents in one
// pipeline, and keeps the entries that agree with their documents,
// reading on until it has r.Limit or the set ends. For several shards it
// reads up to r.Limit from each and merges them; the service asks for one
// shard at a time (MaxScanShards).
func (s *CollectionStore) ScanDocuments(ctx context.Context, c *shardcounter.Collection, r shardcounter.ScanRange) ([]*shardcounter.Document, error) {
	var out []*shardcounter.Document
	for _, shard := range r.Shards {
		docs, err := s.scanShard(ctx, c, r, shard)
		if err != nil {
			return nil, err
		}
		out = append(out, docs...)
	}
	if len(r.Shards) > 1 {
		out = docindex.Sort(out, r.Order, r.Limit)
	}
	return out, nil
}

func (s *CollectionStore) scanShard(ctx context.Context, c *shardcounter.Collection, r shardcounter.ScanRange, shard int) ([]*shardcounter.Document, error) {
	key := s.indexKey(c, r.Index, r.Value, shard)
	lo, hi := "-", "+"
	if r.After != nil {
		lo = "(" + member(*r.After)
	}
	if r.Before != nil {
		hi = "(" + member(*r.Before)
	}
	var out []*shardcounter.Document
	for len(out) < r.Limit {
		want := r.Limit - len(out)
		by := &goredis.ZRangeBy{Min: lo, Max: hi, Count: int64(want)}
		var ms []string
		var err error
		if r.Order == shardcounter.Asc {
			ms, err = s.s.client.ZRangeByLex(ctx, key, by).Result()
		} else {
			ms, err = s.s.client.ZRevRangeByLex(ctx, key, by).Result()
		}
		if err != nil {
			return nil, storeErr("scan index", err, false)
		}
		if len(ms) == 0 {
			break
		}
		pos := make([]shardcounter.Position, len(ms))
		ids := make([]string, len(ms))
		for i, m := range ms {
			if pos[i], err = parseMember(m); err != nil {
				return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "redis: %v", err)
			}
			ids[i] = pos[i].ID
		}
		docs, err := s.getDocs(ctx, c, ids)
		if err != nil {
			return nil, err
		}
		for i, d := range docs {
			if d != nil && d.Shard == shard && d.Timestamp.Equal(pos[i].Time) && matches(d, r) {
				out = append(out, d)
			}
		}
		if len(ms) < want {
			break
		}
		last := "(" + ms[len(ms)-1]
		if r.Order == shardcounter.Asc {
			lo = last
		} else {
			hi = last
		}
	}
	return out, nil
}

// matches reports whether d has r.Value under r.Index now: an entry may
// be left from a value the document no longer holds.
func matches(d *shardcounter.Document, r shardcounter.ScanRange) bool {
	if r.Index == "" {
		return true
	}
	v, ok := shardcounter.Lookup(d.Data, r.Index)
	if !ok {
		return false
	}
	iv, ok := shardcounter.IndexValue(v)
	return ok && iv == r.Value
}
