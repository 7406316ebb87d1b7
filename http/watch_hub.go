package http

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardcounter/shardcounter"
)

// watchHub shares one reader per watched counter among every watcher of it
// on this server, so that a counter on a million screens costs the store
// what it costs for one: a read per interval.
//
// A feed is the reader of one counter: a goroutine started with the
// counter's first watcher and stopped with its last. It reads the counter
// at the shortest interval any of its watchers asked for, encodes what it
// read as an event-stream frame once, and hands that frame to each watcher
// whose own interval has passed since its last event. The hand-over is a
// non-blocking send into the watcher's small buffer: a watcher whose
// client does not keep up finds its buffer full, is dropped (its gone
// channel closes) and holds nothing of the feed's. A feed never waits for
// a client.
//
// A watchHub is safe for concurrent use. Lock order: hub.mu, then feed.mu.
type watchHub struct {
	read        func(ctx context.Context, id string) (*shardcounter.Reading, error)
	readTimeout time.Duration
	max         int // watchers at once
	buffer      int // events queued per watcher
	log         *slog.Logger

	streams prometheus.Gauge   // watchers subscribed
	counted prometheus.Gauge   // feeds running
	reads   prometheus.Counter // reads made by feeds
	dropped prometheus.Counter // watchers dropped for not keeping up

	mu       sync.Mutex
	feeds    map[string]*feed
	watchers int
	closed   bool
	done     chan struct{} // closed by close: every stream ends
}

// feed reads one counter for all its watchers.
type feed struct {
	hub    *watchHub
	id     string
	ctx    context.Context // cancelled when the last watcher leaves
	cancel context.CancelFunc
	wake   chan struct{} // cap 1: the shortest interval changed

	mu        sync.Mutex
	watchers  map[*watcher]struct{}
	intervals map[time.Duration]int // watchers by interval, for the shortest
	state     *watchState           // the latest read; nil before the first
}

// watchState is what a feed read last: a reading or the read's error,
// with the frame that tells it to a client, encoded once for every
// watcher. seq grows when what a client would see changes (the value, or
// the error), not on every read.
type watchState struct {
	seq     uint64
	reading *shardcounter.Reading
	err     error
	frame   []byte
}

// watcher is one client's stream.
type watcher struct {
	interval time.Duration
	ch       chan *watchState
	gone     chan struct{} // closed when the feed dropped the watcher

	// Owned by the feed, under feed.mu.
	sent uint64    // seq of the last state sent
	at   time.Time // when it was sent
}

func newWatchHub(read func(context.Context, string) (*shardcounter.Reading, error), opts WatchOptions, readTimeout time.Duration, log *slog.Logger, reg prometheus.Registerer) *watchHub {
	h := &watchHub{
		read:        read,
		readTimeout: readTimeout,
		max:         opts.MaxWatchers,
		buffer:      opts.Buffer,
		log:         log,
		feeds:       make(map[string]*feed),
		done:        make(chan struct{}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "shardcounter", Subsystem: "watch", Name: "streams",
			Help: "Watch streams open now (bounded by the server's MaxWatchers).",
		}),
		counted: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "shardcounter", Subsystem: "watch", Name: "counters",
			Help: "Counters being watched now: each costs one store read per interval, however many watch it.",
		}),
		reads: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "shardcounter", Subsystem: "watch", Name: "reads_total",
			Help: "Store reads made for watchers.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "shardcounter", Subsystem: "watch", Name: "dropped_total",
			Help: "Watch streams ended because their client did not take events as fast as they came.",
		}),
	}
	reg.MustRegister(h.streams, h.counted, h.reads, h.dropped)
	return h
}

// errShuttingDown is the answer to a watch that starts during shutdown.
var errShuttingDown = shardcounter.Errorf(shardcounter.EUNAVAILABLE, "the server is shutting down: watch again after the Retry-After delay")

// subscribe adds a watcher of counter id that wants an event at most every
// interval. The watcher gets the feed's latest state at once when the feed
// has one, else the feed's first read. The returned function removes the
// watcher; call it exactly once, when the stream ends.
func (h *watchHub) subscribe(id string, interval time.Duration) (*watcher, func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, errShuttingDown
	}
	if h.watchers >= h.max {
		return nil, nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE,
			"the server is serving its limit of %d watch streams: retry after the Retry-After delay, or read the counter instead", h.max)
	}
	f, started := h.feeds[id]
	if !started {
		ctx, cancel := context.WithCancel(context.Background())
		f = &feed{hub: h, id: id, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1),
			watchers: make(map[*watcher]struct{}), intervals: make(map[time.Duration]int)}
		h.feeds[id] = f
		h.counted.Inc()
	}
	w := &watcher{interval: interval, ch: make(chan *watchState, h.buffer), gone: make(chan struct{})}
	f.mu.Lock()
	shorter := len(f.watchers) > 0 && interval < f.shortest()
	f.watchers[w] = struct{}{}
	f.intervals[interval]++
	if f.state != nil {
		w.ch <- f.state // the buffer is empty: this never blocks
		w.sent, w.at = f.state.seq, time.Now()
	}
	f.mu.Unlock()
	if !started {
		// Only now that the feed has its watcher: a feed without watchers
		// reads once an hour (see interval), and its first read may end
		// before this goroutine runs on.
		go f.run()
	}
	if shorter {
		select {
		case f.wake <- struct{}{}:
		default: // a wake is pending already
		}
	}
	h.watchers++
	h.streams.Inc()
	var once sync.Once
	return w, func() { once.Do(func() { h.unsubscribe(f, w) }) }, nil
}

func (h *watchHub) unsubscribe(f *feed, w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watchers--
	h.streams.Dec()
	f.mu.Lock()
	f.remove(w)
	empty := len(f.watchers) == 0
	f.mu.Unlock()
	if empty {
		delete(h.feeds, f.id)
		h.counted.Dec()
		f.cancel()
	}
}

// close ends every stream (their handlers return) and refuses new ones.
func (h *watchHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
}

// remove takes w out of the feed, if it is still there. Call with f.mu held.
func (f *feed) remove(w *watcher) {
	if _, ok := f.watchers[w]; !ok {
		return
	}
	delete(f.watchers, w)
	if f.intervals[w.interval]--; f.intervals[w.interval] == 0 {
		delete(f.intervals, w.interval)
	}
}

// shortest returns the shortest interval of the feed's watchers. Call with
// f.mu held and at least one watcher.
func (f *feed) shortest() time.Duration {
	var min time.Duration
	for d := range f.intervals {
		if min == 0 || d < min {
			min = d
		}
	}
	return min
}

// run reads the counter at once, then every shortest interval from the
// start of the previous read, until the last watcher leaves.
func (f *feed) run() {
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last time.Time
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-f.wake:
			timer.Reset(time.Until(last.Add(f.interval())))
			continue
		case <-timer.C:
		}
		last = time.Now()
		ctx, cancel := context.WithTimeout(f.ctx, f.hub.readTimeout)
		r, err := f.hub.read(ctx, f.id)
		cancel()
		if f.ctx.Err() != nil {
			return
		}
		f.hub.reads.Inc()
		f.publish(r, err, time.Now())
		timer.Reset(time.Until(last.Add(f.interval())))
	}
}

// interval returns the feed's current read interval.
func (f *feed) interval() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.watchers) == 0 {
		return time.Hour // the feed is about to stop
	}
	return f.shortest()
}

// publish records a read and hands the state to every watcher that has
// not seen it and whose interval has passed.
func (f *feed) publish(r *shardcounter.Reading, err error, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev := f.state
	st := &watchState{reading: r, err: err}
	switch {
	case prev == nil:
		st.seq = 1
	case sameState(prev, st):
		st.seq = prev.seq // a fresher as_of for watchers yet to come; nothing new for the rest
	default:
		st.seq = prev.seq + 1
	}
	if err != nil && (prev == nil || prev.seq != st.seq) {
		f.logError(err)
	}
	st.frame = encodeState(st)
	f.state = st
	if len(f.watchers) == 0 {
		return
	}
	// A watcher slower than the feed is due when its interval has passed,
	// give or take half a feed tick, so that ticks' jitter does not make
	// it wait a whole extra tick.
	slack := f.shortest() / 2
	for w := range f.watchers {
		if w.sent == st.seq || now.Sub(w.at) < w.interval-slack {
			continue
		}
		select {
		case w.ch <- st:
			w.sent, w.at = st.seq, now
		default:
			f.remove(w)
			close(w.gone)
			f.hub.dropped.Inc()
		}
	}
}

// sameState reports whether a client that saw a would learn nothing from b.
func sameState(a, b *watchState) bool {
	if (a.err == nil) != (b.err == nil) {
		return false
	}
	if a.err != nil {
		return shardcounter.ErrorCode(a.err) == shardcounter.ErrorCode(b.err) &&
			shardcounter.ErrorMessage(a.err) == shardcounter.ErrorMessage(b.err)
	}
	return a.reading.Value == b.reading.Value && a.reading.Shards == b.reading.Shards
}

// logError logs a failed read once per change of error: the watchers are
// told in their streams, but an operator needs the details of an internal
// error, which the streams do not carry.
func (f *feed) logError(err error) {
	var e *shardcounter.Error
	if shardcounter.ErrorCode(err) == shardcounter.EINTERNAL || !errors.As(err, &e) {
		f.hub.log.Error("watch: reading the counter failed", "counter", f.id, "error", err)
	}
}

// readStrong is how a feed reads: a strong read through the service, with
// a read that outlived its deadline reported as the store not answering.
func (s *Server) readStrong(ctx context.Context, id string) (*shardcounter.Reading, error) {
	r, err := s.svc.ReadCounter(ctx, id, shardcounter.Strong)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && shardcounter.ErrorCode(err) == shardcounter.EINTERNAL {
		return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "the store did not answer the read in time: the stream goes on, and tells the next value read")
	}
	return r, err
}
