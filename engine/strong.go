package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/shardcounter/shardcounter"
)

// strongReads gathers the strong reads of concurrent callers into store
// reads, the way the flusher gathers writes: at most maxFetches store
// reads run at once (readSlots), and the next one takes every read queued
// by then (up to shardcounter.MaxReadBatch counters), so sixty clients
// each reading one counter cost a few store calls, not sixty.
//
// A strong read must return a value its counter held at some moment
// between the call and its reply. So a read joins only a store read that
// starts after it was queued, never one already running: the store read's
// moment then lies within every call it answers. That is also why the
// counters of one ReadCounters call go to the store in one call, never
// split across two: they are one snapshot where the store has one. The
// store reads each counter it is asked for as it would alone (bolt,
// PostgreSQL and standalone Redis: one snapshot; Redis Cluster: each
// counter linearizable), so a gathered read is as strong as a lone one.
//
// A store read of several callers' counters that fails is made again for
// each caller alone, so that one counter's failure (its node is down, its
// total does not fit in int64) is that counter's readers' alone. It is
// safe for concurrent use.
type strongReads struct {
	fetch fetchFunc
	now   func() time.Time
	keep  func(cachedReading) // the engine's rollups: a strong reading refreshes them

	mu    sync.Mutex
	slots readSlots
	queue []*strongRead // reads waiting for a store read, oldest first
}

// strongRead is one caller's read. rs and err are set, and done, under
// strongReads.mu.
type strongRead struct {
	ids  []string
	rs   []*shardcounter.Reading // one per id, nil for a counter that does not exist
	err  error
	done bool
}

func newStrongReads(maxFetches int, now func() time.Time, fetch fetchFunc, keep func(cachedReading)) *strongReads {
	return &strongReads{fetch: fetch, now: now, keep: keep, slots: newReadSlots(maxFetches)}
}

// read returns the readings of ids (at most MaxReadBatch), nil for a
// counter that does not exist, from a store read that began after read
// was called. It makes the store reads of the queue, whoever queued them,
// whenever there are some and one may start.
func (g *strongReads) read(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	me := &strongRead{ids: ids}
	g.mu.Lock()
	g.queue = append(g.queue, me)
	for {
		if me.done {
			g.mu.Unlock()
			return me.rs, me.err
		}
		if err := ctx.Err(); err != nil {
			// Still queued: leave. Taken by a store read in progress: it
			// settles me for nobody.
			g.queue = slices.DeleteFunc(g.queue, func(r *strongRead) bool { return r == me })
			g.mu.Unlock()
			return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "gave up waiting for the store: %v", err)
		}
		if len(g.queue) == 0 || !g.slots.free() {
			// Mine is in a store read in progress, or queued behind those.
			g.slots.wait(ctx, &g.mu)
			continue
		}
		taken := g.take()
		g.slots.take()
		g.mu.Unlock()
		g.readTaken(ctx, taken)
		g.mu.Lock()
		g.slots.release()
	}
}

// take removes from the queue the oldest reads whose counters, together,
// are at most MaxReadBatch, and at least one read. Call it with g.mu held.
func (g *strongReads) take() []*strongRead {
	n, distinct := 0, make(map[string]bool)
	for _, r := range g.queue {
		added := 0
		for _, id := range r.ids {
			if !distinct[id] {
				added++
			}
		}
		if n > 0 && len(distinct)+added > shardcounter.MaxReadBatch {
			break
		}
		for _, id := range r.ids {
			distinct[id] = true
		}
		n++
	}
	taken := g.queue[:n:n]
	g.queue = slices.Clone(g.queue[n:])
	return taken
}

// readTaken reads the counters of reads with one store call and settles
// them; when that call fails on a store error with more than one read in
// it, each read is made again alone. When ctx ends first the reads go back
// to the front of the queue for the other callers: a store read that
// starts later still starts after they were queued.
func (g *strongReads) readTaken(ctx context.Context, reads []*strongRead) {
	var ids []string
	at := make(map[string]int)
	for _, r := range reads {
		for _, id := range r.ids {
			if _, ok := at[id]; !ok {
				at[id] = len(ids)
				ids = append(ids, id)
			}
		}
	}
	rs, err := g.call(ctx, ids)
	if err != nil && ctx.Err() != nil {
		g.mu.Lock()
		g.queue = append(reads, g.queue...)
		g.mu.Unlock()
		return
	}
	if err != nil && len(reads) > 1 {
		for i, r := range reads {
			r.rs, r.err = g.call(ctx, r.ids)
			if r.err != nil && ctx.Err() != nil {
				// This caller gave up, not the store: the rest are
				// the other callers' to read.
				g.mu.Lock()
				g.queue = append(slices.Clone(reads[i:]), g.queue...)
				g.mu.Unlock()
				reads = reads[:i]
				break
			}
		}
	} else {
		for _, r := range reads {
			r.err = err
			if err == nil {
				r.rs = make([]*shardcounter.Reading, len(r.ids))
				for i, id := range r.ids {
					r.rs[i] = rs[at[id]]
				}
			}
		}
	}
	g.mu.Lock()
	for _, r := range reads {
		r.done = true
	}
	g.mu.Unlock()
}

// call makes one store read of ids and keeps its readings as rollups,
// taken when the call began.
func (g *strongReads) call(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	taken := g.now()
	rs, err := g.fetch(ctx, ids)
	if err == nil && len(rs) != len(ids) {
		err = shardcounter.Errorf(shardcounter.EINTERNAL, "store returned %d readings for %d counters", len(rs), len(ids))
	}
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if r != nil {
			g.keep(cachedReading{r: *r, taken: taken})
		}
	}
	return rs, nil
}
