package pebble

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/shardcounter/shardcounter"
)

// Defaults of Options.
const (
	// DefaultMemTableSize is Options.MemTableSize's default: large enough
	// that a million counters' operands fold in the memtable for a while
	// before a flush writes them out, small enough to keep memory modest
	// (two may be held while one flushes).
	DefaultMemTableSize = 32 << 20
	// DefaultCacheSize is Options.CacheSize's default: the block cache
	// serves member and request-id lookups and the reads of records off
	// the memory path; the totals themselves live outside it.
	DefaultCacheSize = 32 << 20
)

// expireBatch is how many expired request ids a write deletes beyond the
// number it records: enough to work off a backlog within a few batches,
// small enough to keep a commit's cost bounded.
const expireBatch = 64

// Options configure a CounterStore. The zero value uses the defaults.
type Options struct {
	// Now is the store's clock: a counter's creation time, the age of a
	// request id, and the window bucket a write lands in all follow it.
	// Default time.Now; tests inject a clock they control.
	Now func() time.Time
	// DedupeWindow is how long a request id is remembered after its write.
	// Default shardcounter.DefaultDedupeWindow; SetDedupeWindow changes it.
	DedupeWindow time.Duration
	// MemTableSize is Pebble's memtable size in bytes. Default
	// DefaultMemTableSize.
	MemTableSize int
	// CacheSize is Pebble's block cache in bytes. Default DefaultCacheSize.
	CacheSize int
	// Logger receives Pebble's errors. Default slog.Default().
	Logger *slog.Logger
	// FS is the file system Pebble works on. Default the operating
	// system's; tests inject faults with Pebble's vfs/errorfs.
	FS vfs.FS
}

// CounterStore is a shardcounter.CounterStore in a Pebble directory, with
// every counter's total in memory. It is safe for concurrent use; only one
// process may open a directory at a time (Pebble locks it).
type CounterStore struct {
	db     *pdb.DB
	dir    string
	window atomic.Int64 // the dedupe window, in nanoseconds
	now    func() time.Time

	// mu is the write lock: every write is built and handed to Pebble
	// under it, in ticket order (commit.go), and the fields below it
	// belong to it. The counters map changes under mu and pub together.
	mu       sync.Mutex
	closed   bool
	approx   map[string]*apxState // approx counters' sketches (sketch.go); changes under mu and pub
	oldestID int64                // no request id was recorded before (unix ns)
	// states holds the shard values of multi-shard limit keys' state
	// counters as the batches handed to Pebble leave them (limitstate.go),
	// so that a hot key's take reads nothing from Pebble.
	states map[string][]int64
	reads  sync.WaitGroup // reads on a snapshot, which Close waits for
	// The counters in memory (table.go), and the index that finds them
	// (index.go).
	slabs    []*[slabSize]ctr
	cut      int      // ctrs cut from the slabs
	freeRefs []uint32 // the refs of forgotten counters' ctrs, for reuse
	index    []uint64
	indexed  int      // counters in the index
	retired  []uint64 // the index Close took away, which unmap releases
	seed     maphash.Seed
	ids      []byte               // the free part of the current chunk of ids
	chunks   []*idChunk           // the chunks of ids; 0 is none
	mapped   [][]byte             // what offHeap mapped
	specs    []*shardcounter.Spec // interned specs; 0 is none
	specIx   map[string]uint32
	specKey  []byte
	// key is the scratch buffer of a batch's member keys (view.Member,
	// view.write): Pebble copies a key it is given, so one buffer serves
	// every member read and write of a batch, where a key of its own
	// each was two allocations (a distinct add, or a deadline change's
	// two members).
	key []byte

	ticket atomic.Uint64 // the last batch handed to Pebble

	// pub guards what strong reads see: the ctr fields it names, the
	// publication queue, and durable; cond (on pub) signals each
	// publication.
	pub     sync.RWMutex
	cond    *sync.Cond
	queue   []*inflight
	durable uint64 // the last batch published
	failed  error  // the first failed commit; nothing is written after it
}

var (
	_ shardcounter.CounterStore     = (*CounterStore)(nil)
	_ shardcounter.RequestIDExpirer = (*CounterStore)(nil)
)

// Open opens or creates the store in directory dir and loads every
// counter's total into memory. Another process holding the directory is
// an error.
func Open(ctx context.Context, dir string, opts Options) (*CounterStore, error) {
	if dir == "" {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "pebble: empty path: give a directory, as in pebble:./shardcounter-data/pebble")
	}
	if err := ctx.Err(); err != nil {
		return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "pebble: open %s: %v", dir, err)
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "pebble: %s is a file, not a directory: give the directory of a Pebble store (bolt:%s opens a bolt file)", dir, dir)
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(dir)), 0o750); err != nil {
		return nil, fmt.Errorf("pebble: create directory for %s: %w", dir, err)
	}
	if opts.MemTableSize <= 0 {
		opts.MemTableSize = DefaultMemTableSize
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	cache := pdb.NewCache(int64(opts.CacheSize))
	defer cache.Unref()
	po := &pdb.Options{
		Cache:                       cache,
		MemTableSize:                uint64(opts.MemTableSize),
		MemTableStopWritesThreshold: 4,
		Merger:                      merger,
		FormatMajorVersion:          pdb.FormatNewest,
		Logger:                      logger{opts.Logger},
		FS:                          opts.FS,
	}
	for i := range po.Levels {
		// Member and request-id lookups are point reads, mostly of keys
		// that are absent: a bloom filter answers those without a block.
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pdb.Open(dir, po)
	if err != nil {
		if isLocked(err) {
			return nil, fmt.Errorf("pebble: %s is in use by another process: stop it or choose another directory", dir)
		}
		return nil, fmt.Errorf("pebble: open %s: %w", dir, err)
	}
	s := &CounterStore{db: db, dir: dir, now: opts.Now, seed: maphash.MakeSeed(), specIx: make(map[string]uint32)}
	s.cond = sync.NewCond(&s.pub)
	if s.now == nil {
		s.now = time.Now
	}
	s.SetDedupeWindow(opts.DedupeWindow)
	if err := s.load(); err != nil {
		s.unmap()
		db.Close()
		return nil, err
	}
	return s, nil
}

// isLocked reports whether Open failed on the directory's lock file,
// which Pebble holds with flock for as long as a process has it open.
func isLocked(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "lock held") || strings.Contains(msg, "resource temporarily unavailable")
}

// load reads every counter record into memory, and when the oldest
// request id was recorded.
func (s *CounterStore) load() error {
	// The count at the last Close sizes the index: growing it one
	// doubling at a time would move every slot again and again.
	n := int64(0)
	if v, closer, err := s.db.Get([]byte{keyCountHint}); err == nil {
		if n = decodeInt(v); n < 0 || n >= 1<<32 {
			n = 0
		}
		closer.Close()
	}
	s.growIndex(indexSize(int(n)))
	it, err := s.db.NewIter(&pdb.IterOptions{LowerBound: []byte{prefixCounter}, UpperBound: []byte{prefixCounter + 1}})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return fmt.Errorf("pebble: load counters: %w", err)
		}
		spec, shards, total, err := s.loadRecord(v)
		if err != nil {
			it.Close()
			return fmt.Errorf("pebble: load counter %q: %w", it.Key()[1:], err)
		}
		c := s.addCounter(it.Key()[1:])
		c.spec, c.pending, c.total, c.shards = spec, total, total, uint16(shards)
		if s.specs[spec].Kind == shardcounter.KindApprox {
			if s.approx == nil {
				s.approx = make(map[string]*apxState)
			}
			s.approx[string(it.Key()[1:])] = new(apxState)
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("pebble: load counters: %w", err)
	}
	if err := s.loadSketches(); err != nil {
		return fmt.Errorf("pebble: load sketches: %w", err)
	}
	s.oldestID = 1<<63 - 1
	it, err = s.db.NewIter(&pdb.IterOptions{LowerBound: []byte{prefixByTime}, UpperBound: []byte{prefixByTime + 1}})
	if err != nil {
		return err
	}
	if it.First() && len(it.Key()) >= 9 {
		s.oldestID = decodeInt(it.Key()[1:9])
	}
	return it.Close()
}

// SetDedupeWindow sets how long a request id is remembered after its
// write. It is safe to call at any time; d <= 0 restores
// shardcounter.DefaultDedupeWindow.
func (s *CounterStore) SetDedupeWindow(d time.Duration) {
	if d <= 0 {
		d = shardcounter.DefaultDedupeWindow
	}
	s.window.Store(int64(d))
}

// Close waits for the writes in flight, writes the memtable out (so that
// the next Open need not replay the log) and closes the database.
func (s *CounterStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.reads.Wait()
	s.pub.Lock()
	for len(s.queue) > 0 {
		s.cond.Wait()
	}
	n, failed := s.indexed, s.failed != nil
	s.retired, s.index = s.index, nil // unmapped with the rest below
	s.pub.Unlock()
	s.mu.Lock()
	s.unmap()
	s.mu.Unlock()
	// A hint for the next Open, and the memtable written out, so that the
	// next Open neither rehashes the map as it grows nor replays the log;
	// losing either costs time, not data.
	// After a failed commit the log is not to be written again: reopening
	// replays it.
	if failed {
		return s.db.Close()
	}
	err := s.db.Set([]byte{keyCountHint}, encodeInt(int64(n)), pdb.NoSync)
	if err == nil {
		err = s.db.Flush()
	}
	return errors.Join(err, s.db.Close())
}

// Ping checks that the store is open and has not failed a commit.
func (s *CounterStore) Ping(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.check(ctx)
}

// Dir returns the store's directory.
func (s *CounterStore) Dir() string { return s.dir }

// logger passes Pebble's errors to slog; its informational lines (every
// flush and compaction) are left out.
type logger struct{ l *slog.Logger }

func (logger) Infof(string, ...any) {}

func (l logger) Errorf(format string, args ...any) {
	l.l.Error("pebble: " + fmt.Sprintf(format, args...))
}

func (l logger) Fatalf(format string, args ...any) {
	l.l.Error("pebble: fatal: " + fmt.Sprintf(format, args...))
	os.Exit(1)
}
