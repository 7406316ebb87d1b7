package http

import (
	"context"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxBodyTotal bounds the bytes of request bodies held at once,
// across all requests: 64 MiB, the bodies of 64 requests of the default
// --max-body, or of some 16,000 ordinary ones (4 KiB each).
const DefaultMaxBodyTotal = 64 << 20

// bodyBudget is a semaphore on bytes: every request body the server holds
// takes its size from it first, as its bytes arrive, and what decoding it
// will hold (decodedSize) once it is in, and gives both back once the
// handler is done with it, so the bodies in memory and their decoded
// forms never sum to more than the limit, however many clients send at
// once. A body that finds no room waits for it up to QueueWait (bodies
// still arriving are refused meanwhile, handlers finish), and is then
// refused (503 with Retry-After), its unread bytes dropped.
//
// golang.org/x/sync/semaphore's Weighted would take and give the bytes
// too, but not tell how many are taken, which the metrics and the return
// of memory after a load need; an atomic counter does all three.
type bodyBudget struct {
	limit int64
	used  atomic.Int64

	// After a load, the runtime keeps the memory the bodies took until its
	// next collection, which an idle server does not run for two minutes,
	// and then returns it to the system slowly. So once the bytes in
	// flight fall back to zero after a peak of at least a quarter of the
	// limit, the budget asks the runtime to return its free memory
	// (debug.FreeOSMemory), after a second without new bodies and at most
	// once every 10 seconds.
	mu       sync.Mutex
	peak     int64
	waiting  atomic.Int32  // takers in takeWait
	freed    chan struct{} // closed, and replaced, when bytes come back while some wait
	timer    *time.Timer
	lastFree time.Time
	freeOS   func() // debug.FreeOSMemory; tests count its calls
}

// releaseQuiet is how long the budget waits after a load for no new body
// before it returns memory; releaseEvery bounds how often it does.
const (
	releaseQuiet = time.Second
	releaseEvery = 10 * time.Second
)

func newBodyBudget(limit int64) *bodyBudget {
	return &bodyBudget{limit: limit, freeOS: debug.FreeOSMemory}
}

// take takes n bytes, and reports false, taking nothing, when that would
// hold more than the limit.
func (b *bodyBudget) take(n int64) bool {
	if n <= 0 {
		return true
	}
	u := b.used.Add(n)
	if u > b.limit {
		b.used.Add(-n)
		return false
	}
	if u > b.limit/4 {
		b.mu.Lock()
		b.peak = max(b.peak, u)
		b.mu.Unlock()
	}
	return true
}

// takeWait takes n bytes as take does, but when there is no room waits
// up to wait for bytes to come back, until ctx is done.
func (b *bodyBudget) takeWait(ctx context.Context, n int64, wait time.Duration) bool {
	if b.take(n) {
		return true
	}
	if wait <= 0 {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	b.waiting.Add(1)
	defer b.waiting.Add(-1)
	for {
		b.mu.Lock()
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		if b.take(n) { // after freed is known: a give from now on closes it
			return true
		}
		select {
		case <-freed:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// give gives back n bytes taken.
func (b *bodyBudget) give(n int64) {
	if n <= 0 {
		return
	}
	left := b.used.Add(-n)
	if b.waiting.Load() > 0 {
		b.mu.Lock()
		if b.freed != nil {
			close(b.freed)
			b.freed = nil
		}
		b.mu.Unlock()
	}
	if left != 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.peak == 0 {
		return
	}
	if b.timer == nil {
		b.timer = time.AfterFunc(releaseQuiet, b.release)
	} else {
		b.timer.Reset(releaseQuiet)
	}
}

// release returns free memory to the system after a load, unless bodies
// are in flight again or it did so within releaseEvery.
func (b *bodyBudget) release() {
	b.mu.Lock()
	if b.used.Load() != 0 || b.peak == 0 {
		b.mu.Unlock()
		return
	}
	if wait := releaseEvery - time.Since(b.lastFree); wait > 0 {
		b.timer.Reset(wait)
		b.mu.Unlock()
		return
	}
	b.peak, b.lastFree = 0, time.Now()
	b.mu.Unlock()
	b.freeOS()
}

// InFlight returns the bytes of request bodies held now.
func (b *bodyBudget) InFlight() int64 { return b.used.Load() }
