package engine

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/shardcounter/shardcounter"
)

// windowed is what a windowed ranking keeps beside its values: each
// counter's window, and when each counter's sum next changes without a
// write (its oldest counted bucket leaves the window). A refresh reads
// again the counters written since the last one and those whose oldest
// bucket has left (aged): the window advances in work per bucket that
// leaves it, never by rescanning every counter.
type windowed struct {
	last    time.Duration
	windows map[string]*shardcounter.Window // nil: the counter has no window that fits
	leaves  leaveHeap
	// next is each counter's scheduled leave: a counter re-read before
	// its oldest bucket leaves is not scheduled again, and entries of the
	// heap that next no longer holds are stale.
	next map[string]time.Time
}

func newWindowed(last time.Duration) *windowed {
	return &windowed{last: last, windows: make(map[string]*shardcounter.Window), next: make(map[string]time.Time)}
}

func (w *windowed) reset() {
	clear(w.windows)
	clear(w.next)
	w.leaves = w.leaves[:0]
}

// fits reports whether c takes part (a window whose bucket divides
// last), and remembers its window.
func (w *windowed) fits(c *shardcounter.Counter) bool {
	if c.Window == nil || w.last%time.Duration(c.Window.Bucket) != 0 {
		w.windows[c.ID] = nil
		return false
	}
	win := *c.Window
	w.windows[c.ID] = &win
	return true
}

// aged returns the counters whose oldest counted bucket has left the
// window by asOf.
func (w *windowed) aged(asOf time.Time) []string {
	var ids []string
	for len(w.leaves) > 0 && !w.leaves[0].at.After(asOf) {
		l := heap.Pop(&w.leaves).(leave)
		if at, ok := w.next[l.id]; ok && at.Equal(l.at) {
			delete(w.next, l.id)
			ids = append(ids, l.id)
		}
	}
	return ids
}

// windowReaders bounds the window reads of one refresh in flight: a
// store reads one counter's buckets per call.
const windowReaders = 8

// read returns each counter's sum over the window at asOf, as ReadWindow
// counts it (nil for a counter gone or without a window that fits), and
// schedules each one's next change.
func (w *windowed) read(ctx context.Context, store shardcounter.CounterStore, ids []string, asOf time.Time) (map[string]*int64, error) {
	type result struct {
		id     string
		win    *shardcounter.Window
		known  bool
		sum    *int64
		oldest time.Time
		err    error
	}
	results := make([]result, len(ids))
	for i, id := range ids {
		win, known := w.windows[id]
		results[i] = result{id: id, win: win, known: known}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, windowReaders)
	for i := range results {
		wg.Add(1)
		sem <- struct{}{}
		go func(r *result) {
			defer func() { <-sem; wg.Done() }()
			r.win, r.known, r.sum, r.oldest, r.err = w.readOne(ctx, store, r.id, r.win, r.known, asOf)
		}(&results[i])
	}
	wg.Wait()
	out := make(map[string]*int64, len(ids))
	for _, r := range results {
		if r.err != nil {
			return nil, r.err
		}
		if r.known {
			w.windows[r.id] = r.win
		} else {
			delete(w.windows, r.id)
		}
		out[r.id] = r.sum
		if r.sum != nil && !r.oldest.IsZero() {
			n := w.last / time.Duration(r.win.Bucket)
			at := r.oldest.Add(n * time.Duration(r.win.Bucket))
			if old, ok := w.next[r.id]; !ok || !old.Equal(at) {
				w.next[r.id] = at
				heap.Push(&w.leaves, leave{at: at, id: r.id})
			}
		}
	}
	return out, nil
}

// readOne reads one counter's window sum at asOf. win and known are what
// the ranking knew of its window; it returns what it knows after, the
// sum (nil when the counter does not take part) and the start of the
// oldest non-zero bucket counted (zero when none).
func (w *windowed) readOne(ctx context.Context, store shardcounter.CounterStore, id string, win *shardcounter.Window, known bool, asOf time.Time) (*shardcounter.Window, bool, *int64, time.Time, error) {
	// A counter known to have no window that fits is asked again: it may
	// have been deleted and made again with one.
	if !known || win == nil {
		win = nil
		c, err := store.GetCounter(ctx, id)
		if shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND {
			return nil, false, nil, time.Time{}, nil
		}
		if err != nil {
			return nil, false, nil, time.Time{}, err
		}
		if c.Window != nil && w.last%time.Duration(c.Window.Bucket) == 0 {
			cw := *c.Window
			win = &cw
		}
		known = true
	}
	if win == nil {
		return nil, true, nil, time.Time{}, nil
	}
	sp, err := span(win, asOf, w.last, 0)
	if err != nil {
		return win, true, nil, time.Time{}, nil
	}
	bs, err := store.ReadSeries(ctx, id, sp.From, sp.To)
	switch shardcounter.ErrorCode(err) {
	case "":
	case shardcounter.ENOTFOUND:
		return nil, false, nil, time.Time{}, nil
	case shardcounter.EINVALID: // deleted and made again without a window
		return nil, false, nil, time.Time{}, nil
	default:
		return win, true, nil, time.Time{}, err
	}
	var sum int64
	var oldest time.Time
	for _, b := range bs {
		sum += b.Value
		if b.Value != 0 && (oldest.IsZero() || b.Start.Before(oldest)) {
			oldest = b.Start
		}
	}
	return win, true, &sum, oldest, nil
}

// leave is when a counter's oldest counted bucket leaves its window.
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
