package expiry

import (
	"sync"
	"time"
)

// cache holds deadlines read from the store, each trusted for refresh. It
// keeps two generations and drops the older one every refresh, so that
// its size follows the names used in the last two refreshes.
type cache struct {
	refresh time.Duration
	mu      sync.Mutex
	cur     map[string]entry
	old     map[string]entry
	turned  time.Time
}

type entry struct {
	deadline int64
	at       time.Time
}

func newCache(refresh time.Duration) *cache {
	return &cache{refresh: refresh, cur: map[string]entry{}, old: map[string]entry{}, turned: time.Now()}
}

func (c *cache) get(name string) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cur[name]
	if !ok {
		e, ok = c.old[name]
	}
	if !ok || time.Since(e.at) >= c.refresh {
		return 0, false
	}
	return e.deadline, true
}

func (c *cache) put(name string, deadline int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if now.Sub(c.turned) >= c.refresh {
		c.old, c.cur, c.turned = c.cur, make(map[string]entry, len(c.cur)), now
	}
	c.cur[name] = entry{deadline, now}
}
