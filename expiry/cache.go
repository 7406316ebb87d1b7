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
	cur     map[string]cached
	old     map[string]cached
	turned  time.Time
}

type cached struct {
	entry
	at time.Time
}

func newCache(refresh time.Duration) *cache {
	return &cache{refresh: refresh, cur: map[string]cached{}, old: map[string]cached{}, turned: time.Now()}
}

func (c *cache) get(name string) (entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cur[name]
	if !ok {
		e, ok = c.old[name]
	}
	if !ok || time.Since(e.at) >= c.refresh {
		return entry{}, false
	}
	return e.entry, true
}

func (c *cache) put(name string, e entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if now.Sub(c.turned) >= c.refresh {
		c.old, c.cur, c.turned = c.cur, make(map[string]cached, len(c.cur)), now
	}
	c.cur[name] = cached{e, now}
}

// drop forgets name, for a change whose outcome is unknown.
func (c *cache) drop(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.cur, name)
	delete(c.old, name)
}

// settle records, once a change's commit has landed, the index entry it
// added to, when the cache still holds that change's member (no change
// planned since replaced it).
func (c *cache) settle(name string, e entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.cur[name]; ok && cur.member == e.member {
		cur.indexed = e.indexed
		c.cur[name] = cur
	} else if old, ok := c.old[name]; ok && old.member == e.member {
		old.indexed = e.indexed
		c.old[name] = old
	}
}
