package engine

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
)

// queue is the group-commit queue, the engine's counterpart of bbolt's
// DB.Batch: writers add their writes to the pending batch, and one loop
// cuts batches and hands each to flush, at most limit() at a time. It
// decides when a batch is cut and how many run; what a batch holds
// (batch.go) and how it is applied (flush.go) are not its business.
type queue struct {
	maxBatch    int // increments a batch may send before it is cut
	maxQueued   int // writes that may wait; past it, add waits for room
	maxInFlight int // batches flushing at once, after a broad flush
	// narrowInFlight is the batches flushing at once after a narrow
	// flush: 1, or maxInFlight on a store whose commits of one counter
	// overlap (limit).
	narrowInFlight int
	// gatherFor is how long a batch gathers before it is cut: the flush
	// interval in async mode, 0 in durable mode, where instead the loop
	// yields while the queue grows.
	gatherFor time.Duration
	flush     func(*batch) int // applies a batch, gives every call its result, returns the increments it sent
	queued    *atomic.Int64    // writes waiting (Stats.Queued)

	mu      sync.Mutex
	pending *batch    // collecting writes
	since   time.Time // when the first write of pending was queued
	full    []*batch  // batches that reached maxBatch, oldest first
	closed  bool
	room    chan struct{} // closed, and replaced, when queued writes drop or the queue closes

	lastFlush atomic.Int64 // nanoseconds the last flush took
	lastItems atomic.Int64 // increments the last flush sent

	wake chan struct{} // cap 1: there is work for the loop
	done chan struct{} // closed when the loop has exited
}

// newQueue returns a queue that flushes its batches with flush. hot says
// that the store's commits of one counter overlap
// (shardcounter.HotCommitPipeliner), so that narrow flushes may run
// MaxInFlight at once too.
func newQueue(cfg Config, hot bool, queued *atomic.Int64, flush func(*batch) int) *queue {
	q := &queue{
		maxBatch:       cfg.MaxBatch,
		maxQueued:      cfg.MaxQueued,
		maxInFlight:    cfg.MaxInFlight,
		narrowInFlight: 1,
		flush:          flush,
		queued:         queued,
		pending:        newBatch(),
		room:           make(chan struct{}),
		wake:           make(chan struct{}, 1),
		done:           make(chan struct{}),
	}
	if hot {
		q.narrowInFlight = cfg.MaxInFlight
	}
	if cfg.Durability == Async {
		q.gatherFor = cfg.FlushInterval
	}
	go q.loop()
	return q
}

var errClosed = shardcounter.Errorf(shardcounter.EUNAVAILABLE, "the server is shutting down: retry against another instance or after restart")

// add adds write w to the pending batch and returns the batch. c is w's
// call, or nil for an async write nobody waits for (batch.add).
func (q *queue) add(ctx context.Context, w shardcounter.Write, c *call) (*batch, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.addLocked(ctx, w, c)
}

// addAll adds ws, with their calls, in order, setting the batch of each in
// batches. It holds q.mu from one write to the next, so the loop cannot
// cut a batch between them: the writes of one WriteBatch (a pipeline of
// RESP commands) share one commit, unless they fill a batch or wait for
// room in the queue. A run of writes joined by Write.JoinNext (a RESP
// transaction) is never cut: it waits for room for all of it, starts a
// new batch when the pending one cannot take all of it, and goes whole
// into one batch, past MaxBatch if it is longer. It returns how many it
// queued: all, or those before the run that failed with err.
func (q *queue) addAll(ctx context.Context, ws []shardcounter.Write, calls []*call, batches []*batch) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := 0; i < len(ws); {
		j := i + 1
		for j < len(ws) && ws[j-1].JoinNext {
			j++
		}
		if err := q.waitForRoom(ctx, j-i); err != nil {
			return i, err
		}
		if n := q.pending.size(); j-i > 1 && n > 0 && n+(j-i) > q.maxBatch {
			q.cut()
		}
		for k := i; k < j; k++ {
			batches[k] = q.addOne(ws[k], calls[k], k == j-1)
		}
		i = j
	}
	return len(ws), nil
}

// addLocked is add with q.mu held; it releases it while it waits for room.
func (q *queue) addLocked(ctx context.Context, w shardcounter.Write, c *call) (*batch, error) {
	if err := q.waitForRoom(ctx, 1); err != nil {
		return nil, err
	}
	return q.addOne(w, c, true), nil
}

// waitForRoom waits, with q.mu held but released while it waits, until n
// more writes may queue: MaxQueued leaves room for them, or the queue is
// empty (a run longer than MaxQueued goes alone). It fails when ctx ends
// first or the queue is closed.
func (q *queue) waitForRoom(ctx context.Context, n int) error {
	for !q.closed {
		queued := q.queued.Load()
		if queued+int64(n) <= int64(q.maxQueued) || queued == 0 {
			break
		}
		room := q.room
		q.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			q.mu.Lock()
			return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "write queue full until %v: nothing applied, retry", ctx.Err())
		}
		q.mu.Lock()
	}
	if q.closed {
		return errClosed
	}
	return nil
}

// addOne adds w to the pending batch and returns the batch; mayCut false
// keeps the batch pending even when full, for the next write of a joined
// run. q.mu is held.
func (q *queue) addOne(w shardcounter.Write, c *call, mayCut bool) *batch {
	// The loop waits on wake only when it found nothing queued, or (in
	// async mode) while a batch gathers; so only an empty queue that gets
	// a write, or a batch that fills up, needs to wake it.
	idle := q.pending.writes == 0 && len(q.full) == 0
	b := q.pending
	if b.writes == 0 {
		q.since = time.Now()
	}
	b.add(w, c)
	q.queued.Add(1)
	filled := mayCut && b.size() >= q.maxBatch
	if filled {
		q.cut()
	}
	if idle || filled {
		q.signal()
	}
	return b
}

// cut ends the pending batch: it waits in full for the loop to flush it,
// and a new one collects writes. q.mu is held.
func (q *queue) cut() {
	q.full = append(q.full, q.pending)
	q.pending = newBatch()
	q.signal()
}

// makeRoom wakes the writers waiting for room. q.mu is held.
func (q *queue) makeRoom() {
	close(q.room)
	q.room = make(chan struct{})
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// close stops add from queuing and waits until every queued batch has
// been flushed, or ctx ends.
func (q *queue) close(ctx context.Context) error {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		q.makeRoom()
	}
	q.mu.Unlock()
	q.signal()
	select {
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitToGather, in async mode, waits until the pending batch is gatherFor
// old, a batch is full, or the queue closes. It returns at once in
// durable mode: there a flush starts as soon as the previous one ends.
func (q *queue) waitToGather() {
	if q.gatherFor == 0 {
		return
	}
	q.mu.Lock()
	// A wake left from before (a write that found the queue empty while
	// the previous flush ran) must not cut this batch's gathering short.
	// add signals under q.mu, so draining here loses no signal sent after
	// the check below; close sets closed before signalling.
	select {
	case <-q.wake:
	default:
	}
	wait := time.Duration(0)
	if !q.closed && len(q.full) == 0 && q.pending.writes > 0 {
		wait = q.gatherFor - time.Since(q.since)
	}
	q.mu.Unlock()
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-q.wake: // a batch filled up, or close
	}
}

// yieldWhileGrowing, in durable mode, lets the writers that the last flush
// just answered queue their next writes before the next batch is cut: it
// yields the processor for as long as the pending batch keeps growing from
// one yield to the next, up to a quarter of the last flush's duration. A
// queue that does not grow (a lone write, an idle server) ends it at once,
// so no write waits on a timer; a closed loop of writers (each sending its
// next write when the last is answered) gets one batch per commit instead
// of two half batches.
func (q *queue) yieldWhileGrowing() {
	if q.gatherFor != 0 {
		return
	}
	limit := time.Duration(q.lastFlush.Load()) / 4
	start := time.Now()
	prev := -1
	for {
		q.mu.Lock()
		n, full := q.pending.writes, len(q.full) > 0
		q.mu.Unlock()
		if n == prev || full || time.Since(start) >= limit {
			return
		}
		prev = n
		runtime.Gosched()
	}
}

// next takes the oldest batch to flush, or nil when there is none.
func (q *queue) next() *batch {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.full) > 0 {
		b := q.full[0]
		q.full = q.full[1:]
		return b
	}
	if q.pending.writes == 0 {
		return nil
	}
	// In async mode a batch that is not yet gatherFor old stays to gather:
	// waitToGather may have seen an empty queue just before the first
	// write of this batch came, and returned without waiting.
	if q.gatherFor != 0 && !q.closed && time.Since(q.since) < q.gatherFor {
		return nil
	}
	b := q.pending
	q.pending = newBatch()
	return b
}

// loop takes batches and flushes them, at most limit() at a time. It
// waits for a free flush slot before it gathers or takes a batch, so that
// while every slot is busy the pending batch keeps growing, and with one
// slot a flush starts only once the previous one has committed.
//
// In durable mode a flush that has run for stalledFlush (a store settling
// a lost commit answer, or not answering) gets one more flush beside it,
// so that the writes behind it hear the store's own answer (unavailable,
// within a second of an outage) instead of waiting for the stalled one.
func (q *queue) loop() {
	defer close(q.done)
	finished := make(chan struct{}, q.maxInFlight+1)
	inFlight := 0
	var newest time.Time // start of the newest flush running
	for {
		for inFlight >= q.limit() && !(inFlight == q.limit() && q.stalled(newest)) {
			select {
			case <-finished:
				inFlight--
			case <-time.After(stalledFlush / 4):
			}
		}
		q.yieldWhileGrowing()
		q.waitToGather()
		if b := q.next(); b != nil {
			inFlight++
			newest = time.Now()
			go func() {
				start := time.Now()
				q.lastItems.Store(int64(q.flush(b)))
				q.lastFlush.Store(int64(time.Since(start)))
				q.mu.Lock()
				q.queued.Add(-int64(b.writes))
				q.makeRoom()
				q.mu.Unlock()
				close(b.done)
				finished <- struct{}{}
			}()
			continue
		}
		q.mu.Lock()
		closed, empty := q.closed, q.pending.writes == 0 && len(q.full) == 0
		q.mu.Unlock()
		switch {
		case closed && empty:
			// Writers add only while !closed, under q.mu, so once closed
			// is seen with nothing queued, nothing more comes.
			for ; inFlight > 0; inFlight-- {
				<-finished
			}
			return
		case closed || !empty:
			// A write came after next looked: take it now.
			continue
		}
		select {
		case <-q.wake:
		case <-finished:
			inFlight--
		}
	}
}

// stalledFlush is how long a flush runs before the loop starts one more
// beside it (see loop).
const stalledFlush = 250 * time.Millisecond

// stalled reports whether the newest running flush, started at newest,
// has run for stalledFlush, in durable mode (async mode keeps the order
// of its flushes).
func (q *queue) stalled(newest time.Time) bool {
	return q.gatherFor == 0 && !newest.IsZero() && time.Since(newest) >= stalledFlush
}

// broadFlush is the number of increments from which a flush counts as
// broad: one whose cost is its rows (many counters) rather than the commit
// of one hot row.
const broadFlush = 16

// limit is how many flushes may run at once: maxInFlight while the last
// flush was broad, else narrowInFlight. Concurrent commits pay off when
// each commit's cost grows with the distinct rows in it and two batches
// rarely share a row (many counters); on one hot counter the second commit
// only queues for the first one's row lock, carrying fewer writes, so
// narrow flushes run one at a time (docs/DESIGN.md, "Flushes in flight").
// A store that locks nothing across its commits (Redis: each commit is
// atomic scripts on the masters, which run them in the order they come
// and sync those of one pass of the event loop together) runs the next
// commit of a hot counter beside the one before instead of after its
// round trip and sync: there narrowInFlight is maxInFlight.
//
// Flushes that overlap are independent: each answers only its own writes,
// after its own commit; lastItems and lastFlush hold whichever ended last.
func (q *queue) limit() int {
	if q.lastItems.Load() >= broadFlush {
		return q.maxInFlight
	}
	return q.narrowInFlight
}
