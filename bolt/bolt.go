// Package bolt is the embedded store: counters in one bbolt file, the
// default of `shardcounter serve`.
//
// # Layout
//
// Seven buckets, keyed so that one counter's records are contiguous:
//
//	counters          id                               → counter record (see meta.go)
//	shards            id 0x00 shard (uint16)           → value (int64)
//	sketches          id 0x00 shard (uint16)           → an approx counter's shard sketch (sketch.go)
//	members           id 0x00 member                   → empty
//	window_buckets    id 0x00 start (int64, sign flipped) → value (int64)
//	requests          id 0x00 request id               → recorded at (unix ns, int64)
//	requests_by_time  recorded at | id 0x00 request id → empty
//
// requests_by_time indexes the request ids by age, so that expiring them
// reads only the expired ones.
//
// Ids and members never contain 0x00 (shardcounter.ValidateID refuses
// control characters), so "id 0x00" is a prefix that belongs to one
// counter alone. A missing shard key counts as 0, so creating a counter
// writes one key whatever its shard count, and a first write can create
// its counter in the transaction that applies it (Increment.Create).
//
// # Kinds, bounds and windows
//
// A distinct counter keeps each member as a key of its own, and the count
// of shard shard.Of(shard.ForMember(m), n) in that shard's value; adding
// or removing a member changes the key and the shard's value in the same
// transaction, so the value is the member count exactly. Members are keyed
// by counter, not by shard, so membership is one lookup, listing is one
// cursor walk in byte order, and resharding recounts the members into the
// new shards (work proportional to the members) without moving a key.
//
// An approx counter keeps each shard's HyperLogLog sketch as one key of
// the sketches bucket, changed once per shard and batch (sketch.go); its
// value is the estimate of the union of its shards' sketches, read in one
// transaction. Resharding merges a removed shard's sketch into shard
// i mod n.
//
// Bounds (Spec.Min, Spec.Max) are checked against the counter's total,
// which every batch reads once per counter: writes are serial in bbolt, so
// the check and the write cannot interleave with another writer.
//
// A windowed counter also adds every write to the bucket of the commit
// time. Its buckets are kept per counter, not per shard: bbolt's writes are
// serial, so per-shard buckets would buy no throughput and would have to be
// folded on every reshard. A batch that writes a windowed counter deletes
// its buckets past retention (those that start before the bucket holding
// now − retention), so the work is proportional to the writes, each bucket
// is deleted once, and an idle store does nothing.
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
// (Options.DedupeWindow or SetDedupeWindow). Expired ids are deleted
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
// Every read (ReadCounters of many counters included) is one snapshot,
// and so linearizable.
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
)

var (
	bucketCounters = []byte("counters")
	bucketShards   = []byte("shards")
	bucketMembers  = []byte("members")
	bucketWindow   = []byte("window_buckets")
	bucketRequests = []byte("requests")
	bucketByTime   = []byte("requests_by_time")
	bucketSketches = []byte("sketches")
)

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
	// Default shardcounter.DefaultDedupeWindow; SetDedupeWindow changes it later.
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
		for _, b := range [][]byte{bucketCounters, bucketShards, bucketMembers, bucketWindow, bucketRequests, bucketByTime, bucketSketches} {
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
// shardcounter.DefaultDedupeWindow.
func (s *CounterStore) SetDedupeWindow(d time.Duration) {
	if d <= 0 {
		d = shardcounter.DefaultDedupeWindow
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

// prefixKey returns "id 0x00", the prefix of the counter's keys in every
// bucket but counters.
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
		return shardcounter.OutcomeUnknownf("bolt: commit failed (%v)", err)
	}
	return nil
}

func (s *CounterStore) view(ctx context.Context, fn func(*bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "bolt: %v", err)
	}
	return s.db.View(fn)
}
