package engine

import (
	"container/heap"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
)

// ranked is one ranking as the engine keeps it: the value (or window
// buckets) of every counter it ranks, the first Size of them in order
// (top), and the log of what commits changed since the last refresh
// (pend; see rankcommit.go).
//
// A refresh moves each changed counter by its logged deltas, reads from
// the store only the counters the deltas cannot tell (rankcommit.go), in
// one batched strong read per MaxReadBatch of them, and updates the top
// list from what changed: a counter that rose is merged in, and only one
// of the top list that fell (or was deleted) while counters outside it
// exist costs a pass over every value. The first refresh, and every one
// with Config.RankingRescan, reads every counter with the prefix instead.
type ranked struct {
	def *shardcounter.Ranking

	log *changeLog
	// Guarded by log.mu.
	pend    map[string]*pending
	reading map[string]*readState

	// refreshMu is held by a refresh; it guards the fields below.
	refreshMu sync.Mutex
	seeded    bool
	vals      map[string]int64
	top       []shardcounter.RankingEntry // never changed in place: views share it
	inTop     map[string]bool
	// retry holds the counters whose last read a commit overlapped: the
	// next refresh reads them again, holding their commits back.
	retry map[string]bool
	win   *windowed // a windowed ranking's buckets; nil for all time

	view atomic.Pointer[topView]
}

// topView is a refresh's result, shared by reads.
type topView struct {
	entries  []shardcounter.RankingEntry
	asOf     time.Time
	counters int
}

func newRanked(def *shardcounter.Ranking, log *changeLog) *ranked {
	k := &ranked{
		def: def, log: log, pend: make(map[string]*pending), reading: make(map[string]*readState),
		vals: make(map[string]int64), inTop: make(map[string]bool), retry: make(map[string]bool),
	}
	if def.Windowed() {
		k.win = newWindowed(time.Duration(def.Last))
	}
	return k
}

// before orders entries: value descending, then id ascending.
func before(a, b shardcounter.RankingEntry) bool {
	return a.Value > b.Value || (a.Value == b.Value && a.ID < b.ID)
}

func compareEntries(a, b shardcounter.RankingEntry) int {
	switch {
	case before(a, b):
		return -1
	case before(b, a):
		return 1
	}
	return 0
}

// due reports whether the ranking's top list is older than d at now.
func (k *ranked) due(now time.Time, d time.Duration) bool {
	v := k.view.Load()
	return v == nil || now.Sub(v.asOf) >= d
}

// readTop returns the first n entries (all for 0), refreshing first when the
// last refresh is older than the ranking's staleness bound.
func (k *ranked) readTop(ctx context.Context, e *Engine, n int) (*shardcounter.TopList, error) {
	bound := time.Duration(k.def.MaxStaleness)
	if k.due(e.cfg.Now(), bound) {
		k.refreshMu.Lock()
		// Another refresh may have ended while this one waited.
		var err error
		if k.due(e.cfg.Now(), bound) {
			err = k.refresh(ctx, e)
		}
		k.refreshMu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	v := k.view.Load()
	if n == 0 || n > len(v.entries) {
		n = len(v.entries)
	}
	t := &shardcounter.TopList{
		Ranking: *k.def, Entries: slices.Clone(v.entries[:n]), AsOf: v.asOf,
		MaxStalenessMS: time.Duration(k.def.MaxStaleness).Milliseconds(), Counters: v.counters,
	}
	if k.def.Windowed() {
		t.Note = "ranks only counters with a window whose bucket divides last, by the sum of their last " + k.def.Last.String()
	}
	return t, nil
}

// refresh brings the top list up to now; refreshMu is held. Its as_of is
// the time it started: every write acknowledged before then was logged
// first, and is counted by its delta or by a read after it.
func (k *ranked) refresh(ctx context.Context, e *Engine) error {
	asOf := e.cfg.Now()
	if !k.seeded || e.cfg.RankingRescan {
		// The scan reads every counter, after this; those created after
		// its listing passed them are logged for the next refresh.
		k.takePending()
		clear(k.retry)
		vals, err := k.scan(ctx, e, asOf)
		if err != nil {
			return err
		}
		k.vals, k.seeded = vals, true
		k.setTop(fullTop(vals, k.def.Size))
	} else {
		got, err := k.update(ctx, e, asOf)
		if err != nil {
			return err
		}
		if len(got) > 0 {
			k.apply(got)
		}
	}
	k.view.Store(&topView{entries: k.top, asOf: asOf, counters: len(k.vals)})
	return nil
}

// update returns the new value of every counter changed since the last
// refresh (nil for one gone or out of the ranking): from the deltas
// logged where they tell it, from the store otherwise, and, in a windowed
// ranking, from the buckets kept for those whose window moved.
func (k *ranked) update(ctx context.Context, e *Engine, asOf time.Time) (map[string]*int64, error) {
	pend := k.takePending()
	var reads, blocked []string
	for id := range k.retry {
		blocked = append(blocked, id)
		delete(pend, id)
	}
	clear(k.retry)
	got := make(map[string]*int64, len(pend))
	for id, p := range pend {
		switch {
		case p.read:
			reads = append(reads, id)
		case k.win != nil:
			if !k.win.add(id, p.changes) {
				reads = append(reads, id)
			}
		default:
			v, known := k.vals[id]
			if !known {
				reads = append(reads, id)
				continue
			}
			for _, c := range p.changes {
				v += c.delta
			}
			got[id] = &v
		}
	}
	e.stats.RankingDeltas.Add(int64(len(pend) - len(reads)))
	if k.win != nil {
		for _, id := range k.win.moved(asOf) {
			got[id] = k.win.sum(id, asOf)
		}
	}
	for _, r := range []struct {
		ids   []string
		block bool
	}{{reads, false}, {blocked, true}} {
		if err := k.readInto(ctx, e, r.ids, r.block, asOf, got); err != nil {
			return nil, err
		}
	}
	return got, nil
}

// readInto reads ids from the store, registered (rankcommit.go), into
// got. A read a commit overlapped is read again next time; on an error
// every id not read yet is.
func (k *ranked) readInto(ctx context.Context, e *Engine, ids []string, block bool, asOf time.Time, got map[string]*int64) error {
	for len(ids) > 0 {
		n := min(len(ids), shardcounter.MaxReadBatch)
		batch := ids[:n]
		k.register(batch, block)
		e.stats.RankingReads.Add(int64(n))
		if block {
			e.stats.RankingBlocked.Add(int64(n))
		}
		vals, err := k.read(ctx, e, batch, asOf)
		for _, id := range k.unregister(batch) {
			k.retry[id] = true
		}
		if err != nil {
			for _, id := range ids {
				k.retry[id] = true
			}
			return err
		}
		for id, v := range vals {
			got[id] = v
		}
		ids = ids[n:]
	}
	return nil
}

// scan reads every counter with the ranking's prefix, a page of ids and a
// batched read at a time.
func (k *ranked) scan(ctx context.Context, e *Engine, asOf time.Time) (map[string]int64, error) {
	vals := make(map[string]int64)
	if k.win != nil {
		k.win.reset()
	}
	after := ""
	for {
		cs, err := e.store.ListCounters(ctx, k.def.Prefix, after, shardcounter.MaxReadBatch)
		if err != nil {
			return nil, err
		}
		if len(cs) == 0 {
			return vals, nil
		}
		ids := make([]string, 0, len(cs))
		for _, c := range cs {
			if k.win == nil || k.win.fits(c) {
				ids = append(ids, c.ID)
			}
		}
		got := make(map[string]*int64, len(ids))
		if err := k.readInto(ctx, e, ids, false, asOf, got); err != nil {
			return nil, err
		}
		for id, v := range got {
			if v != nil {
				vals[id] = *v
			}
		}
		after = cs[len(cs)-1].ID
	}
}

// read returns the value of each counter (nil for one that is gone or,
// in a windowed ranking, has no window that fits).
func (k *ranked) read(ctx context.Context, e *Engine, ids []string, asOf time.Time) (map[string]*int64, error) {
	if k.win != nil {
		return k.win.read(ctx, e.store, ids, asOf)
	}
	out := make(map[string]*int64, len(ids))
	rs, err := e.store.ReadCounters(ctx, ids)
	if err != nil {
		return nil, err
	}
	for i, r := range rs {
		if r != nil {
			v := r.Value
			out[ids[i]] = &v
		} else {
			out[ids[i]] = nil
		}
	}
	return out, nil
}

// apply takes the new values of changed counters into vals and the top
// list. Unless a counter of the top list fell or went while counters
// outside it exist, the new top list is within the old one and the
// changed counters: every unchanged outsider is still beaten by all of
// the old list.
func (k *ranked) apply(got map[string]*int64) {
	outsiders := len(k.vals) > len(k.top)
	full := false
	for id, v := range got {
		old, had := k.vals[id]
		if v == nil {
			delete(k.vals, id)
		} else {
			k.vals[id] = *v
		}
		if had && k.inTop[id] && outsiders && (v == nil || *v < old) {
			full = true
		}
	}
	if full {
		k.setTop(fullTop(k.vals, k.def.Size))
		return
	}
	cand := make([]shardcounter.RankingEntry, 0, len(k.top)+len(got))
	for _, t := range k.top {
		if _, changed := got[t.ID]; !changed {
			cand = append(cand, t)
		}
	}
	for id, v := range got {
		if v != nil {
			cand = append(cand, shardcounter.RankingEntry{ID: id, Value: *v})
		}
	}
	slices.SortFunc(cand, compareEntries)
	if len(cand) > k.def.Size {
		cand = cand[:k.def.Size]
	}
	k.setTop(cand)
}

func (k *ranked) setTop(top []shardcounter.RankingEntry) {
	k.top = top
	k.inTop = make(map[string]bool, len(top))
	for _, t := range top {
		k.inTop[t.ID] = true
	}
}

// fullTop returns the first size entries of vals, in order, with a heap
// of size entries: one pass over every value.
func fullTop(vals map[string]int64, size int) []shardcounter.RankingEntry {
	h := &worstFirst{}
	for id, v := range vals {
		x := shardcounter.RankingEntry{ID: id, Value: v}
		if h.Len() < size {
			heap.Push(h, x)
		} else if before(x, (*h)[0]) {
			(*h)[0] = x
			heap.Fix(h, 0)
		}
	}
	out := []shardcounter.RankingEntry(*h)
	slices.SortFunc(out, compareEntries)
	return out
}

// worstFirst is a heap whose root is the entry that sorts last.
type worstFirst []shardcounter.RankingEntry

func (h worstFirst) Len() int           { return len(h) }
func (h worstFirst) Less(i, j int) bool { return before(h[j], h[i]) }
func (h worstFirst) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *worstFirst) Push(x any)        { *h = append(*h, x.(shardcounter.RankingEntry)) }
func (h *worstFirst) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
