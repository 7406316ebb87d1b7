package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/shardcounter/shardcounter"
)

// cachedReading is the engine's rollup of one counter: a strong reading
// and when it was taken (before the read began, so that the reading holds
// every write acknowledged before that moment).
type cachedReading struct {
	r     shardcounter.Reading
	taken time.Time
}

// readingCache keeps the rollups of the counters read most recently, at
// most Config.CacheSize of them, and collapses concurrent fetches of one
// counter into one store read, the way groupcache's lru and singleflight
// do. Unlike singleflight it collapses per counter within batches too: a
// batch read waits for the counters another call is already fetching and
// queues the rest.
//
// Queued counters are fetched by at most maxFetches store calls at once
// (readSlots), each taking every counter queued (up to MaxReadBatch) when
// it starts, the way the write engine's flusher gathers writes: while the
// store is busy, the misses of many concurrent reads pile up and go in one
// call.
// A timeline read misses a few cold counters; a store call costs a round
// trip and a statement whatever its size, so one call for the misses of
// sixty readers costs little more than one for the misses of one. It is
// safe for concurrent use.
type readingCache struct {
	mu      sync.Mutex
	lru     *simplelru.LRU[string, cachedReading]
	flights map[string]*flight
	slots   readSlots
	queue   []string // counters whose flights wait for a store call
	stats   *Stats   // counts hits and misses; nil counts nothing
}

// flight is one counter's fetch, queued or in progress. done is closed
// once r and err are set (settled, under the cache's lock); r nil and err nil mean the counter does not
// exist.
type flight struct {
	done    chan struct{}
	r       *cachedReading
	err     error
	settled bool // r and err are set; done is closed or about to be
}

// fetchFunc reads ids from the store, one reading per id in order, nil
// for a counter that does not exist.
type fetchFunc func(ctx context.Context, ids []string) ([]*shardcounter.Reading, error)

func newReadingCache(size, maxFetches int) *readingCache {
	lru, err := simplelru.NewLRU[string, cachedReading](size, nil)
	if err != nil {
		panic(err) // size is checked by Config.withDefaults
	}
	return &readingCache{lru: lru, flights: make(map[string]*flight), slots: newReadSlots(maxFetches)}
}

// put keeps cr as id's rollup unless the cache holds a newer one.
func (c *readingCache) put(cr cachedReading) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(cr)
}

func (c *readingCache) putLocked(cr cachedReading) {
	if old, ok := c.lru.Peek(cr.r.ID); ok && old.taken.After(cr.taken) {
		return
	}
	c.lru.Add(cr.r.ID, cr)
}

// forget drops id's rollup.
func (c *readingCache) forget(id string) {
	c.mu.Lock()
	c.lru.Remove(id)
	c.mu.Unlock()
}

// cacheResult is one counter of a read: its rollup, or its error
// (ErrNotFound for a counter that does not exist).
type cacheResult struct {
	cr  cachedReading
	err error
}

// read returns the rollups of ids taken after oldest: those the cache
// holds, and the others once fetched, by this call or another, each with
// now() read before its store call began. A store call's error is the
// result of every counter it was fetching.
func (c *readingCache) read(ctx context.Context, ids []string, oldest time.Time, now func() time.Time, fetch fetchFunc) []cacheResult {
	res := make([]cacheResult, len(ids))
	var waits []int    // indexes of ids whose result comes from a flight
	var from []*flight // the flight of each
	c.mu.Lock()
	for i, id := range ids {
		if cr, ok := c.lru.Get(id); ok && cr.taken.After(oldest) {
			res[i].cr = cr
			continue
		}
		f := c.flights[id]
		if f == nil {
			f = &flight{done: make(chan struct{})}
			c.flights[id] = f
			c.queue = append(c.queue, id)
		}
		waits = append(waits, i)
		from = append(from, f)
	}
	c.mu.Unlock()
	if c.stats != nil {
		c.stats.CacheHits.Add(int64(len(ids) - len(waits)))
		c.stats.CacheMisses.Add(int64(len(waits)))
	}
	if len(waits) == 0 {
		return res
	}
	c.fetchQueued(ctx, from, now, fetch)

	for k, i := range waits {
		f := from[k]
		select {
		case <-f.done:
		case <-ctx.Done():
			res[i].err = shardcounter.Errorf(shardcounter.EUNAVAILABLE, "gave up waiting for the store: %v", ctx.Err())
			continue
		}
		switch {
		case f.err != nil:
			res[i].err = f.err
		case f.r == nil:
			res[i].err = shardcounter.CounterNotFound(ids[i])
		default:
			res[i].cr = *f.r
		}
	}
	return res
}

// fetchQueued waits until the caller's flights are settled, making store
// calls for the queued counters, whoever queued them, whenever there are
// some and a call may start. It returns early when ctx ends.
func (c *readingCache) fetchQueued(ctx context.Context, mine []*flight, now func() time.Time, fetch fetchFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for !allSettled(mine) && ctx.Err() == nil {
		if len(c.queue) == 0 || !c.slots.free() {
			// What this caller waits for is in a call in progress, or
			// queued behind the calls in progress.
			c.slots.wait(ctx, &c.mu)
			continue
		}
		c.slots.take()
		ids := c.queue[:min(len(c.queue), shardcounter.MaxReadBatch)]
		c.queue = slices.Clone(c.queue[len(ids):])
		c.mu.Unlock()

		taken := now()
		rs, err := fetch(ctx, ids)
		if err == nil && len(rs) != len(ids) {
			err = shardcounter.Errorf(shardcounter.EINTERNAL, "store returned %d readings for %d counters", len(rs), len(ids))
		}
		c.mu.Lock()
		if err != nil && ctx.Err() != nil {
			// This caller gave up, not the store: the others waiting
			// for these counters fetch them.
			c.queue = append(c.queue, ids...)
		} else {
			for k, id := range ids {
				f := c.flights[id]
				switch {
				case err != nil:
					f.err = err
				case rs[k] != nil:
					f.r = &cachedReading{r: *rs[k], taken: taken}
					c.putLocked(*f.r)
				}
				f.settled = true
				delete(c.flights, id)
				close(f.done)
			}
		}
		c.slots.release()
	}
}

// allSettled reports whether every flight is settled. Call it with c.mu
// held.
func allSettled(fs []*flight) bool {
	for _, f := range fs {
		if !f.settled {
			return false
		}
	}
	return true
}
