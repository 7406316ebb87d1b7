package engine

import (
	"container/heap"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/shardcounter/shardcounter"
)

// windowed is what a windowed ranking keeps beside its sums: each
// counter's window and its non-zero buckets from the window's start on,
// moved by the deltas of its commits (each added to the bucket of the
// commit's time, as the store adds it), and when each counter's sum next
// changes without a write (its oldest counted bucket leaves the window,
// or a bucket of a later time enters it). So a refresh sums again the
// counters written since the last one and those whose window moved, from
// memory: the window advances in work per bucket that leaves it, and
// reads the store only for what a delta cannot tell (rankcommit.go).
type windowed struct {
	last     time.Duration
	counters map[string]*wcounter // nil: the counter has no window that fits
	leaves   leaveHeap
	// next is each counter's scheduled change: a counter summed again
	// before then is not scheduled twice, and entries of the heap that
	// next no longer holds are stale.
	next map[string]time.Time
	// touched are the counters deltas changed since they were last summed.
	touched map[string]struct{}
}

// wcounter is one counter of a windowed ranking.
type wcounter struct {
	win     shardcounter.Window
	buckets []shardcounter.Bucket // by start
}

// bucketMargin is how far from a bucket's edge a commit must be, by the
// engine's clock, for its delta to be added to that bucket: the store
// stamps it with its own clock (the database's, on PostgreSQL), and
// nearer the edge the counter is read from the store instead. Clocks
// further apart than this can put a delta in the wrong bucket.
const bucketMargin = 250 * time.Millisecond

func newWindowed(last time.Duration) *windowed {
	return &windowed{last: last, counters: make(map[string]*wcounter), next: make(map[string]time.Time), touched: make(map[string]struct{})}
}

func (w *windowed) reset() {
	clear(w.counters)
	clear(w.next)
	clear(w.touched)
	w.leaves = w.leaves[:0]
}

// fitting returns c's window when it takes part (a window whose bucket
// divides last), nil otherwise.
func (w *windowed) fitting(win *shardcounter.Window) *shardcounter.Window {
	if win == nil || w.last%time.Duration(win.Bucket) != 0 {
		return nil
	}
	cw := *win
	return &cw
}

// fits reports whether c takes part, and remembers its window.
func (w *windowed) fits(c *shardcounter.Counter) bool {
	win := w.fitting(c.Window)
	if win == nil {
		w.counters[c.ID] = nil
		return false
	}
	w.counters[c.ID] = &wcounter{win: *win}
	return true
}

// add adds the deltas of a counter's commits to its buckets. It returns
// false, changing nothing, when the counter must be read instead: it is
// not known, or a commit was too near a bucket's edge to tell which
// bucket it went to.
func (w *windowed) add(id string, changes []change) bool {
	c, known := w.counters[id]
	if !known {
		return false
	}
	if c == nil {
		return true // no window that fits: its writes do not count
	}
	for _, ch := range changes {
		if c.win.BucketOf(time.Unix(0, ch.t0).Add(-bucketMargin)) != c.win.BucketOf(time.Unix(0, ch.t1).Add(bucketMargin)) {
			return false
		}
	}
	for _, ch := range changes {
		start := c.win.BucketOf(time.Unix(0, ch.t0))
		i, found := slices.BinarySearchFunc(c.buckets, start, func(b shardcounter.Bucket, t time.Time) int { return b.Start.Compare(t) })
		if found {
			c.buckets[i].Value += ch.delta
		} else {
			c.buckets = slices.Insert(c.buckets, i, shardcounter.Bucket{Start: start, Value: ch.delta})
		}
	}
	w.touched[id] = struct{}{}
	return true
}

// moved returns the counters whose sum may have changed by asOf: those
// deltas changed, and those whose window moved past one of their buckets.
func (w *windowed) moved(asOf time.Time) []string {
	ids := make([]string, 0, len(w.touched))
	for id := range w.touched {
		ids = append(ids, id)
	}
	clear(w.touched)
	for len(w.leaves) > 0 && !w.leaves[0].at.After(asOf) {
		l := heap.Pop(&w.leaves).(leave)
		if at, ok := w.next[l.id]; ok && at.Equal(l.at) {
			delete(w.next, l.id)
			ids = append(ids, l.id)
		}
	}
	return ids
}

// sum returns a counter's sum over the window at asOf, as ReadWindow
// counts it (nil for a counter unknown or without a window that fits),
// drops the buckets that left the window for good, and schedules the
// counter's next change.
func (w *windowed) sum(id string, asOf time.Time) *int64 {
	c := w.counters[id]
	if c == nil {
		delete(w.next, id)
		return nil
	}
	sp, err := span(&c.win, asOf, w.last, 0)
	if err != nil {
		delete(w.next, id)
		return nil
	}
	gone := 0
	for gone < len(c.buckets) && c.buckets[gone].Start.Before(sp.From) {
		gone++
	}
	c.buckets = c.buckets[gone:]
	var s int64
	var at time.Time // the next change: a counted bucket leaves, or a later one enters
	own, retention := time.Duration(c.win.Bucket), time.Duration(c.win.Retention)
	for _, b := range c.buckets {
		if b.Value == 0 {
			continue
		}
		if b.Start.Before(sp.To) {
			s += b.Value
			if at.IsZero() {
				at = b.Start.Add(min(w.last/own*own, retention))
			}
			continue
		}
		if at.IsZero() || b.Start.Before(at) {
			at = b.Start
		}
		break
	}
	if at.IsZero() {
		delete(w.next, id)
	} else if old, ok := w.next[id]; !ok || !old.Equal(at) {
		w.next[id] = at
		heap.Push(&w.leaves, leave{at: at, id: id})
	}
	return &s
}

// windowReaders bounds the window reads of one refresh in flight: a
// store reads one counter's buckets per call.
const windowReaders = 8

// read reads each counter's window and buckets from the store, keeps
// them, and returns each one's sum at asOf (nil for a counter gone or
// without a window that fits).
func (w *windowed) read(ctx context.Context, store shardcounter.CounterStore, ids []string, asOf time.Time) (map[string]*int64, error) {
	type result struct {
		id    string
		c     *wcounter
		known bool
		err   error
	}
	results := make([]result, len(ids))
	for i, id := range ids {
		c, known := w.counters[id]
		results[i] = result{id: id, c: c, known: known}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, windowReaders)
	for i := range results {
		wg.Add(1)
		sem <- struct{}{}
		go func(r *result) {
			defer func() { <-sem; wg.Done() }()
			r.c, r.known, r.err = w.readOne(ctx, store, r.id, r.c, r.known, asOf)
		}(&results[i])
	}
	wg.Wait()
	out := make(map[string]*int64, len(ids))
	for _, r := range results {
		if r.err != nil {
			return nil, r.err
		}
		if r.known {
			w.counters[r.id] = r.c
		} else {
			delete(w.counters, r.id)
		}
		out[r.id] = w.sum(r.id, asOf)
	}
	return out, nil
}

// readOne reads one counter's window (when c is nil or not known: it may
// have been deleted and made again with one) and its buckets from the
// window's start at asOf on. It returns the counter (nil when it does not
// take part) and whether it exists.
func (w *windowed) readOne(ctx context.Context, store shardcounter.CounterStore, id string, c *wcounter, known bool, asOf time.Time) (*wcounter, bool, error) {
	if !known || c == nil {
		got, err := store.GetCounter(ctx, id)
		if shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		win := w.fitting(got.Window)
		if win == nil {
			return nil, true, nil
		}
		c = &wcounter{win: *win}
	}
	sp, err := span(&c.win, asOf, w.last, 0)
	if err != nil {
		return nil, true, nil
	}
	// Up to a bucket past the current one: a commit that ended before
	// this read may be stamped a little later than asOf.
	to := sp.To.Add(2 * time.Duration(c.win.Bucket))
	bs, err := store.ReadSeries(ctx, id, sp.From, to)
	switch shardcounter.ErrorCode(err) {
	case "":
	case shardcounter.ENOTFOUND:
		return nil, false, nil
	case shardcounter.EINVALID: // deleted and made again without a window
		return nil, false, nil
	default:
		return nil, false, err
	}
	nc := &wcounter{win: c.win}
	for _, b := range bs {
		if b.Value != 0 {
			nc.buckets = append(nc.buckets, b)
		}
	}
	slices.SortFunc(nc.buckets, func(a, b shardcounter.Bucket) int { return a.Start.Compare(b.Start) })
	return nc, true, nil
}

// leave is when a counter's sum next changes without a write.
type leave struct {
	at time.Time
	id string
}

type leaveHeap []leave

func (h leaveHeap) Len() int           { return len(h) }
func (h leaveHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h leaveHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *leaveHeap) Push(x any)        { *h = append(*h, x.(leave)) }
func (h *leaveHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
