package engine

import (
	"context"
	"sync"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// pacer keeps commits to each shard of a counter at most one per
// interval (Config.ShardWriteInterval), for stores whose records take
// about one write a second (Firestore, Datastore). A flush commits a
// counter only when one of its shards is due, and puts all the counter's
// writes of the batch on that shard: so however hot a counter is, each
// shard document sees at most one commit per interval, the shards take
// turns (with n shards one is due every interval/n), and a write waits
// at most about interval/n for its commit. Counters with no shard due
// wait in the flush for the earliest due one, while the counters that are
// due commit at once. A write with a request id or a member goes to the
// shard its id or member picks, and waits for that shard.
//
// The pacer learns each counter's shard count from the store (one
// GetCounter, remembered for a minute and forgotten on a reshard through
// this engine). It is safe for concurrent use.
type pacer struct {
	interval time.Duration
	store    shardcounter.CounterStore
	now      func() time.Time
	max      int // counters remembered

	mu       sync.Mutex
	counters map[string]*paced
}

// paced is one counter as the pacer knows it.
type paced struct {
	shards  int
	fetched time.Time
	last    []time.Time // the last commit of each shard
}

// shardsTTL is how long the pacer trusts a counter's shard count.
const shardsTTL = time.Minute

func newPacer(interval time.Duration, store shardcounter.CounterStore, max int) *pacer {
	return &pacer{interval: interval, store: store, now: time.Now, max: max, counters: make(map[string]*paced)}
}

// reshard makes the pacer read the counter's shard count again (it was
// resharded).
func (p *pacer) reshard(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.counters[id]; c != nil {
		c.fetched = time.Time{}
	}
}

// counter returns the counter's pacing state, reading its shard count
// from the store when it is not known; a counter that does not exist yet
// gets the shard count its writes would create it with.
func (p *pacer) counter(ctx context.Context, id string, create *shardcounter.Spec) *paced {
	p.mu.Lock()
	c := p.counters[id]
	p.mu.Unlock()
	if c != nil && p.now().Sub(c.fetched) < shardsTTL {
		return c
	}
	n := 1
	if create != nil {
		n = create.Shards
	}
	if got, err := p.store.GetCounter(ctx, id); err == nil {
		n = got.Shards
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur := p.counters[id]; cur != c && cur != nil {
		return cur // another flush read it meanwhile: its marks are the ones to keep
	}
	if len(p.counters) >= p.max {
		p.prune()
	}
	nc := &paced{shards: n, fetched: p.now(), last: make([]time.Time, n)}
	if c != nil && c.shards == n {
		copy(nc.last, c.last)
	}
	p.counters[id] = nc
	return nc
}

// prune drops the counters none of whose shards committed within the
// interval: forgetting them paces nothing less. p.mu is held.
func (p *pacer) prune() {
	cut := p.now().Add(-p.interval)
	for id, c := range p.counters {
		recent := false
		for _, t := range c.last {
			recent = recent || t.After(cut)
		}
		if !recent {
			delete(p.counters, id)
		}
	}
}

// take splits groups into those that may commit now, with the pick of
// each set to its shard and the shard marked committed, and the rest,
// with how long until the first of them may. A counter's groups stay
// together, so that they reach the store in the order increasesFirst
// gave them, and so do the counters l links (a transaction's): they are
// due when the last of them is.
func (p *pacer) take(ctx context.Context, groups []*group, l links) (due, rest []*group, wait time.Duration) {
	byCounter := make(map[string][]*group)
	var order []string
	for _, g := range groups {
		if _, ok := byCounter[g.inc.Counter]; !ok {
			order = append(order, g.inc.Counter)
		}
		byCounter[g.inc.Counter] = append(byCounter[g.inc.Counter], g)
	}
	states := make(map[string]*paced, len(order))
	for _, id := range order {
		states[id] = p.counter(ctx, id, byCounter[id][0].inc.Create)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	wait = -1
	picks := make(map[string]int, len(order))
	needs := make(map[string]map[int]bool, len(order))
	ats := make(map[string]time.Time) // by l's root: when every counter it links is due
	for _, id := range order {
		c, gs := states[id], byCounter[id]
		n := c.shards
		need := make(map[int]bool) // shards pinned by a request id or a member
		plain := false
		for _, g := range gs {
			switch {
			case g.inc.Member != "":
				need[shard.Of(shard.ForMember(g.inc.Member), n)] = true
			case g.inc.RequestID != "":
				need[shard.Of(g.inc.Pick, n)] = true
			default:
				plain = true
			}
		}
		pick := -1
		if plain {
			for k := range need { // join a pinned shard's commit
				pick = k
				break
			}
			if pick < 0 {
				pick = 0
				for k := 1; k < n; k++ { // the shard idle longest: they take turns
					if c.last[k].Before(c.last[pick]) {
						pick = k
					}
				}
				need[pick] = true
			}
		}
		picks[id], needs[id] = pick, need
		r := l.root(id)
		at := ats[r] // when every shard it needs, and its links need, is due
		for k := range need {
			if d := c.last[k].Add(p.interval); d.After(at) {
				at = d
			}
		}
		ats[r] = at
	}
	for _, id := range order {
		c, gs, pick, need, at := states[id], byCounter[id], picks[id], needs[id], ats[l.root(id)]
		if at.After(now) {
			rest = append(rest, gs...)
			if w := at.Sub(now); wait < 0 || w < wait {
				wait = w
			}
			continue
		}
		for k := range need {
			c.last[k] = now
		}
		for _, g := range gs {
			if g.inc.Member == "" && g.inc.RequestID == "" {
				g.inc.Pick = uint64(pick)
			}
		}
		due = append(due, gs...)
	}
	return due, rest, max(wait, 0)
}

// committed marks the shards of groups committed again once their commit
// has returned: a shard is due an interval after its last commit ended,
// not after it began, so that the commits' own times (a document's update
// time, which a commit takes somewhere on its way) are an interval apart
// however long each took.
func (p *pacer) committed(groups []*group) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	for _, g := range groups {
		c := p.counters[g.inc.Counter]
		if c == nil {
			continue
		}
		pick := g.inc.Pick
		if g.inc.Member != "" {
			pick = shard.ForMember(g.inc.Member)
		}
		if k := shard.Of(pick, c.shards); k < len(c.last) {
			c.last[k] = now
		}
	}
}

// links ties together the counters of each transaction of a batch (a run
// of calls joined by Write.JoinNext), its deadline changes' names too, so
// that the pacer commits a transaction whole: all its counters when the
// last of their shards is due, never some of them now and the rest a
// commit later. It is a union-find over counter ids; the zero value links
// nothing.
type links map[string]string

// txnLinks links the counters of each transaction among calls.
func txnLinks(calls []*call) links {
	var l links
	for lo := 0; lo < len(calls); {
		hi := lo + 1 // the run is calls[lo:hi]
		for hi < len(calls) && calls[hi-1].w.JoinNext {
			hi++
		}
		for _, c := range calls[lo+1 : hi] {
			if l == nil {
				l = make(links)
			}
			l.union(calls[lo].w.Counter, c.w.Counter)
		}
		lo = hi
	}
	return l
}

// root is the counter that stands for id's transactions (id itself when
// it is in none).
func (l links) root(id string) string {
	for {
		p, ok := l[id]
		if !ok || p == id {
			return id
		}
		if gp, ok := l[p]; ok {
			l[id] = gp // halve the path
		}
		id = p
	}
}

func (l links) union(a, b string) {
	ra, rb := l.root(a), l.root(b)
	if ra != rb {
		l[ra] = rb
	}
}
