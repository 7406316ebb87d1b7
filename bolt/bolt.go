// Package bolt is the embedded store: counters in one bbolt file, the
// default of `shardcounter serve`.
//
// # Layout
//
// Four buckets, keyed so that one counter's records are contiguous:
//
//	counters     id                                → shard count (uint16) | created_at (unix ns, int64)
//	shards       id 0x00 shard(uint16)             → value (int64)
//	requests     id 0x00 request id                → recorded at (unix ns, int64)
//	requests_by_time  recorded at | id 0x00 request id → empty
//
// requests_by_time indexes the request ids by age, so that expiring them
// reads only the expired ones.
//
// Ids never contain 0x00 (shardcounter.ValidateID refuses control
// characters), so "id 0x00" is a prefix that belongs to one counter alone.
// A missing shard key counts as 0, so creating a counter writes one key
// whatever its shard count.
//
// # Durability
//
// Every write transaction is synced to disk before it returns (bbolt's
// default), and bbolt's copy-on-write pages make a crash leave either the
// old or the new state. So an acknowledged write survives a crash of the
// process or the machine. A commit that returns an error (a full disk, a
// failed fdatasync) may have left the new state live or not, so its write
// is reported as outcome unknown (code internal), never as "nothing
// applied".
//
// # Dedupe window
//
// A request id is a duplicate while it is younger than the dedupe window
// (DefaultDedupeWindow, or SetDedupeWindow). Expired ids are deleted
// inside write transactions: each Apply deletes up to expireBatch plus as
// many ids as it recorded, oldest first. So expiry keeps pace with the ids
// written, costs work proportional to recent writes, and an idle store
// does nothing. An expired id not yet deleted is treated as absent.
//
// # Concurrency
//
// bbolt runs one write transaction at a time and lets reads run beside it
// on a snapshot. Sharding therefore buys no write throughput here; the
// engine's group commit does, by folding many writes into one transaction.
// Because writes are serial, this store also refuses a write that would
// take a counter's total (not just its shard) outside the int64 range.
package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
	"github.com/shardcounter/shardcounter/internal/shard"
)

var (
	bucketCounters = []byte("counters")
	bucketShards   = []byte("shards")
	bucketRequests = []byte("requests")
	bucketByTime   = []byte("requests_by_time")
)

// DefaultDedupeWindow is how long a request id is remembered unless
// Options.DedupeWindow or SetDedupeWindow says otherwise.
const DefaultDedupeWindow = 24 * time.Hour

// expireBatch is how many expired request ids an Apply deletes beyond the
// number it records: enough to work off a backlog (after the window was
// shortened, say) within a few batches, small enough to keep a commit's
// cost bounded.
const expireBatch = 64

// Options configure a CounterStore. The zero value uses the defaults.
type Options struct {
	// Now is the store's clock: a counter's creation time, the age of a
	// request id, and the window bucket a write lands in all follow it.
	// Default time.Now; tests inject a clock they control.
	Now func() time.Time
	// DedupeWindow is how long a request id is remembered after its write.
	// Default DefaultDedupeWindow; SetDedupeWindow changes it later.
	DedupeWindow time.Duration
}

// CounterStore is a shardcounter.CounterStore in one bbolt file. It is safe
// for concurrent use; only one process may open a file at a time.
type CounterStore struct {
	db     *bbolt.DB
	window atomic.Int64 // the dedupe window, in nanoseconds
	now    func() time.Time
}

var _ shardcounter.CounterStore = (*CounterStore)(nil)

// lockTimeout bounds how long Open waits for another process to release
// the file, unless ctx ends sooner: a second process on one file is a
// mistake to report, not to wait out.
const lockTimeout = time.Second

// Open opens or creates the store at path, creating its directory. It
// fails after a second (or when ctx ends, if sooner) if another process
// holds the file, rather than waiting for it forever.
func Open(ctx context.Context, path string, opts Options) (*CounterStore, error) {
	if path == "" {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "bolt: empty path: give a file path, as in bolt:./shardcounter-data/shardcounter.db")
	}
	if err := ctx.Err(); err != nil {
		return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "bolt: open %s: %v", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("bolt: create directory for %s: %w", path, err)
	}
	timeout := lockTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = max(min(timeout, time.Until(d)), time.Millisecond)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: timeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("bolt: %s is in use by another process: stop it or choose another file", path)
	}
	if err != nil {
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		indexed := tx.Bucket(bucketByTime) != nil
		for _, b := range [][]byte{bucketCounters, bucketShards, bucketRequests, bucketByTime} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if !indexed {
			// A file from before the index: index its ids once.
			return tx.Bucket(bucketRequests).ForEach(func(k, v []byte) error {
				return tx.Bucket(bucketByTime).Put(timeKey(decodeInt(v), k), nil)
			})
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("bolt: initialise %s: %w", path, err)
	}
	s := &CounterStore{db: db, now: opts.Now}
	if s.now == nil {
		s.now = time.Now
	}
	s.SetDedupeWindow(opts.DedupeWindow)
	return s, nil
}

var _ shardcounter.RequestIDExpirer = (*CounterStore)(nil)

// SetDedupeWindow sets how long a request id is remembered after its write
// (see the package doc). It is safe to call at any time; d <= 0 restores
// DefaultDedupeWindow.
func (s *CounterStore) SetDedupeWindow(d time.Duration) {
	if d <= 0 {
		d = DefaultDedupeWindow
	}
	s.window.Store(int64(d))
}

// Close closes the file.
func (s *CounterStore) Close() error { return s.db.Close() }

// Ping checks that the file is open.
func (s *CounterStore) Ping(ctx context.Context) error {
	return s.db.View(func(*bbolt.Tx) error { return nil })
}

// Path returns the file's path.
func (s *CounterStore) Path() string { return s.db.Path() }

// meta is a counter's metadata record.
type meta struct {
	shards    int
	createdAt int64
}

func encodeMeta(m meta) []byte {
	b := make([]byte, 10)
	binary.BigEndian.PutUint16(b, uint16(m.shards))
	binary.BigEndian.PutUint64(b[2:], uint64(m.createdAt))
	return b
}

func decodeMeta(b []byte) (meta, error) {
	if len(b) != 10 {
		return meta{}, fmt.Errorf("bolt: corrupt counter record of %d bytes", len(b))
	}
	return meta{shards: int(binary.BigEndian.Uint16(b)), createdAt: int64(binary.BigEndian.Uint64(b[2:]))}, nil
}

func (m meta) counter(id string) *shardcounter.Counter {
	return &shardcounter.Counter{ID: id, Spec: shardcounter.Spec{Shards: m.shards, Kind: shardcounter.KindSum}, CreatedAt: time.Unix(0, m.createdAt).UTC()}
}

// prefixKey returns "id 0x00", the prefix of the counter's shard and
// request keys.
func prefixKey(id string) []byte {
	return append([]byte(id), 0)
}

func shardKey(id string, shard int) []byte {
	return binary.BigEndian.AppendUint16(prefixKey(id), uint16(shard))
}

func requestKey(id, requestID string) []byte {
	return append(prefixKey(id), requestID...)
}

// timeKey is the requests_by_time key of a request key recorded at ns.
func timeKey(ns int64, rkey []byte) []byte {
	return append(encodeInt(ns), rkey...)
}

func encodeInt(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func decodeInt(b []byte) int64 {
	if len(b) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

func getMeta(tx *bbolt.Tx, id string) (meta, error) {
	b := tx.Bucket(bucketCounters).Get([]byte(id))
	if b == nil {
		return meta{}, shardcounter.Errorf(shardcounter.ENOTFOUND, "counter %q not found", id)
	}
	return decodeMeta(b)
}

// readShards returns the counter's n shard values, missing keys as 0.
func readShards(tx *bbolt.Tx, id string, n int) []int64 {
	vals := make([]int64, n)
	p := prefixKey(id)
	c := tx.Bucket(bucketShards).Cursor()
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		if i := int(binary.BigEndian.Uint16(k[len(p):])); i < n {
			vals[i] = decodeInt(v)
		}
	}
	return vals
}

// deletePrefix removes every key of bucket that starts with p.
func deletePrefix(b *bbolt.Bucket, p []byte) error {
	c := b.Cursor()
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Seek(p) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// update runs fn in a write transaction and commits it. An error from fn
// rolls the transaction back before anything reached the file: nothing
// applied. An error from the commit is another matter: bbolt writes the
// new pages, then the meta page that makes them live, syncing each, and an
// error from the last steps (a failed fdatasync of the meta page, say)
// leaves the write live in the file or not, and this store cannot tell
// which. So a failed commit is reported as outcome unknown.
func (s *CounterStore) update(ctx context.Context, fn func(*bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "bolt: %v", err)
	}
	tx, err := s.db.Begin(true)
	if err != nil {
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "bolt: write failed, nothing applied: %v", err)
	}
	defer tx.Rollback() // after a commit, a no-op; after a panic in fn, frees the writer lock
	if err := fn(tx); err != nil {
		var e *shardcounter.Error
		if !errors.As(err, &e) {
			return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "bolt: write failed, nothing applied: %v", err)
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return &shardcounter.Error{
			Code:           shardcounter.EINTERNAL,
			Message:        fmt.Sprintf("bolt: commit failed, the write may or may not have been applied (retry with its request id to count it once): %v", err),
			OutcomeUnknown: true,
		}
	}
	return nil
}

func (s *CounterStore) view(ctx context.Context, fn func(*bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "bolt: %v", err)
	}
	return s.db.View(fn)
}

// CreateCounter records a counter with shards zero-valued shards.
func (s *CounterStore) CreateCounter(ctx context.Context, id string, spec shardcounter.Spec) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	if err := shardcounter.ValidateSpec(spec); err != nil {
		return nil, err
	}
	if err := unsupported(spec); err != nil {
		return nil, err
	}
	shards := spec.Shards
	m := meta{shards: shards, createdAt: s.now().UnixNano()}
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketCounters)
		if b.Get([]byte(id)) != nil {
			return shardcounter.Errorf(shardcounter.EEXISTS, "counter %q already exists", id)
		}
		return b.Put([]byte(id), encodeMeta(m))
	})
	if err != nil {
		return nil, err
	}
	return m.counter(id), nil
}

// GetCounter returns the counter's metadata.
func (s *CounterStore) GetCounter(ctx context.Context, id string) (*shardcounter.Counter, error) {
	var c *shardcounter.Counter
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		m, err := getMeta(tx, id)
		c = m.counter(id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// ListCounters returns up to limit counters in id order.
func (s *CounterStore) ListCounters(ctx context.Context, prefix, after string, limit int) ([]*shardcounter.Counter, error) {
	var out []*shardcounter.Counter
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketCounters).Cursor()
		start := []byte(prefix)
		if after >= prefix {
			start = []byte(after)
		}
		for k, v := c.Seek(start); k != nil && len(out) < limit && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
			if string(k) == after {
				continue
			}
			m, err := decodeMeta(v)
			if err != nil {
				return err
			}
			out = append(out, m.counter(string(k)))
		}
		return nil
	})
	return out, err
}

// DeleteCounter removes the counter, its shards and its request ids.
func (s *CounterStore) DeleteCounter(ctx context.Context, id string) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		if _, err := getMeta(tx, id); err != nil {
			return err
		}
		if err := tx.Bucket(bucketCounters).Delete([]byte(id)); err != nil {
			return err
		}
		if err := deletePrefix(tx.Bucket(bucketShards), prefixKey(id)); err != nil {
			return err
		}
		byTime, p := tx.Bucket(bucketByTime), prefixKey(id)
		c := tx.Bucket(bucketRequests).Cursor()
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			if err := byTime.Delete(timeKey(decodeInt(v), k)); err != nil {
				return err
			}
		}
		return deletePrefix(tx.Bucket(bucketRequests), p)
	})
}

// ReadCounter sums the counter's shards in one read transaction.
func (s *CounterStore) ReadCounter(ctx context.Context, id string) (*shardcounter.Reading, error) {
	c, vals, err := s.ReadShards(ctx, id)
	if err != nil {
		return nil, err
	}
	sum, ok := overflow.Sum(vals)
	if !ok {
		return nil, shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: the sum of its shards is outside the int64 range", id)
	}
	return &shardcounter.Reading{ID: id, Value: sum, Shards: c.Shards, Consistency: shardcounter.Strong, AsOf: s.now().UTC()}, nil
}

// ReadShards returns the counter and its shard values from one snapshot.
func (s *CounterStore) ReadShards(ctx context.Context, id string) (*shardcounter.Counter, []int64, error) {
	var (
		c    *shardcounter.Counter
		vals []int64
	)
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		m, err := getMeta(tx, id)
		if err != nil {
			return err
		}
		c, vals = m.counter(id), readShards(tx, id, m.shards)
		return nil
	})
	return c, vals, err
}

// Add adds delta to shard pick mod n in its own synced transaction: the
// seed algorithm, one store write per increment.
func (s *CounterStore) Add(ctx context.Context, id string, delta int64, pick uint64) error {
	out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: delta, Pick: pick}})
	if err != nil {
		return err
	}
	return out[0].Err
}

// Apply applies the batch in one synced transaction; items that fail on
// their own are skipped and reported.
func (s *CounterStore) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	out := make([]shardcounter.Outcome, len(incs))
	if len(incs) == 0 {
		return out, nil
	}
	nowNS := s.now().UnixNano()
	now := encodeInt(nowNS)
	cutoff := nowNS - s.window.Load() // ids recorded at or before cutoff have expired
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		clear(out) // bbolt never retries fn, but keep the result tied to this run
		shards, requests, byTime := tx.Bucket(bucketShards), tx.Bucket(bucketRequests), tx.Bucket(bucketByTime)
		recorded := 0
		type state struct {
			m     meta
			total int64
			err   error
		}
		seen := make(map[string]*state)
		for i, inc := range incs {
			if err := shardcounter.ValidateIncrement(inc); err != nil {
				out[i].Err = err
				continue
			}
			st := seen[inc.Counter]
			if st == nil {
				st = new(state)
				if st.m, st.err = getMeta(tx, inc.Counter); st.err == nil {
					var ok bool
					if st.total, ok = overflow.Sum(readShards(tx, inc.Counter, st.m.shards)); !ok {
						st.err = shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: its total is outside the int64 range", inc.Counter)
					}
				}
				seen[inc.Counter] = st
			}
			if st.err != nil {
				out[i].Err = st.err
				continue
			}
			var rkey, old []byte
			if inc.RequestID != "" {
				rkey = requestKey(inc.Counter, inc.RequestID)
				if old = requests.Get(rkey); old != nil && decodeInt(old) > cutoff {
					out[i].Duplicate = true
					continue
				}
			}
			key := shardKey(inc.Counter, shard.Of(inc.Pick, st.m.shards))
			v, ok1 := overflow.Add(decodeInt(shards.Get(key)), inc.Delta)
			total, ok2 := overflow.Add(st.total, inc.Delta)
			if !ok1 || !ok2 {
				out[i].Err = shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it outside the int64 range", inc.Counter, inc.Delta)
				continue
			}
			if err := shards.Put(key, encodeInt(v)); err != nil {
				return err
			}
			if rkey != nil {
				if old != nil { // expired, not yet deleted: record it afresh
					if err := byTime.Delete(timeKey(decodeInt(old), rkey)); err != nil {
						return err
					}
				}
				if err := requests.Put(rkey, now); err != nil {
					return err
				}
				if err := byTime.Put(timeKey(nowNS, rkey), nil); err != nil {
					return err
				}
				recorded++
			}
			st.total = total
		}
		return expire(requests, byTime, cutoff, expireBatch+recorded)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// expire deletes up to limit request ids recorded at or before cutoff,
// oldest first.
func expire(requests, byTime *bbolt.Bucket, cutoff int64, limit int) error {
	c := byTime.Cursor()
	for k, _ := c.First(); k != nil && limit > 0 && decodeInt(k[:8]) <= cutoff; k, _ = c.First() {
		if err := requests.Delete(k[8:]); err != nil {
			return err
		}
		if err := c.Delete(); err != nil {
			return err
		}
		limit--
	}
	return nil
}

// ReshardCounter changes the shard count in one transaction. Writes are
// serial in bbolt, so no write can interleave with the fold.
func (s *CounterStore) ReshardCounter(ctx context.Context, id string, shards int) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateShards(shards); err != nil {
		return nil, err
	}
	var c *shardcounter.Counter
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		m, err := getMeta(tx, id)
		if err != nil {
			return err
		}
		if shards < m.shards {
			b := tx.Bucket(bucketShards)
			vals := readShards(tx, id, m.shards)
			for j := range shards {
				// Kept shard j takes every shard i ≡ j (mod shards). The
				// group's sum can leave int64 even when the total fits.
				var group []int64
				for i := j; i < m.shards; i += shards {
					group = append(group, vals[i])
				}
				v, ok := overflow.Sum(group)
				if !ok {
					return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: folding into shard %d leaves the int64 range: reshard to another count", id, j)
				}
				if err := b.Put(shardKey(id, j), encodeInt(v)); err != nil {
					return err
				}
			}
			for i := shards; i < m.shards; i++ {
				if err := b.Delete(shardKey(id, i)); err != nil {
					return err
				}
			}
		}
		m.shards = shards
		c = m.counter(id)
		return tx.Bucket(bucketCounters).Put([]byte(id), encodeMeta(m))
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}
