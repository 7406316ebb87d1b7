package engine

import (
	"context"
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
// fetches the rest itself, in one store call. It is safe for concurrent
// use.
type readingCache struct {
	mu      sync.Mutex
	lru     *simplelru.LRU[string, cachedReading]
	flights map[string]*flight
}

// flight is one counter's fetch in progress. done is closed once r and err
// are set; r nil and err nil mean the counter does not exist.
type flight struct {
	done chan struct{}
	r    *cachedReading
	err  error
}

// fetchFunc reads ids from the store, one reading per id in order, nil
// for a counter that does not exist.
type fetchFunc func(ctx context.Context, ids []string) ([]*shardcounter.Reading, error)

func newReadingCache(size int) *readingCache {
	lru, err := simplelru.NewLRU[string, cachedReading](size, nil)
	if err != nil {
		panic(err) // size is checked by Config.withDefaults
	}
	return &readingCache{lru: lru, flights: make(map[string]*flight)}
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

// read returns the rollups of ids taken after oldest: those the
// cache holds, those other calls are fetching now, and the rest fetched
// with one call of fetch, stamped with now() read before it. A fetch's
// error is the result of every counter it was fetching, for this call and
// for the calls that joined it.
func (c *readingCache) read(ctx context.Context, ids []string, oldest time.Time, now func() time.Time, fetch fetchFunc) []cacheResult {
	res := make([]cacheResult, len(ids))
	var mine []string  // fetched by this call
	var own []*flight  // their flights, in the order of mine
	var joined []int   // indexes of ids whose result comes from a flight
	var from []*flight // the flight of each joined id
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
			mine = append(mine, id)
			own = append(own, f)
		}
		joined = append(joined, i)
		from = append(from, f)
	}
	c.mu.Unlock()

	if len(mine) > 0 {
		taken := now()
		rs, err := fetch(ctx, mine)
		if err == nil && len(rs) != len(mine) {
			err = shardcounter.Errorf(shardcounter.EINTERNAL, "store returned %d readings for %d counters", len(rs), len(mine))
		}
		c.mu.Lock()
		for k, f := range own {
			switch {
			case err != nil:
				f.err = err
			case rs[k] != nil:
				f.r = &cachedReading{r: *rs[k], taken: taken}
				c.putLocked(*f.r)
			}
			delete(c.flights, mine[k])
		}
		c.mu.Unlock()
		for _, f := range own {
			close(f.done)
		}
	}

	for k, i := range joined {
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
