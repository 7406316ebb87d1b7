package engine

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/expiry"
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
	// ErrorCodes splits Errors by the failed write's error code, in the
	// order of ErrorCodes (the last, "other", for any code not listed).
	ErrorCodes [len(ErrorCodes)]atomic.Int64
	// CacheHits and CacheMisses count the counters that cached reads
	// (Config.MaxStaleness) found fresh in the cache, and those they
	// fetched, or waited for another read to fetch, from the store.
	CacheHits, CacheMisses atomic.Int64
	// RankingDeltas counts the counters ranking refreshes moved by the
	// deltas of their commits, RankingReads those they read from the
	// store instead (the seeding scans included), and RankingBlocked the
	// reads that held their counter's commits back (rankcommit.go).
	RankingDeltas  atomic.Int64
	RankingReads   atomic.Int64
	RankingBlocked atomic.Int64
	// LimitAllowed and LimitRefused count the takes of rate limits
	// decided (peeks and retries of a request id not included).
	LimitAllowed atomic.Int64
	LimitRefused atomic.Int64
	// LimitStatesRemoved counts the idle states of limit keys the
	// sweeper removed (sweep.go).
	LimitStatesRemoved atomic.Int64
	// limitTakes splits LimitAllowed and LimitRefused by limit
	// (EachLimit).
	limitTakes limitTakes
}

// ErrorCodes are the codes Stats.ErrorCodes counts failed writes by: the
// codes a write can fail with, then "other".
var ErrorCodes = [...]string{shardcounter.EUNAVAILABLE, shardcounter.EOUTCOMEUNKNOWN, shardcounter.EOUTOFRANGE,
	shardcounter.EINVALID, shardcounter.ENOTFOUND, shardcounter.EINTERNAL, "other"}

// failed counts n writes failed with err.
func (s *Stats) failed(err error, n int64) {
	s.Errors.Add(n)
	code := shardcounter.ErrorCode(err)
	for i, c := range ErrorCodes[:len(ErrorCodes)-1] {
		if c == code {
			s.ErrorCodes[i].Add(n)
			return
		}
	}
	s.ErrorCodes[len(ErrorCodes)-1].Add(n)
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
	// store is the store New was given with deadlines (package expiry):
	// the one store the engine reads and writes, whose concrete type is
	// what the deadline methods need. The optional capabilities of the
	// store beneath are found through it, with shardcounter.As.
	store *expiry.Store
	// obs hears of the store calls that change counters: Config.Observers,
	// then the rankings (observe in flush.go; the rankings in rankcommit.go).
	obs   shardcounter.CommitObserver
	cfg   Config
	stats Stats
	queue *queue
	// create holds the specs of counters created by a write; nil when
	// Config.NoAutoCreate is set.
	create *autoCreate

	lastLog    time.Time // async failures: when one was last logged
	suppressed int64     // async writes lost since, not yet logged

	limits limits // rate limits' definitions (limit.go)

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
	// txnScripts is set for a TxnApplier whose transaction step is a
	// script carrying no take and no deadline change
	// (shardcounter.TxnScripter: Redis).
	txnScripts bool
	// ranks are the rankings kept from commits (ranking.go).
	ranks *rankings
	// sweep removes idle limit states (sweep.go); nil when
	// Config.LimitSweepInterval turns it off.
	sweep *sweeper
}

var _ shardcounter.CounterService = (*Engine)(nil)

// New returns an engine over store and starts its flusher. It sets the
// store's dedupe window to cfg.DedupeWindow; when the store (or one it
// wraps: shardcounter.As) implements shardcounter.CommitPipeliner and
// cfg.MaxInFlight is 0, the store's advice replaces the default, and when
// it is a shardcounter.HotCommitPipeliner whose commits of one counter
// overlap, flushes on a hot counter run MaxInFlight at once too. It
// returns an invalid_argument error, and starts nothing, when cfg holds a
// value it cannot use (see Config).
func New(store shardcounter.CounterStore, cfg Config) (*Engine, error) {
	if p, ok := shardcounter.As[shardcounter.CommitPipeliner](store); ok && cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = p.CommitsInFlight()
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	store.SetDedupeWindow(cfg.DedupeWindow)
	e := &Engine{
		cfg:     cfg,
		cache:   newReadingCache(cfg.CacheSize, cfg.MaxReadsInFlight),
		windows: newWindowSpecs(cfg.CacheSize),
	}
	e.cache.stats = &e.stats
	e.ranks = newRankings(e)
	obs := shardcounter.Observers(slices.Clip(cfg.Observers))
	if cfg.Tracer != nil {
		// First, so that its span holds the other observers' work.
		obs = append(shardcounter.Observers{storeSpans{cfg.Tracer}}, obs...)
	}
	e.obs = append(obs, e.ranks)
	// Expiry's own deletions of expired names are commits the observers
	// hear of too: the rankings must read such a counter again.
	e.store = expiry.Wrap(store, expiry.Options{Now: cfg.Now, Refresh: cfg.ExpiryRefresh, Observer: e.obs})
	if m, ok := shardcounter.As[shardcounter.MemoryReader](store); ok && m.ReadsFromMemory() {
		e.direct = true
	}
	if t, ok := shardcounter.As[shardcounter.TxnApplier](store); ok && t.TxnUnits() {
		e.txns = true
	}
	if t, ok := shardcounter.As[shardcounter.TxnScripter](store); ok && t.TxnScripted() {
		e.txnScripts = true
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
		e.pacer = newPacer(cfg.ShardWriteInterval, e.store, cfg.CacheSize)
	}
	h, hot := shardcounter.As[shardcounter.HotCommitPipeliner](store)
	e.queue = newQueue(cfg, hot && h.PipelinesHotCommits(), &e.stats.Queued, e.flush)
	if cfg.LimitSweepInterval > 0 {
		e.startSweep(cfg.LimitSweepInterval)
	}
	return e, nil
}

// Store returns the store the engine reads and writes: the store New was
// given, with deadlines (package expiry). shardcounter.As finds through it
// what the store beneath does beyond CounterStore, as the engine does.
// Writes made through it bypass the engine's queue, rollups and rankings.
func (e *Engine) Store() shardcounter.CounterStore { return e.store }

// OverlapsHotCommits reports whether writers of one hot counter that
// wait for their commits wait beside each other's: the engine is durable
// and runs two or more flushes of one counter at once, on a store whose
// commits of one counter overlap (shardcounter.HotCommitPipeliner: Redis,
// Redis Cluster). A front end that holds one batch at a time in the
// engine then leaves that overlap unused (package resp/server serves on a
// goroutine a connection instead).
func (e *Engine) OverlapsHotCommits() bool {
	return e.cfg.Durability != Async && e.queue.narrowInFlight >= 2
}

// Stats returns the engine's running totals.
func (e *Engine) Stats() *Stats { return &e.stats }

// Ping checks that the store answers.
func (e *Engine) Ping(ctx context.Context) error { return e.store.Ping(ctx) }

// Close stops accepting writes, commits every queued write and stops the
// flusher. It does not close the store. If ctx ends first, Close returns
// its error and the flusher finishes in the background.
func (e *Engine) Close(ctx context.Context) error {
	e.stopSweep()
	e.ranks.close()
	return e.queue.close(ctx)
}
