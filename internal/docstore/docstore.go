// Package docstore holds what the two document stores, firestore (seed
// 000's layout, commits with preconditions) and datastore (seed 002's
// layout, transactions), share beyond their SDKs: the view a batch is
// decided on and what it decided (view.go), which request ids and members
// a batch reads and how they enter the view, and the buckets past
// retention it deletes (batch.go), the attempts of a batch with their
// backoff (retry.go) and the markers that settle a commit with no clear
// answer (marker.go), the running totals, the pace and dedupe window, the
// in-process lock stripes, the throttle of request-id expiry, the
// snapshot readings, the approx counters' sketch arithmetic, and the
// estimate of a commit's size with the split of a batch too large for one
// commit (split.go). Each store reads its records into the view and turns
// the decisions into its own writes, and keeps its own layout, DSN, error
// mapping and indexes; it embeds a Base.
//
// The rankings and the collections' metadata are written once too, over
// Records: a read and an atomic read-and-write of a named record, which
// each store adapts (records.go, collection.go).
package docstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shardcounter/shardcounter"
)

// CacheSize bounds the counters whose metadata (and, on Firestore, shard
// versions) a store remembers between batches.
const CacheSize = 100_000

// Stats are a store's running totals, exported in /metrics.
type Stats struct {
	// Conflicts counts batches that found their reads out of date at
	// commit or were aborted for contention (another writer came first),
	// and were tried again.
	Conflicts atomic.Int64
	// Commits counts commits of shard documents (entities): every shard a
	// committed batch wrote or checked counts once.
	Commits atomic.Int64
	// Resolved counts batches whose commit got no clear answer and whose
	// marker showed them applied.
	Resolved atomic.Int64

	onCommit atomic.Pointer[func(counter string, shard int)]
}

// Committed counts one commit of shard of counter, and tells the
// OnShardCommit watcher.
func (st *Stats) Committed(counter string, shard int) {
	st.Commits.Add(1)
	if f := st.onCommit.Load(); f != nil {
		(*f)(counter, shard)
	}
}

// Base is the state a document store keeps beside its client. Its
// exported methods are the store's own (embedded).
type Base struct {
	interval time.Duration
	window   atomic.Int64 // dedupe window, ns
	stats    Stats
	// Locks are the store's in-process locks (see Stripes).
	Locks Stripes

	expiryMu   sync.Mutex
	nextExpiry time.Time // no request id expires before it, as far as this process knows
}

// Init sets the pace (0 the default def, negative off) and the dedupe
// window (SetDedupeWindow).
func (b *Base) Init(interval, def, window time.Duration) {
	switch {
	case interval == 0:
		b.interval = def
	case interval > 0:
		b.interval = interval
	}
	b.SetDedupeWindow(window)
}

// Stats returns the store's running totals.
func (b *Base) Stats() *Stats { return &b.stats }

// Conflicts returns Stats().Conflicts (metrics.DocumentStore).
func (b *Base) Conflicts() int64 { return b.stats.Conflicts.Load() }

// OnShardCommit sets f to be called with each shard document a committed
// batch wrote (metrics.DocumentStore): the per-document commit counter.
func (b *Base) OnShardCommit(f func(counter string, shard int)) { b.stats.onCommit.Store(&f) }

// ShardWriteInterval is the pace the engine keeps per shard document
// (shardcounter.ShardPacer): 0 when pacing is off.
func (b *Base) ShardWriteInterval() time.Duration { return b.interval }

// TxnUnits reports that Apply keeps each transaction's increments
// (Increment.Txn) in one commit (shardcounter.TxnApplier): a batch is one
// commit, and one split for its size keeps a transaction in one part or
// refuses it whole (Split). The engine then marks a RESP MULTI's writes
// with their Txn rather than folding them with the batch's other writes.
func (b *Base) TxnUnits() bool { return true }

// SetDedupeWindow sets how long a request id is remembered; d <= 0
// restores shardcounter.DefaultDedupeWindow.
func (b *Base) SetDedupeWindow(d time.Duration) {
	if d <= 0 {
		d = shardcounter.DefaultDedupeWindow
	}
	b.window.Store(int64(d))
}

// Window is the dedupe window.
func (b *Base) Window() time.Duration { return time.Duration(b.window.Load()) }

// ExpireBatch is how many expired request ids an Apply deletes beyond the
// number it records.
const ExpireBatch = 64

// Expire runs del, the store's deletion of up to limit expired request
// ids (recorded at or before cut, oldest first) and of the expired batch
// markers among them, unless an earlier run found none left for a while.
// limit is one more than the ids del may delete: a batch marker, which
// each commit writes, is deleted beside them without counting. del
// returns how many documents its query found; when that is fewer than it
// may delete, the next batches skip the query for a sixteenth of the
// window (a minute at most).
func (b *Base) Expire(now time.Time, recorded int, del func(limit int, cut time.Time) (found int, err error)) {
	b.expiryMu.Lock()
	skip := now.Before(b.nextExpiry)
	b.expiryMu.Unlock()
	if skip {
		return
	}
	window := b.Window()
	limit := ExpireBatch + recorded + 1
	found, err := del(limit, now.Add(-window))
	if err != nil {
		return // the next batch tries again
	}
	if found < limit {
		b.expiryMu.Lock()
		b.nextExpiry = now.Add(min(window/16, time.Minute))
		b.expiryMu.Unlock()
	}
}

// Stripes are in-process locks on counters or on their shards: a batch
// holds those of what it writes from its first read to its commit, so
// that batches of one process queue instead of failing each other's
// preconditions (Firestore) or deadlocking on each other's read locks
// (the Datastore emulator, like Datastore's pessimistic concurrency,
// takes a shared lock on what a transaction reads and waits for it at
// commit). They are a courtesy, not what makes writes correct: the
// preconditions and transactions are, across processes too.
type Stripes [512]sync.Mutex

// StripeOf is the stripe of shard of counter (shard 0 for a lock on the
// whole counter).
func StripeOf(counter string, shard int) int {
	h := fnv.New32a()
	h.Write([]byte(counter))
	return int((h.Sum32() + uint32(shard)*2654435761) % uint32(len(Stripes{})))
}

// Lock locks the stripes of keys, in order, and returns their unlock.
func (st *Stripes) Lock(keys []int) func() {
	slices.Sort(keys)
	keys = slices.Compact(keys)
	for _, k := range keys {
		st[k].Lock()
	}
	return func() {
		for _, k := range keys {
			st[k].Unlock()
		}
	}
}

// LockCounters locks the stripes of the counters (their shard 0).
func (st *Stripes) LockCounters(counters ...string) func() {
	keys := make([]int, 0, len(counters))
	for _, c := range counters {
		keys = append(keys, StripeOf(c, 0))
	}
	return st.Lock(keys)
}

// ValidName reports whether s is a project, database, kind or namespace
// name: 1 to max letters, digits, '-' and '_'.
func ValidName(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// ReadError maps a failed read or an administrative failure of store
// ("firestore", "datastore"): nothing was applied.
func ReadError(store, op string, err error) error {
	var e *shardcounter.Error
	if errors.As(err, &e) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "%s: %s: %v", store, op, err)
	}
	switch status.Code(err) {
	case codes.InvalidArgument:
		return shardcounter.Errorf(shardcounter.EINVALID, "%s: %s: %v", store, op, status.Convert(err).Message())
	case codes.Internal, codes.Unknown, codes.DataLoss:
		return fmt.Errorf("%s: %s: %w", store, op, err)
	}
	return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "%s: %s: %v", store, op, err)
}

// RetryConflicts runs try, and again while its error is a conflict with
// another writer (conflict says which; it may count them): at most 40
// times more, waiting 1 ms doubling to 100 ms before each. It returns
// try's last error and whether it gave up on a conflict (the attempts or
// ctx ran out), which its caller answers as unavailable, nothing applied.
func RetryConflicts(ctx context.Context, conflict func(error) bool, try func() error) (gaveUp bool, err error) {
	pause := time.Millisecond
	for attempt := 0; ; attempt++ {
		if err = try(); err == nil || !conflict(err) {
			return false, err
		}
		if attempt == 40 || Sleep(ctx, pause) != nil {
			return true, err
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// Sleep waits d, or until ctx ends (its error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
