package engine

import (
	"context"
	"github.com/shardcounter/shardcounter/expiry"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
)

// Stats are the engine's running totals, each an atomic counter, ready to
// export as metrics.
//
// Writes, Duplicates and Errors count writes once their commit has decided
// them, in both durability modes; Flushes and Items give the mean batch
// size after folding (Items/Flushes) and FlushNanos/Flushes the mean
// commit latency.
type Stats struct {
	Writes     atomic.Int64 // writes committed as applied
	Duplicates atomic.Int64 // writes refused as duplicates of a request id
	Errors     atomic.Int64 // writes that failed: answered with an error, or (async) failed after their answer
	AsyncLost  atomic.Int64 // async writes answered as accepted whose commit then failed (also in Errors; logged)
	Flushes    atomic.Int64 // store.Apply calls made by the flusher
	Items      atomic.Int64 // increments sent to the store (after folding)
	FlushNanos atomic.Int64 // total time spent in store.Apply
	Queued     atomic.Int64 // writes waiting now
	// PaceWaitNanos is the time flushes waited for a shard to be due
	// (Config.ShardWriteInterval).
	PaceWaitNanos atomic.Int64
	// RankingDeltas counts the counters ranking refreshes moved by the
	// deltas of their commits, RankingReads those they read from the
	// store instead (the seeding scans included), and RankingBlocked the
	// reads that held their counter's commits back (rankcommit.go).
	RankingDeltas  atomic.Int64
	RankingReads   atomic.Int64
	RankingBlocked atomic.Int64
}

// FlushEvent describes one store.Apply made by the flusher, for
// Config.OnFlush.
type FlushEvent struct {
	// Writes is the number of client writes the call carried: what one
	// commit absorbed, the measure of group commit at work.
	Writes int
	// Items is the number of increments sent, after folding.
	Items int
	// Duration is the time spent in store.Apply.
	Duration time.Duration
	// Err is the error of the whole call (nothing applied, or the outcome
	// unknown), nil when the store answered; items that failed on their
	// own are not counted here.
	Err error
}

// Engine is a shardcounter.CounterService over a store. It is safe for
// concurrent use. Close it to commit queued writes.
type Engine struct {
	store shardcounter.CounterStore // expiry over the store New was given
	// expiry is store: the store with deadlines (Expirer's methods).
	expiry *expiry.Store
	// raw is the store New was given, for the optional interfaces it
	// implements (RankingStore...), which the expiry wrapper does not.
	raw   shardcounter.CounterStore
	cfg   Config
	stats Stats
	queue *queue
	// create holds the specs of counters created by a write; nil when
	// Config.NoAutoCreate is set.
	create *autoCreate

	lastLog    time.Time // async failures: when one was last logged
	suppressed int64     // async writes lost since, not yet logged

	cache *readingCache
	// strong gathers strong reads into store reads.
	strong *strongReads
	// windows are the windows of counters read recently (ReadWindow,
	// ReadSeries).
	windows *windowSpecs
	// pacer spaces commits per shard (Config.ShardWriteInterval); nil
	// when pacing is off.
	pacer *pacer
	// direct is set for a store that reads from memory
	// (shardcounter.MemoryReader): reads go to it without gathering or
	// rollups.
	direct bool
	// txns is set for a store that applies a transaction's increments as
	// a unit of their own (shardcounter.TxnApplier): fold marks them so.
	txns bool
	// ranks are the rankings kept from commits (ranking.go).
	ranks *rankings
}

var _ shardcounter.CounterService = (*Engine)(nil)

// New returns an engine over store and starts its flusher. When the store
// implements shardcounter.RequestIDExpirer, New sets its dedupe window to
// cfg.DedupeWindow; when it implements shardcounter.CommitPipeliner and
// cfg.MaxInFlight is 0, the store's advice replaces the default. It returns an invalid_argument error, and starts
// nothing, when cfg holds a value it cannot use (see Config).
func New(store shardcounter.CounterStore, cfg Config) (*Engine, error) {
	if p, ok := store.(shardcounter.CommitPipeliner); ok && cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = p.CommitsInFlight()
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if x, ok := store.(shardcounter.RequestIDExpirer); ok {
		x.SetDedupeWindow(cfg.DedupeWindow)
	}
	var e *Engine
	// The rankings hear of every delete, also the wrapper's own purges.
	notice := deleteNotice{CounterStore: store, ranks: func() *rankings { return e.ranks }}
	x := expiry.Wrap(notice, expiry.Options{Now: cfg.Now, Refresh: cfg.ExpiryRefresh})
	e = &Engine{
		store:   x,
		expiry:  x,
		raw:     store,
		cfg:     cfg,
		cache:   newReadingCache(cfg.CacheSize, cfg.MaxReadsInFlight),
		windows: newWindowSpecs(cfg.CacheSize),
	}
	if m, ok := store.(shardcounter.MemoryReader); ok && m.ReadsFromMemory() {
		e.direct = true
	}
	if t, ok := store.(shardcounter.TxnApplier); ok && t.TxnUnits() {
		e.txns = true
	}
	if e.cfg.ApproxShards == 0 {
		e.cfg.ApproxShards = e.cfg.DefaultShards
		if e.direct {
			e.cfg.ApproxShards = 1
		}
	}
	e.strong = newStrongReads(cfg.MaxReadsInFlight, cfg.Now, e.fetch, e.cache.put)
	if !cfg.NoAutoCreate {
		e.create = newAutoCreate(cfg.DefaultShards, e.cfg.ApproxShards)
	}
	if cfg.ShardWriteInterval > 0 {
		e.pacer = newPacer(cfg.ShardWriteInterval, store, cfg.CacheSize)
	}
	e.ranks = newRankings(e)
	e.queue = newQueue(cfg, &e.stats.Queued, e.flush)
	return e, nil
}

// Stats returns the engine's running totals.
func (e *Engine) Stats() *Stats { return &e.stats }

// Ping checks that the store answers.
func (e *Engine) Ping(ctx context.Context) error { return e.store.Ping(ctx) }

// Close stops accepting writes, commits every queued write and stops the
// flusher. It does not close the store. If ctx ends first, Close returns
// its error and the flusher finishes in the background.
func (e *Engine) Close(ctx context.Context) error {
	e.ranks.close()
	return e.queue.close(ctx)
}
