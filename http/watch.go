package http

import (
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/acl"
)

// Limits and defaults of GET /v1/counters/{id}/watch.
const (
	DefaultWatchInterval = time.Second
	MinWatchInterval     = 100 * time.Millisecond
	MaxWatchInterval     = time.Hour

	// DefaultMaxWatchers bounds the watch streams a server holds at once.
	// A stream costs its connection and its goroutines, some 27 KB
	// (BenchmarkWatchers measures it), so the default is some 270 MB.
	DefaultMaxWatchers = 10000
	// DefaultWatchHeartbeat is how often an idle stream gets a comment:
	// well inside the 60 s after which common proxies close a silent
	// connection.
	DefaultWatchHeartbeat = 15 * time.Second
	// DefaultWatchWriteTimeout is how long a client may take to accept one
	// event before its stream is closed.
	DefaultWatchWriteTimeout = 10 * time.Second
	// DefaultWatchBuffer is how many events may wait for a slow client
	// before it is dropped.
	DefaultWatchBuffer = 4
)

// WatchOptions configure the watch endpoint, in ServerOptions.Watch. The
// zero value gives the defaults.
type WatchOptions struct {
	// MaxWatchers bounds the watch streams open at once; one more gets 503
	// unavailable with Retry-After. Watch streams do not count against
	// ServerOptions.MaxConcurrent, which bounds short requests. Default
	// DefaultMaxWatchers.
	MaxWatchers int
	// Heartbeat is how often a stream with no event gets a comment line.
	// Default DefaultWatchHeartbeat.
	Heartbeat time.Duration
	// WriteTimeout bounds the write of one event or heartbeat; a client
	// that does not take it in time is disconnected. Default
	// DefaultWatchWriteTimeout.
	WriteTimeout time.Duration
	// Buffer is the events queued for one client. A client that has not
	// taken them when the next comes is dropped, so that it holds nothing
	// of the others'. Default DefaultWatchBuffer.
	Buffer int
}

func (o *WatchOptions) setDefaults() {
	if o.MaxWatchers <= 0 {
		o.MaxWatchers = DefaultMaxWatchers
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultWatchHeartbeat
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWatchWriteTimeout
	}
	if o.Buffer <= 0 {
		o.Buffer = DefaultWatchBuffer
	}
}

// startWatch makes the watch endpoint's hub.
func (s *Server) startWatch() {
	s.opts.Watch.setDefaults()
	readTimeout := s.opts.RequestTimeout
	if readTimeout <= 0 {
		readTimeout = DefaultRequestTimeout
	}
	s.watch = newWatchHub(s.readStrong, s.opts.Watch, readTimeout, s.opts.Logger, s.metrics.Registry())
}

// EndWatches ends every watch stream and refuses new ones (503). Call it
// when the server shuts down: http.Server.Shutdown waits for requests in
// flight, and a stream never finishes by itself. Register it with
// http.Server.RegisterOnShutdown.
func (s *Server) EndWatches() { s.watch.close() }

// GET /v1/counters/{id}/watch?interval=1s
//
// The stream starts with the counter's reading and then has one event per
// change of value, at most every interval. The first reading is as fresh
// as the counter's shared feed: up to one interval old when others
// already watch it. With a Last-Event-ID equal to the current value, the
// first event is left out: the client has it.
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request) {
	id, interval, have, haveOK, err := watchParams(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	wt, leave, err := s.watch.subscribe(id, interval)
	if err != nil {
		s.error(w, r, err)
		return
	}
	defer leave()

	// Until the first state, the reply can still be an ordinary error:
	// 404 for a counter that does not exist, 503 for a store that does
	// not answer.
	var first *watchState
	select {
	case first = <-wt.ch:
	case <-wt.gone:
		return
	case <-s.watch.done:
		s.error(w, r, errShuttingDown)
		return
	case <-r.Context().Done():
		return
	}
	if first.err != nil {
		s.error(w, r, first.err)
		return
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: pass events on as they come
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return
	}
	// Each write gets its own deadline, which replaces the server's
	// WriteTimeout (a whole reply's): a stream is as long as its client
	// wants, but one event must not wait on a stalled client for long.
	rc := http.NewResponseController(w)
	opts := s.opts.Watch
	send := func(frame []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(opts.WriteTimeout))
		if _, err := w.Write(frame); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// A reconnection time spread over 1–3 s, so that the watchers of a
	// restarted server do not all come back in the same instant.
	if !send(retryFrame(time.Second + rand.N(2*time.Second))) {
		return
	}
	if !haveOK || first.reading.Value != have {
		if !send(first.frame) {
			return
		}
	}
	heartbeat := time.NewTicker(opts.Heartbeat)
	defer heartbeat.Stop()
	// A stream outlives the check of its request: it ends as soon as its
	// user may no longer watch its counter (SetUsers, SetAuthTokens).
	users := s.users.Changed()
	if !s.mayWatch(r, id) {
		return
	}
	for {
		select {
		case <-users:
			if users = s.users.Changed(); !s.mayWatch(r, id) {
				return
			}
		case st := <-wt.ch:
			if !send(st.frame) {
				return
			}
			if shardcounter.ErrorCode(st.err) == shardcounter.ENOTFOUND {
				return // deleted: a reconnect gets 404, which ends an EventSource
			}
			heartbeat.Reset(opts.Heartbeat)
		case <-heartbeat.C:
			if !send(heartbeatFrame) {
				return
			}
		case <-wt.gone:
			return
		case <-s.watch.done:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// mayWatch reports whether r's credentials still authenticate a user who
// may watch the counter id.
func (s *Server) mayWatch(r *http.Request, id string) bool {
	u := s.authenticate(r)
	return u == acl.Everyone || u != nil && u.Allowed("watchcounter", CatRead) && u.Key(id, acl.AccessRead)
}

// watchParams reads a watch request: the counter id, the interval, and
// the value of the last event the client saw (Last-Event-ID), if any.
func watchParams(r *http.Request) (id string, interval time.Duration, have int64, haveOK bool, err error) {
	if id, err = counterID(r); err != nil {
		return
	}
	q, err := query(r, "interval")
	if err != nil {
		return
	}
	if interval, err = parseWatchInterval(q.Get("interval")); err != nil {
		return
	}
	have, haveOK, err = parseLastEventID(r.Header.Get("Last-Event-ID"))
	return
}
