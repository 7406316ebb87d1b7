// Package engine implements shardcounter.CounterService over any
// shardcounter.CounterStore, adding what a store alone does not give:
//
//   - Group commit. Concurrent writes are queued and one flusher folds
//     them into one Increment per counter and sign, applied with a single
//     store.Apply. A flush starts as soon as the previous one has
//     committed (or, with Config.MaxInFlight above 1, as soon as fewer
//     than that many run), so batches grow with load and a lone write
//     waits for no timer. One hot counter thus takes many writes per store
//     commit.
//   - Durable acknowledgement (Durable, the default). A write is answered
//     only after the batch holding it has committed; a failed flush returns
//     its error to exactly the writers of that batch.
//   - Async acknowledgement (Async). A write is answered once queued and
//     committed within Config.FlushInterval; a crash loses what was queued.
//   - Retry-safe writes: a write with a request id is applied at most once
//     within Config.DedupeWindow, which the engine hands to stores that
//     expire ids (shardcounter.RequestIDExpirer).
//   - Auto-create, validation, the shard-count policy, cached reads.
//
// In durable mode the engine keeps no state a crash could lose beyond the
// writes not yet acknowledged. docs/ENGINE.md describes each part.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// Defaults of Config.
const (
	DefaultShards    = 16
	DefaultMaxBatch  = 8192
	DefaultMaxQueued = 1 << 18
	// DefaultMaxInFlight is Config.MaxInFlight's default: see
	// docs/ENGINE.md for the measurements behind it.
	DefaultMaxInFlight  = 1
	DefaultMaxStaleness = time.Second
	DefaultListLimit    = 100
	MaxListLimit        = 1000
	// DefaultFlushInterval is how long, in async mode, the flusher lets a
	// batch gather before committing it: short enough that little is lost
	// on a crash, long enough that one commit carries many writes.
	DefaultFlushInterval = 10 * time.Millisecond
	// DefaultDedupeWindow is how long a request id is remembered.
	DefaultDedupeWindow = 24 * time.Hour
	// DefaultFlushTimeout bounds one commit: long enough for a full batch
	// on a loaded store, short enough that writers of a hung store hear
	// about it in seconds.
	DefaultFlushTimeout = 5 * time.Second
)

// Durability says when the engine answers a write.
type Durability string

const (
	// Durable answers a write once the batch holding it has committed, so
	// an acknowledged write survives a crash. A failed commit is the
	// error of exactly the writes of that batch.
	Durable Durability = "durable"
	// Async answers a write once it is queued. The flusher commits it
	// within Config.FlushInterval (plus the time of one commit); a crash
	// of the process loses the writes still queued, and a failed commit is
	// reported in Stats and the log, since its writers have had their
	// answer. The write result says Applied (accepted) and never
	// Duplicate: whether a request id was seen is known only at commit.
	Async Durability = "async"
)

// ParseDurability parses a durability mode as the CLI and config files
// spell it ("" means Durable).
func ParseDurability(s string) (Durability, error) {
	switch Durability(s) {
	case "", Durable:
		return Durable, nil
	case Async:
		return Async, nil
	}
	return "", shardcounter.Errorf(shardcounter.EINVALID, "durability %q is unknown: use durable or async", s)
}

// Config configures an Engine. The zero value is usable: each field's doc
// gives its default.
type Config struct {
	// DefaultShards is the shard count of counters created without one,
	// and of counters created by a write (auto-create). Default 16.
	DefaultShards int
	// NoAutoCreate makes a write to an unknown counter fail with
	// ErrNotFound instead of creating it.
	NoAutoCreate bool
	// MaxBatch bounds the writes folded into one store.Apply. Default 8192.
	MaxBatch int
	// MaxQueued bounds the writes waiting for a flush; a writer past it
	// waits for room (or its context). Default 262144.
	MaxQueued int
	// MaxInFlight bounds, in durable mode, how many flushes run at once. A
	// flush starts as soon as fewer than MaxInFlight are running, taking
	// every write queued by then; while all are running, writes gather for
	// the next. More than one lets a commit's round trips and the next
	// batch's overlap, and, on a store whose commits of different rows run
	// in parallel (PostgreSQL, Redis), lets batches on different shards
	// commit together. Async mode always runs one flush at a time, so that
	// writes commit in the order they were answered. Default
	// DefaultMaxInFlight.
	MaxInFlight int
	// MaxStaleness bounds how old a cached reading may be. Default 1s.
	MaxStaleness time.Duration
	// Policy turns CreateOptions.FollowersCount and Visibility into a shard
	// count. Default DefaultPolicy.
	Policy ShardPolicy
	// Durability says when a write is answered: Durable (the default) or
	// Async. New panics on any other value; use ParseDurability on input.
	Durability Durability
	// FlushInterval bounds, in async mode, how long a queued write waits
	// before the flusher starts committing it; the flusher gathers writes
	// for up to this long (a full batch goes at once). Durable mode never
	// waits. Default 10ms.
	FlushInterval time.Duration
	// DedupeWindow is how long a request id is remembered: a write whose
	// id was recorded less than this long ago is a duplicate. New hands it
	// to the store when the store implements shardcounter.RequestIDExpirer
	// (bolt, postgres and redis do); engines sharing one store should use
	// the same window. Default 24h.
	DedupeWindow time.Duration
	// FlushTimeout bounds each store call the flusher makes (an Apply,
	// and the CreateCounter of an auto-create). The flusher is the only
	// path from the queue to the store, so without a bound one call that
	// hangs on an unreachable store would hold every queued write, and
	// every writer, until the operating system gives up on the
	// connection. A call past the bound fails with the store's own error
	// for an expired context: unavailable when nothing can have been
	// applied, an outcome-unknown internal error when a commit was sent.
	// Default DefaultFlushTimeout.
	FlushTimeout time.Duration
	// OnFlush, when set, is called by the flusher after each store.Apply
	// with what that call carried and how it went, so a caller can keep
	// histograms of batch sizes and commit latency without the engine
	// depending on a metrics library. It runs on the goroutine of the
	// flush, before the flush's writers are answered: it must be quick and
	// must not call the engine. With MaxInFlight above 1 it may be called
	// from several flushes at once.
	OnFlush func(FlushEvent)
	// Logger receives what has no caller to return to: failed commits of
	// async writes. Default slog.Default().
	Logger *slog.Logger
	// Now returns the current time, for cached readings. Default time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() {
	if c.DefaultShards == 0 {
		c.DefaultShards = DefaultShards
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxQueued <= 0 {
		c.MaxQueued = DefaultMaxQueued
	}
	if c.MaxQueued < c.MaxBatch {
		c.MaxQueued = c.MaxBatch
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxStaleness <= 0 {
		c.MaxStaleness = DefaultMaxStaleness
	}
	if c.Policy == nil {
		c.Policy = DefaultPolicy
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Durability == "" {
		c.Durability = Durable
	}
	if c.Durability != Durable && c.Durability != Async {
		panic(fmt.Sprintf("engine: Config.Durability %q is unknown: use engine.Durable or engine.Async", c.Durability))
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.DedupeWindow <= 0 {
		c.DedupeWindow = DefaultDedupeWindow
	}
	if c.FlushTimeout <= 0 {
		c.FlushTimeout = DefaultFlushTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Durability == Async {
		c.MaxInFlight = 1
	}
}

// Stats are the engine's running totals, each an atomic counter, ready to
// export as metrics.
//
// Writes, Duplicates and Errors count writes as their commit settles them,
// in both durability modes; Flushes and Items give the mean batch size
// after folding (Items/Flushes) and FlushNanos/Flushes the mean commit
// latency.
type Stats struct {
	Writes     atomic.Int64 // writes committed as applied
	Duplicates atomic.Int64 // writes refused as duplicates of a request id
	Errors     atomic.Int64 // writes that failed: answered with an error, or (async) failed after their answer
	AsyncLost  atomic.Int64 // async writes answered as accepted whose commit then failed (also in Errors; logged)
	Flushes    atomic.Int64 // store.Apply calls made by the flusher
	Items      atomic.Int64 // increments sent to the store (after folding)
	FlushNanos atomic.Int64 // total time spent in store.Apply
	Queued     atomic.Int64 // writes waiting now
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
	store shardcounter.CounterStore
	cfg   Config
	stats Stats

	mu      sync.Mutex
	pending *batch    // collecting writes
	since   time.Time // when the first write of pending was queued
	full    []*batch  // batches that reached MaxBatch, oldest first
	closed  bool
	room    *sync.Cond // signalled when queued writes drop

	lastLog    time.Time // async failures: when one was last logged
	suppressed int64     // async writes lost since, not yet logged

	lastFlush atomic.Int64 // nanoseconds the last store commit took

	wake chan struct{} // cap 1: there is work for the flusher
	done chan struct{} // closed when the flusher has exited

	cacheMu sync.Mutex
	cache   map[string]cachedReading
}

var _ shardcounter.CounterService = (*Engine)(nil)

// call is one queued write and, after its flush, its result.
type call struct {
	w   shardcounter.Write
	res shardcounter.WriteResult
	err error
}

// batch is the writes one flush applies. done is closed once every call
// has its result.
//
// In async mode a write without a request id has nobody waiting for its
// result, so it is not kept as a call: it is added to sums at once, and
// the batch holds one running delta per counter and sign however many
// writes it takes. That makes an async write an add under a lock, with no
// allocation, and the flush's work proportional to the counters written,
// not the writes.
type batch struct {
	calls  []*call
	sums   map[sumKey]*sum
	writes int // len(calls) plus the writes in sums
	done   chan struct{}
}

type sumKey struct {
	counter string
	neg     bool
}

type sum struct {
	delta, writes int64
}

func newBatch() *batch { return &batch{done: make(chan struct{})} }

// size is the number of increments the batch will send the store, at
// most: what MaxBatch bounds.
func (b *batch) size() int { return len(b.calls) + len(b.sums) }

// New returns an engine over store and starts its flusher. When the store
// implements shardcounter.RequestIDExpirer, New sets its dedupe window to
// cfg.DedupeWindow. It panics on an unknown cfg.Durability.
func New(store shardcounter.CounterStore, cfg Config) *Engine {
	cfg.setDefaults()
	if x, ok := store.(shardcounter.RequestIDExpirer); ok {
		x.SetDedupeWindow(cfg.DedupeWindow)
	}
	e := &Engine{
		store:   store,
		cfg:     cfg,
		pending: newBatch(),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		cache:   make(map[string]cachedReading),
	}
	e.room = sync.NewCond(&e.mu)
	go e.flusher()
	return e
}

// Stats returns the engine's running totals.
func (e *Engine) Stats() *Stats { return &e.stats }

// Ping checks that the store answers.
func (e *Engine) Ping(ctx context.Context) error { return e.store.Ping(ctx) }

// Close stops accepting writes, commits every queued write and stops the
// flusher. It does not close the store. If ctx ends first, Close returns
// its error and the flusher finishes in the background.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		e.room.Broadcast()
	}
	e.mu.Unlock()
	e.signal()
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

var errClosed = shardcounter.Errorf(shardcounter.EUNAVAILABLE, "the server is shutting down: retry against another instance or after restart")

// enqueue adds c to the pending batch and returns the batch. A nil c is an
// async write without a request id, w, which joins the batch's sums.
func (e *Engine) enqueue(ctx context.Context, w shardcounter.Write, c *call) (*batch, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for !e.closed && e.stats.Queued.Load() >= int64(e.cfg.MaxQueued) {
		if ctx.Err() != nil {
			return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "write queue full and %v: nothing applied, retry", ctx.Err())
		}
		e.room.Wait()
	}
	if e.closed {
		return nil, errClosed
	}
	// The flusher waits on wake only when it found nothing queued, or (in
	// async mode) while a batch gathers; so only an empty queue that gets
	// a write, or a batch that fills up, needs to wake it.
	idle := e.pending.writes == 0 && len(e.full) == 0
	b := e.pending
	if b.writes == 0 {
		e.since = time.Now()
	}
	b.writes++
	if c == nil {
		k := sumKey{w.Counter, w.Delta < 0}
		sm := b.sums[k]
		if sm == nil {
			if b.sums == nil {
				b.sums = make(map[sumKey]*sum)
			}
			sm = new(sum)
			b.sums[k] = sm
		}
		if d, ok := overflow.Add(sm.delta, w.Delta); ok {
			sm.delta = d
			sm.writes++
		} else {
			// The running sum would leave int64: keep this write on its
			// own. (A sum the store refuses as out of range is lost whole,
			// and logged: its writes were answered when queued.)
			b.calls = append(b.calls, &call{w: w})
		}
	} else {
		b.calls = append(b.calls, c)
	}
	filled := b.size() >= e.cfg.MaxBatch
	if filled {
		e.full = append(e.full, b)
		e.pending = newBatch()
	}
	e.stats.Queued.Add(1)
	if idle || filled {
		e.signal()
	}
	return b, nil
}

// gather, in async mode, waits until the pending batch is FlushInterval
// old, a batch is full, or the engine closes. It returns at once in
// durable mode: there a flush starts as soon as the previous one ends.
func (e *Engine) gather() {
	if e.cfg.Durability != Async {
		return
	}
	e.mu.Lock()
	// A wake left from before (a write that found the queue empty while
	// the previous flush ran) must not cut this batch's gathering short.
	// Enqueue signals under e.mu, so draining here loses no signal sent
	// after the check below; Close sets closed before signalling.
	select {
	case <-e.wake:
	default:
	}
	wait := time.Duration(0)
	if !e.closed && len(e.full) == 0 && e.pending.writes > 0 {
		wait = e.cfg.FlushInterval - time.Since(e.since)
	}
	e.mu.Unlock()
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-e.wake: // a batch filled up, or Close
	}
}

// settle, in durable mode, lets the writers that the last flush just
// answered queue their next writes before the next batch is cut: it yields
// the processor for as long as the pending batch keeps growing from one
// yield to the next, up to a quarter of the last commit's duration. A
// queue that does not grow (a lone write, an idle server) ends it at once,
// so no write waits on a timer; a closed loop of writers (each sending its
// next write when the last is answered) gets one batch per commit instead
// of two half batches, which doubles what a commit carries.
func (e *Engine) settle() {
	if e.cfg.Durability == Async {
		return
	}
	limit := time.Duration(e.lastFlush.Load()) / 4
	start := time.Now()
	prev := -1
	for {
		e.mu.Lock()
		n, full := e.pending.writes, len(e.full) > 0
		e.mu.Unlock()
		if n == prev || full || time.Since(start) >= limit {
			return
		}
		prev = n
		runtime.Gosched()
	}
}

// next takes the oldest batch to flush, or nil when there is none.
func (e *Engine) next() *batch {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.full) > 0 {
		b := e.full[0]
		e.full = e.full[1:]
		return b
	}
	if e.pending.writes == 0 {
		return nil
	}
	// In async mode a batch that is not yet FlushInterval old stays to
	// gather: gather may have seen an empty queue just before the first
	// write of this batch came, and returned without waiting.
	if e.cfg.Durability == Async && !e.closed && time.Since(e.since) < e.cfg.FlushInterval {
		return nil
	}
	b := e.pending
	e.pending = newBatch()
	return b
}

// flusher takes batches and flushes them, at most cfg.MaxInFlight at a
// time. It takes a flush slot before it gathers or takes a batch, so that
// while every slot is busy the pending batch keeps growing, and with one
// slot a flush starts only once the previous one has committed.
func (e *Engine) flusher() {
	var running sync.WaitGroup
	defer close(e.done)
	defer running.Wait()
	slots := make(chan struct{}, e.cfg.MaxInFlight)
	for {
		slots <- struct{}{}
		e.settle()
		e.gather()
		if b := e.next(); b != nil {
			running.Go(func() {
				defer func() { <-slots }()
				e.flush(b)
				e.mu.Lock()
				e.stats.Queued.Add(-int64(b.writes))
				e.room.Broadcast()
				e.mu.Unlock()
				close(b.done)
			})
			continue
		}
		<-slots
		e.mu.Lock()
		closed, empty := e.closed, e.pending.writes == 0 && len(e.full) == 0
		e.mu.Unlock()
		switch {
		case closed && empty:
			// Writers enqueue only while !closed, under e.mu, so once
			// closed is seen with nothing queued, nothing more comes.
			return
		case closed || !empty:
			// A write came after next looked: take it now.
			continue
		}
		<-e.wake
	}
}

// group is the writes folded into one Increment: calls, or (from a
// batch's sums) writes that nobody waits for.
type group struct {
	inc    shardcounter.Increment
	calls  []*call
	writes int64
}

// fold turns calls into increments: writes with a request id stay alone
// (each id is recorded with its own delta); the others fold into one
// increment per counter and sign, on a random shard. Folding by sign keeps
// every partial sum on one side of zero, so a folded delta overflows only
// if its writes would have overflowed the shard in any order.
//
// It allocates per flush, not per write: groups are carved out of arrays
// of 4 doubling to 64 (a full array is replaced, never grown, so pointers into it
// stay valid), and a group of one call shares calls' own backing array.
func fold(calls []*call) []*group {
	type key struct {
		counter string
		neg     bool
	}
	var store []group
	var groups []*group
	var folded map[key]*group
	size := 4 // of the next array: 4, 8, ... 64, so a small flush allocates little
	for i, c := range calls {
		one := calls[i : i+1 : i+1] // a later append copies, leaving calls intact
		if len(store) == cap(store) {
			store = make([]group, 0, min(size, len(calls)-i))
			size = min(2*size, 64)
		}
		if c.w.RequestID != "" {
			store = append(store, group{
				inc:   shardcounter.Increment{Counter: c.w.Counter, Delta: c.w.Delta, Pick: shard.PickFor(c.w.Counter, c.w.RequestID), RequestID: c.w.RequestID},
				calls: one,
			})
			groups = append(groups, &store[len(store)-1])
			continue
		}
		k := key{c.w.Counter, c.w.Delta < 0}
		if g := folded[k]; g != nil {
			if sum, ok := overflow.Add(g.inc.Delta, c.w.Delta); ok {
				g.inc.Delta = sum
				g.calls = append(g.calls, c)
				continue
			}
		}
		store = append(store, group{inc: shardcounter.Increment{Counter: c.w.Counter, Delta: c.w.Delta, Pick: rand.Uint64()}, calls: one})
		g := &store[len(store)-1]
		if folded == nil {
			folded = make(map[key]*group)
		}
		folded[k] = g
		groups = append(groups, g)
	}
	return groups
}

// flush applies a batch and gives every call its result. Items that fail
// because their counter is missing are retried once after auto-create;
// folded items refused as out of range are retried one write at a time,
// so that only the writes that do not fit are refused.
func (e *Engine) flush(b *batch) {
	groups := fold(b.calls)
	for k, sm := range b.sums {
		groups = append(groups, &group{inc: shardcounter.Increment{Counter: k.counter, Delta: sm.delta, Pick: rand.Uint64()}, writes: sm.writes})
	}
	created := false
	for round := 0; len(groups) > 0; round++ {
		incs := make([]shardcounter.Increment, len(groups))
		writes := 0
		for i, g := range groups {
			incs[i] = g.inc
			writes += len(g.calls) + int(g.writes)
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), e.cfg.FlushTimeout)
		out, err := e.store.Apply(ctx, incs)
		cancel()
		took := time.Since(start)
		e.lastFlush.Store(int64(took))
		e.stats.FlushNanos.Add(int64(took))
		e.stats.Flushes.Add(1)
		e.stats.Items.Add(int64(len(incs)))
		if err == nil && len(out) != len(incs) {
			err = shardcounter.Errorf(shardcounter.EINTERNAL, "store returned %d outcomes for %d increments", len(out), len(incs))
		}
		if e.cfg.OnFlush != nil {
			e.cfg.OnFlush(FlushEvent{Writes: writes, Items: len(incs), Duration: took, Err: err})
		}
		var retry []*group
		var missing []string
		for i, g := range groups {
			var o shardcounter.Outcome
			if err != nil {
				o.Err = err
			} else {
				o = out[i]
			}
			switch {
			case o.Err == nil:
				e.finish(g, o.Duplicate, nil)
			case round < 2 && !created && !e.cfg.NoAutoCreate && errors.Is(o.Err, shardcounter.ErrNotFound):
				missing = append(missing, g.inc.Counter)
				retry = append(retry, g)
			case round < 2 && len(g.calls) > 1 && errors.Is(o.Err, shardcounter.ErrOutOfRange):
				for _, c := range g.calls {
					retry = append(retry, &group{inc: shardcounter.Increment{Counter: c.w.Counter, Delta: c.w.Delta, Pick: rand.Uint64()}, calls: []*call{c}})
				}
			default:
				e.finish(g, false, o.Err)
			}
		}
		for _, id := range missing {
			ctx, cancel := context.WithTimeout(context.Background(), e.cfg.FlushTimeout)
			_, err := e.store.CreateCounter(ctx, id, shardcounter.Spec{Shards: e.cfg.DefaultShards})
			cancel()
			if err != nil && !errors.Is(err, shardcounter.ErrExists) {
				for _, g := range retry {
					if g.inc.Counter == id {
						g.inc.Delta = 0 // marks the group as failed below
						e.finish(g, false, err)
					}
				}
			}
		}
		created = created || len(missing) > 0
		groups = groups[:0]
		for _, g := range retry {
			if g.inc.Delta != 0 {
				groups = append(groups, g)
			}
		}
	}
}

func (e *Engine) finish(g *group, duplicate bool, err error) {
	for _, c := range g.calls {
		c.res = shardcounter.WriteResult{Counter: c.w.Counter, Applied: err == nil && !duplicate, Duplicate: duplicate}
		c.err = err
		switch {
		case err != nil:
			e.stats.Errors.Add(1)
		case duplicate:
			e.stats.Duplicates.Add(1)
		default:
			e.stats.Writes.Add(1)
		}
	}
	switch {
	case g.writes == 0:
	case err != nil:
		e.stats.Errors.Add(g.writes)
	default:
		e.stats.Writes.Add(g.writes)
	}
	if err != nil && e.cfg.Durability == Async {
		e.lost(int64(len(g.calls))+g.writes, g.inc.Counter, err)
	}
}

// asyncLogEvery bounds how often lost async writes are logged, so that a
// store outage under load gives a line a second, not one per flush.
const asyncLogEvery = time.Second

// lost records async writes whose commit failed after they were answered:
// nobody is waiting for their error, so it goes to Stats and the log. Only
// the flusher calls it.
func (e *Engine) lost(n int64, counter string, err error) {
	e.stats.AsyncLost.Add(n)
	e.suppressed += n
	now := time.Now()
	if now.Sub(e.lastLog) < asyncLogEvery {
		return
	}
	e.cfg.Logger.Error("async writes failed to commit after they were acknowledged",
		"writes", e.suppressed, "counter", counter, "error", err,
		"outcome_unknown", shardcounter.IsOutcomeUnknown(err))
	e.lastLog, e.suppressed = now, 0
}

// WriteCounter queues the write and answers once it has committed, or in
// async mode once it is queued (Applied true: accepted).
func (e *Engine) WriteCounter(ctx context.Context, w shardcounter.Write) (*shardcounter.WriteResult, error) {
	if err := shardcounter.ValidateWrite(w); err != nil {
		return nil, err
	}
	if e.cfg.Durability == Async {
		var c *call // nobody waits for the result: let the batch sum it
		if w.RequestID != "" {
			c = &call{w: w}
		}
		if _, err := e.enqueue(ctx, w, c); err != nil {
			return nil, err
		}
		return &shardcounter.WriteResult{Counter: w.Counter, Applied: true}, nil
	}
	c := &call{w: w}
	b, err := e.enqueue(ctx, w, c)
	if err != nil {
		return nil, err
	}
	if err := wait(ctx, b); err != nil {
		return nil, err
	}
	if c.err != nil {
		return nil, c.err
	}
	return &c.res, nil
}

// WriteBatch validates every write, queues them all and answers once they
// have committed (in async mode, once queued). Writes of one call may be
// split over consecutive flushes; a failure of one write does not fail the
// others.
func (e *Engine) WriteBatch(ctx context.Context, ws []shardcounter.Write) ([]shardcounter.WriteResult, error) {
	for i, w := range ws {
		if err := shardcounter.ValidateWrite(w); err != nil {
			var se *shardcounter.Error
			errors.As(err, &se)
			return nil, shardcounter.Errorf(se.Code, "write %d: %s", i, se.Message)
		}
	}
	calls := make([]*call, len(ws))
	batches := make([]*batch, 0, 1)
	queued := len(ws) // writes before this index are queued
	for i, w := range ws {
		calls[i] = &call{w: w}
		b, err := e.enqueue(ctx, w, calls[i])
		if err != nil {
			if i == 0 {
				return nil, err
			}
			// Earlier writes are queued and will apply; say so per item.
			queued = i
			for j := i; j < len(ws); j++ {
				calls[j].res = shardcounter.WriteResult{Counter: ws[j].Counter}
				calls[j].err = err
			}
			break
		}
		if len(batches) == 0 || batches[len(batches)-1] != b {
			batches = append(batches, b)
		}
	}
	if e.cfg.Durability == Async {
		// The flusher owns the queued calls now: read only what this
		// goroutine wrote.
		res := make([]shardcounter.WriteResult, len(ws))
		for i, w := range ws {
			res[i] = shardcounter.WriteResult{Counter: w.Counter, Applied: i < queued}
			if i >= queued {
				res[i].Error = asError(calls[i].err)
			}
		}
		return res, nil
	}
	for _, b := range batches {
		if err := wait(ctx, b); err != nil {
			return nil, err
		}
	}
	res := make([]shardcounter.WriteResult, len(ws))
	for i, c := range calls {
		res[i] = c.res
		if c.err != nil {
			res[i] = shardcounter.WriteResult{Counter: c.w.Counter, Error: asError(c.err)}
		}
	}
	return res, nil
}

// wait waits for b's flush. A caller that stops waiting cannot know
// whether its write was applied.
func wait(ctx context.Context, b *batch) error {
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		// Not EUNAVAILABLE: that code promises nothing was applied.
		return &shardcounter.Error{Code: shardcounter.EINTERNAL, Message: "gave up waiting for the commit (" + ctx.Err().Error() + "): the write may still apply; retry with the same request id", OutcomeUnknown: true}
	}
}

func asError(err error) *shardcounter.Error {
	var se *shardcounter.Error
	if errors.As(err, &se) {
		return se
	}
	return &shardcounter.Error{Code: shardcounter.EINTERNAL, Message: "internal error"}
}
