package engine

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/shardcounter/shardcounter"
)

// ReadWindow returns the sum of a windowed counter's writes committed in
// its last ⌈last/bucket⌉ buckets, the current one (still filling, by the
// engine's clock, Config.Now) included: on hourly buckets, last=24h is the
// current hour and the 23 before it. The range is cut to the buckets the
// counter retains; Reading.Window says which interval the sum covers.
func (e *Engine) ReadWindow(ctx context.Context, id string, last time.Duration) (*shardcounter.Reading, error) {
	c, span, err := e.window(ctx, id, last, 0)
	if err != nil {
		return nil, err
	}
	return e.store.ReadWindow(ctx, c.ID, span.From, span.To)
}

// ReadSeries returns a windowed counter's buckets over the last span of
// time, summed into buckets of width bucket (a multiple of the counter's
// own that divides a day or is whole days, so that buckets start at round
// UTC times; 0 means the counter's own), oldest first, zeros included:
// ⌈last/width⌉ buckets ending with the current one, or from the first
// whole one the counter retains when it keeps fewer.
func (e *Engine) ReadSeries(ctx context.Context, id string, last, bucket time.Duration) (*shardcounter.Series, error) {
	c, span, err := e.window(ctx, id, last, bucket)
	if err != nil {
		return nil, err
	}
	width := bucket
	if width == 0 {
		width = time.Duration(c.Window.Bucket)
	}
	got, err := e.store.ReadSeries(ctx, c.ID, span.From, span.To)
	if err != nil {
		return nil, err
	}
	s := &shardcounter.Series{ID: c.ID, Bucket: shardcounter.Duration(width), From: span.From, To: span.To}
	s.Buckets = make([]shardcounter.Bucket, span.To.Sub(span.From)/width)
	for i := range s.Buckets {
		s.Buckets[i].Start = span.From.Add(time.Duration(i) * width)
	}
	for _, b := range got {
		if i := int(b.Start.Sub(span.From) / width); b.Start.Before(span.From) || i >= len(s.Buckets) {
			return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "store returned bucket %v outside [%v, %v)", b.Start, span.From, span.To)
		} else {
			s.Buckets[i].Value += b.Value
		}
	}
	return s, nil
}

// window checks a windowed read of the last span of time in buckets of
// width bucket (0: the counter's own) and returns the counter and the
// interval to read (span).
func (e *Engine) window(ctx context.Context, id string, last, bucket time.Duration) (*shardcounter.Counter, shardcounter.Interval, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, shardcounter.Interval{}, err
	}
	if last <= 0 {
		return nil, shardcounter.Interval{}, shardcounter.Errorf(shardcounter.EINVALID, "last %v is not positive: give the span to read, such as 24h", last)
	}
	if bucket < 0 {
		return nil, shardcounter.Interval{}, shardcounter.Errorf(shardcounter.EINVALID, "bucket %v is negative: give a multiple of the counter's bucket, or 0 for its own", bucket)
	}
	now := e.cfg.Now()
	w, ok := e.windows.get(id, now.Add(-e.cfg.MaxStaleness))
	if !ok {
		c, err := e.store.GetCounter(ctx, id)
		if err != nil {
			return nil, shardcounter.Interval{}, err
		}
		if c.Window == nil {
			return nil, shardcounter.Interval{}, shardcounter.CounterHasNoWindow(id)
		}
		w = *c.Window
		e.windows.put(id, w, now)
	}
	sp, err := span(&w, now, last, bucket)
	return &shardcounter.Counter{ID: id, Spec: shardcounter.Spec{Window: &w}}, sp, err
}

// windowSpecs keeps the windows of the counters read by window, each for
// MaxStaleness, so that a dashboard polling ?last=24h costs one store
// read (the buckets) rather than two (the counter's spec, then its
// buckets). A window is fixed when its counter is created; only a counter
// deleted and created again with another window, by another process, is
// read with the old one, for at most MaxStaleness, and then the sum covers
// the old window's buckets of the new counter. It is safe for concurrent
// use.
type windowSpecs struct {
	mu  sync.Mutex
	lru *simplelru.LRU[string, windowSpec]
}

type windowSpec struct {
	w     shardcounter.Window
	taken time.Time
}

func newWindowSpecs(size int) *windowSpecs {
	lru, err := simplelru.NewLRU[string, windowSpec](size, nil)
	if err != nil {
		panic(err) // size is checked by Config.withDefaults
	}
	return &windowSpecs{lru: lru}
}

// get returns id's window when it was read after oldest.
func (s *windowSpecs) get(id string, oldest time.Time) (shardcounter.Window, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws, ok := s.lru.Get(id)
	if !ok || !ws.taken.After(oldest) {
		return shardcounter.Window{}, false
	}
	return ws.w, true
}

func (s *windowSpecs) put(id string, w shardcounter.Window, taken time.Time) {
	s.mu.Lock()
	s.lru.Add(id, windowSpec{w: w, taken: taken})
	s.mu.Unlock()
}

func (s *windowSpecs) forget(id string) {
	s.mu.Lock()
	s.lru.Remove(id)
	s.mu.Unlock()
}

// span returns the interval a read of the last span of time before now
// covers, in buckets of width bucket (0: the window's own; last > 0): the
// bucket holding now, which is still filling, and the whole buckets
// before it, ⌈last/bucket⌉ buckets in all, cut to the buckets the window
// retains (starting then with the first whole bucket retained). So on
// hourly buckets last=24h is 24 buckets, the current one included, and
// last=90m is two.
func span(w *shardcounter.Window, now time.Time, last, bucket time.Duration) (shardcounter.Interval, error) {
	own, retention := time.Duration(w.Bucket), time.Duration(w.Retention)
	if bucket == 0 {
		bucket = own
	}
	if bucket%own != 0 {
		return shardcounter.Interval{}, shardcounter.Errorf(shardcounter.EINVALID, "bucket %s is not a multiple of the counter's %s buckets", shardcounter.Duration(bucket), w.Bucket)
	}
	if day := 24 * time.Hour; day%bucket != 0 && bucket%day != 0 {
		return shardcounter.Interval{}, shardcounter.Errorf(shardcounter.EINVALID, "bucket %s neither divides a day nor is whole days, so its buckets would not start at round times: give a width such as 5m, 15m, 1h, 6h or 1d", shardcounter.Duration(bucket))
	}
	if bucket > retention {
		return shardcounter.Interval{}, shardcounter.Errorf(shardcounter.EINVALID, "bucket %s is wider than the counter's retention of %s: give at most %s", shardcounter.Duration(bucket), w.Retention, w.Retention)
	}
	// The buckets covered, rounded up; at most one more than the retention
	// holds, so that n*bucket cannot overflow.
	n := last / bucket
	if last%bucket != 0 {
		n++
	}
	n = min(n, retention/bucket+1)
	// The window keeps retention/own buckets, the current one included.
	oldest := w.BucketOf(now).Add(own - retention)
	current := now.Truncate(bucket).UTC()
	sp := shardcounter.Interval{From: current.Add(-(n - 1) * bucket), To: current.Add(bucket)}
	if sp.From.Before(oldest) {
		sp.From = oldest.Add(bucket - 1).Truncate(bucket).UTC() // the first whole bucket retained
	}
	if !sp.From.Before(sp.To) {
		sp.From = current
	}
	return sp, nil
}
