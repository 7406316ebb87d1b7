package http

import (
	"context"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/metrics"
)

// Defaults of ServerOptions.
const (
	DefaultMaxBodyBytes = 1 << 20 // 1 MiB, SPEC's --max-body default
	DefaultMaxBatch     = 10000   // writes per POST /v1/writes
	DefaultListLimit    = 100     // counters per page when limit is not given
	MaxListLimit        = 1000    // largest limit a list request may ask for

	// DefaultMaxConcurrent bounds the API requests served at once. Each
	// waits on the store at most RequestTimeout, so the bound caps the
	// goroutines and memory an overload or a slow store can pile up.
	DefaultMaxConcurrent = 1024
	// DefaultQueueWait is how long a request waits for a free slot before
	// it gets 503: long enough to ride out a burst, short enough that a
	// client under sustained overload hears so at once.
	DefaultQueueWait = 100 * time.Millisecond
	// DefaultRequestTimeout is the deadline of an API request's call to
	// the service, and so to the store.
	DefaultRequestTimeout = 5 * time.Second
)

// ServerOptions configure a Server. The zero value gives the defaults.
type ServerOptions struct {
	// MaxBodyBytes limits request bodies; a larger body gets 413
	// payload_too_large. Default DefaultMaxBodyBytes.
	MaxBodyBytes int64

	// MaxBatch limits the writes of one POST /v1/writes; a larger batch
	// gets 413 payload_too_large. Default DefaultMaxBatch.
	MaxBatch int

	// Logger receives internal errors, each with its request id, and at
	// debug level one line per request. Default slog.Default().
	Logger *slog.Logger

	// Ping reports whether the store answers, for GET /readyz. Default:
	// the service's own Ping method when it has one (the engine does),
	// otherwise the server is always ready.
	Ping func(ctx context.Context) error

	// AuthTokens, when not empty, are the bearer tokens accepted on /v1
	// paths; a request without one of them gets 401 unauthenticated.
	// /healthz, /readyz and /metrics never need a token. SetAuthTokens
	// replaces them while the server runs.
	AuthTokens []string

	// RetryAfter is the Retry-After of 503 replies. Default 1s.
	RetryAfter time.Duration

	// Metrics receives the server's measurements and is served at
	// /metrics. Default: a metrics.New of the server's own, which has the
	// request metrics and the Go runtime's; the caller passes its own to
	// add the engine's and the store's (see cmd/shardcounter serve).
	Metrics *metrics.Metrics

	// MaxConcurrent bounds the /v1 requests served at once. A request
	// that finds them all taken waits up to QueueWait for one, then gets
	// 503 unavailable with Retry-After: nothing was done. Negative means
	// no bound. Default DefaultMaxConcurrent.
	MaxConcurrent int

	// QueueWait is how long a request waits for a slot under
	// MaxConcurrent. Default DefaultQueueWait.
	QueueWait time.Duration

	// RequestTimeout is the deadline of each /v1 request's context, which
	// the service passes to the store, so that a slow store never makes a
	// request hang. A write whose commit outlives it gets an
	// outcome-unknown internal error (it may still apply); give the
	// engine a shorter flush timeout so that writers hear the store's own
	// answer first. Negative means none. Default DefaultRequestTimeout.
	RequestTimeout time.Duration

	// Collections, when set, serves the /v1/collections routes; without
	// it they are 404 not_found.
	Collections shardcounter.CollectionService

	// Watch configures GET /v1/counters/{id}/watch (watch.go).
	Watch WatchOptions
}

// Server serves the HTTP API over a CounterService. It is an http.Handler;
// the caller owns the listener and the http.Server. It is safe for
// concurrent use.
type Server struct {
	svc     shardcounter.CounterService
	opts    ServerOptions
	tokens  atomic.Pointer[[][]byte] // nil or empty: no token needed
	mux     *http.ServeMux
	metrics *metrics.Metrics
	slots   chan struct{} // a token per request being served; nil: no bound
	watch   *watchHub
}

// NewServer returns a Server over svc.
func NewServer(svc shardcounter.CounterService, opts ServerOptions) *Server {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Ping == nil {
		if p, ok := svc.(interface{ Ping(context.Context) error }); ok {
			opts.Ping = p.Ping
		}
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = time.Second
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.New()
	}
	if opts.MaxConcurrent == 0 {
		opts.MaxConcurrent = DefaultMaxConcurrent
	}
	if opts.QueueWait <= 0 {
		opts.QueueWait = DefaultQueueWait
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	s := &Server{svc: svc, opts: opts, mux: http.NewServeMux(), metrics: opts.Metrics}
	if opts.MaxConcurrent > 0 {
		s.slots = make(chan struct{}, opts.MaxConcurrent)
	}
	s.SetAuthTokens(opts.AuthTokens)

	// Patterns carry no method: each route dispatches on the method itself
	// so that a wrong method gets the API's JSON error body, not the
	// mux's plain-text 405.
	s.mux.Handle("/v1/counters", s.methods(map[string]http.HandlerFunc{
		http.MethodGet: s.handleList,
	}))
	s.mux.Handle("/v1/counters/{$}", http.HandlerFunc(s.handleEmptyID))
	s.mux.Handle("/v1/counters/{id}", s.methods(map[string]http.HandlerFunc{
		http.MethodGet:    s.handleGet,
		http.MethodPut:    s.handleCreate,
		http.MethodPatch:  s.handleReshard,
		http.MethodDelete: s.handleDelete,
	}))
	s.mux.Handle("/v1/counters/{id}/increment", s.methods(map[string]http.HandlerFunc{
		http.MethodPost: func(w http.ResponseWriter, r *http.Request) { s.handleWrite(w, r, false) },
	}))
	s.mux.Handle("/v1/counters/{id}/decrement", s.methods(map[string]http.HandlerFunc{
		http.MethodPost: func(w http.ResponseWriter, r *http.Request) { s.handleWrite(w, r, true) },
	}))
	s.mux.Handle("/v1/writes", s.methods(map[string]http.HandlerFunc{
		http.MethodPost: s.handleWrites,
	}))
	if opts.Collections != nil {
		s.routeCollections()
	}
	s.routeWatch()
	s.mux.Handle("/healthz", s.methods(map[string]http.HandlerFunc{
		http.MethodGet: s.handleHealthz,
	}))
	s.mux.Handle("/readyz", s.methods(map[string]http.HandlerFunc{
		http.MethodGet: s.handleReadyz,
	}))
	s.mux.Handle("/metrics", s.methods(map[string]http.HandlerFunc{
		http.MethodGet: s.metrics.Handler().ServeHTTP,
	}))
	s.mux.Handle("/", http.HandlerFunc(s.handleNotFound))
	return s
}

// SetAuthTokens replaces the bearer tokens accepted on /v1 paths; none
// means no token is needed. Requests already past the check are not
// affected. It is safe to call while the server serves (serve calls it on
// SIGHUP).
func (s *Server) SetAuthTokens(tokens []string) {
	bs := make([][]byte, len(tokens))
	for i, t := range tokens {
		bs[i] = []byte(t)
	}
	s.tokens.Store(&bs)
}

// requestIDKey is the context key of the request's log id.
type requestIDKey struct{}

// ServeHTTP implements http.Handler. It gives every request an id (the
// client's X-Request-Id when it is sane, else a random one) that is
// echoed in the reply and logged with internal errors, checks the bearer
// token on /v1 paths, bounds the /v1 requests served at once and their
// time, records each request in the metrics and (at debug level) the
// log, and turns a panic into a logged 500.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("X-Request-Id")
	if !saneRequestID(id) {
		id = newRequestID()
	}
	w.Header().Set("X-Request-Id", id)
	api := r.URL.Path == "/v1" || strings.HasPrefix(r.URL.Path, "/v1/")
	short := api && !isWatch(r) // a watch stream is bounded by WatchOptions instead
	// One context and one copy of the request for the id and, on the API,
	// the deadline: each WithContext copies the whole request.
	ctx := context.WithValue(r.Context(), requestIDKey{}, id)
	if short && s.opts.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.RequestTimeout)
		defer cancel()
	}
	r = r.WithContext(ctx)
	sw := &statusWriter{ResponseWriter: w}
	start := time.Now()
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.opts.Logger.Error("panic serving request", "request_id", id, "method", r.Method,
				"path", r.URL.EscapedPath(), "panic", fmt.Sprint(v))
			if sw.status == 0 {
				s.error(sw, r, errors.New("panic"))
			}
		}
		took := time.Since(start)
		route := r.Pattern // set by the mux; empty when the request never reached it
		if route == "" {
			_, route = s.mux.Handler(r)
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK // a handler that wrote nothing
		}
		s.metrics.ObserveRequest(route, methodLabel(r.Method), status, took)
		if s.opts.Logger.Enabled(r.Context(), slog.LevelDebug) { // skip the work on the hot path
			s.opts.Logger.Debug("request", "request_id", id, "method", r.Method, "route", route,
				"path", r.URL.EscapedPath(), "status", status, "duration", took)
		}
	}()
	if api && !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="shardcounter"`)
		s.error(sw, r, shardcounter.Errorf(shardcounter.EUNAUTHENTICATED,
			"missing or wrong bearer token: send the header Authorization: Bearer TOKEN with a token from the server's --auth-token-file"))
		return
	}
	if err := checkPath(r.URL.EscapedPath()); err != nil {
		s.error(sw, r, err)
		return
	}
	if short {
		if !s.acquire(r.Context()) {
			s.metrics.ObserveRejected()
			s.error(sw, r, shardcounter.Errorf(shardcounter.EUNAVAILABLE,
				"the server is serving its limit of %d concurrent requests: nothing was done, retry after the Retry-After delay", cap(s.slots)))
			return
		}
		defer s.release()
	}
	s.mux.ServeHTTP(sw, r)
}

// acquire takes a slot for an API request, waiting up to QueueWait for
// one. It reports false when none came free.
func (s *Server) acquire(ctx context.Context) bool {
	if s.slots == nil {
		return true
	}
	select {
	case s.slots <- struct{}{}:
	default:
		t := time.NewTimer(s.opts.QueueWait)
		defer t.Stop()
		select {
		case s.slots <- struct{}{}:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	s.metrics.InFlight().Inc()
	return true
}

func (s *Server) release() {
	if s.slots != nil {
		s.metrics.InFlight().Dec()
		<-s.slots
	}
}

// methodLabel bounds the method label of the metrics to the methods the
// API knows, since a client may send any token as a method.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return m
	}
	return "other"
}

// checkPath refuses paths with empty, "." or ".." segments. The mux would
// answer them with a plain-text redirect to the cleaned path, which for
// /v1/counters/{id} is another route: an id must be one escaped segment.
func checkPath(escaped string) error {
	rest := strings.TrimPrefix(escaped, "/")
	for {
		seg, after, more := strings.Cut(rest, "/")
		if seg == "." || seg == ".." || (seg == "" && more) {
			return shardcounter.Errorf(shardcounter.EINVALID,
				"path %s has an empty, . or .. segment: URL-escape counter ids, sending . and .. as %%2E and %%2E%%2E", escaped)
		}
		if !more {
			return nil
		}
		rest = after
	}
}

// authorized reports whether r carries one of the server's tokens, or
// the server has none. It
// compares against every token in constant time, so the reply's timing
// does not reveal how much of a token matched or which one.
func (s *Server) authorized(r *http.Request) bool {
	p := s.tokens.Load()
	if p == nil || len(*p) == 0 {
		return true
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return false
	}
	got := []byte(token)
	match := 0
	for _, want := range *p {
		match |= subtle.ConstantTimeCompare(got, want)
	}
	return match == 1
}

// methods dispatches on the request method, answering any other method
// with 405, an Allow header and the API's error body.
func (s *Server) methods(handlers map[string]http.HandlerFunc) http.Handler {
	allowed := make([]string, 0, len(handlers))
	for m := range handlers {
		allowed = append(allowed, m)
	}
	slices.Sort(allowed)
	allow := strings.Join(allowed, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := handlers[r.Method]
		if !ok && r.Method == http.MethodHead {
			h, ok = handlers[http.MethodGet]
		}
		if !ok {
			w.Header().Set("Allow", allow)
			s.writeError(w, r, http.StatusMethodNotAllowed, shardcounter.EINVALID,
				fmt.Sprintf("method %s is not allowed on %s: use %s", r.Method, r.URL.EscapedPath(), allow))
			return
		}
		h(w, r)
	})
}

func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	msg := fmt.Sprintf("no API route %s: see docs/API.md for the routes", r.URL.EscapedPath())
	if strings.HasPrefix(r.URL.EscapedPath(), "/v1/counters/") {
		msg = fmt.Sprintf("no API route %s: a counter id must be one URL-escaped path segment (escape '/' as %%2F)", r.URL.EscapedPath())
	}
	s.error(w, r, shardcounter.Errorf(shardcounter.ENOTFOUND, "%s", msg))
}

func (s *Server) handleEmptyID(w http.ResponseWriter, r *http.Request) {
	s.error(w, r, shardcounter.ValidateID("counter id", ""))
}

// counterID returns the request's counter id, validated.
func counterID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return "", err
	}
	return id, nil
}

// plainCounterID returns the request's counter id, validated, for the
// routes that take no query parameters.
func plainCounterID(r *http.Request) (string, error) {
	id, err := counterID(r)
	if err != nil {
		return "", err
	}
	_, err = query(r)
	return id, err
}

// query returns r's query parameters, refusing any not in allowed and
// any given twice, as unknown JSON fields are refused: a typo such as
// ?limt=5 is an error, not a silent default.
func query(r *http.Request, allowed ...string) (url.Values, error) {
	if r.URL.RawQuery == "" {
		return nil, nil // url.Values' methods read a nil map as empty
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "query string is malformed: URL-escape parameter values")
	}
	for k, v := range q {
		if !slices.Contains(allowed, k) {
			if len(allowed) == 0 {
				return nil, shardcounter.Errorf(shardcounter.EINVALID, "unknown query parameter %q: this route takes none", k)
			}
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "unknown query parameter %q: the parameters are %s", k, strings.Join(allowed, ", "))
		}
		if len(v) > 1 {
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "query parameter %q is given %d times: give it once", k, len(v))
		}
	}
	return q, nil
}

// readBody reads r's body, up to MaxBodyBytes. A body that is not empty
// must be JSON: Content-Type application/json (charset utf-8 if any), a
// +json type, or no Content-Type at all.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	var body []byte
	var err error
	if n := r.ContentLength; n >= 0 && n <= s.opts.MaxBodyBytes {
		// The common case, a small body of known length: read it into a
		// buffer of that size, not io.ReadAll's 512 bytes and growth. A
		// body shorter than announced is an error, as net/http would
		// report it.
		body = make([]byte, n)
		if _, err = io.ReadFull(r.Body, body); err == io.ErrUnexpectedEOF {
			err = fmt.Errorf("body ended after fewer than the %d bytes of its Content-Length", n)
		}
	} else {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, shardcounter.Errorf(shardcounter.ETOOLARGE,
				"request body is over the limit of %d bytes: send less, or split a batch into smaller ones", tooLarge.Limit)
		}
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "request body could not be read: %v", err)
	}
	if len(body) == 0 {
		return body, nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/json" { // the usual one needs no parsing
		mt, params, err := mime.ParseMediaType(ct)
		switch {
		case err != nil:
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "Content-Type %q cannot be parsed: send Content-Type: application/json", ct)
		case mt != "application/json" && !strings.HasSuffix(mt, "+json"):
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "Content-Type %q is not supported: send JSON with Content-Type: application/json", mt)
		case params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8"):
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "charset %q is not supported: send UTF-8", params["charset"])
		}
	}
	return body, nil
}

// PUT /v1/counters/{id}
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	id, body, err := s.bodyOf(w, r, plainCounterID)
	var opts shardcounter.CreateOptions
	if err == nil {
		opts, err = decodeCreate(body)
	}
	var c *shardcounter.Counter
	created := false
	if err == nil {
		c, created, err = s.svc.CreateCounter(r.Context(), id, opts)
	}
	status := http.StatusOK // the counter existed with these options: a retry
	if err == nil && created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/counters/"+EscapeID(c.ID))
	}
	s.reply(w, r, status, c, err)
}

// GET /v1/counters/{id}?consistency=strong|cached
func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	id, err := counterID(r)
	var q url.Values
	if err == nil {
		q, err = query(r, "consistency")
	}
	c := shardcounter.Consistency(q.Get("consistency"))
	if err == nil && c != "" && c != shardcounter.Strong && c != shardcounter.Cached {
		err = shardcounter.Errorf(shardcounter.EINVALID, "consistency is %q: give strong or cached", c)
	}
	if err != nil {
		s.error(w, r, err)
		return
	}
	if c == "" {
		c = shardcounter.Strong
	}
	reading, err := s.svc.ReadCounter(r.Context(), id, c)
	if err != nil {
		s.error(w, r, err)
		return
	}
	if reading.Consistency == shardcounter.Cached {
		s.metrics.ObserveCachedRead(time.Since(reading.AsOf))
	}
	s.writeJSON(w, http.StatusOK, reading)
}

// POST /v1/counters/{id}/increment and .../decrement
func (s *Server) handleWrite(w http.ResponseWriter, r *http.Request, decrement bool) {
	id, body, err := s.bodyOf(w, r, plainCounterID)
	var delta int64
	var requestID string
	if err == nil {
		delta, requestID, err = decodeWrite(body, decrement)
	}
	var res *shardcounter.WriteResult
	if err == nil {
		res, err = s.svc.WriteCounter(r.Context(), shardcounter.Write{Counter: id, Delta: delta, RequestID: requestID})
	}
	if err == nil && res == nil {
		err = errors.New("WriteCounter returned neither a result nor an error")
	}
	if err == nil && res.Error != nil {
		err = res.Error
	}
	s.reply(w, r, http.StatusOK, res, err)
}

// PATCH /v1/counters/{id}
func (s *Server) handleReshard(w http.ResponseWriter, r *http.Request) {
	id, body, err := s.bodyOf(w, r, plainCounterID)
	var shards int
	if err == nil {
		shards, err = decodeReshard(body)
	}
	var c *shardcounter.Counter
	if err == nil {
		c, err = s.svc.ReshardCounter(r.Context(), id, shards)
	}
	s.reply(w, r, http.StatusOK, c, err)
}

// DELETE /v1/counters/{id}
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	id, err := plainCounterID(r)
	if err == nil {
		err = s.svc.DeleteCounter(r.Context(), id)
	}
	s.reply(w, r, http.StatusNoContent, nil, err)
}

// GET /v1/counters?prefix=P&limit=N&page_token=T
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	opts, err := listOptions(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	list, err := s.svc.ListCounters(r.Context(), opts)
	if err != nil {
		s.error(w, r, err)
		return
	}
	resp := ListResponse{Counters: list.Counters}
	if resp.Counters == nil {
		resp.Counters = []*shardcounter.Counter{} // "counters":[], never null
	}
	if list.Next != "" {
		resp.NextPageToken = encodePageToken(opts.Prefix, list.Next)
	}
	s.writeJSON(w, http.StatusOK, resp)
}

// listOptions validates the query of a list request.
func listOptions(r *http.Request) (shardcounter.ListOptions, error) {
	q, err := query(r, "prefix", "limit", "page_token")
	if err != nil {
		return shardcounter.ListOptions{}, err
	}
	opts := shardcounter.ListOptions{Prefix: q.Get("prefix"), Limit: DefaultListLimit}
	if opts.Prefix != "" {
		if err := shardcounter.ValidateID("prefix", opts.Prefix); err != nil {
			return opts, err
		}
	}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > MaxListLimit {
			return opts, shardcounter.Errorf(shardcounter.EINVALID,
				"limit is %q: give a whole number from 1 to %d", q.Get("limit"), MaxListLimit)
		}
		opts.Limit = n
	}
	if t := q.Get("page_token"); t != "" {
		if opts.After, err = decodePageToken(t, opts.Prefix); err != nil {
			return opts, err
		}
	}
	return opts, nil
}

// POST /v1/writes
func (s *Server) handleWrites(w http.ResponseWriter, r *http.Request) {
	_, err := query(r)
	var body []byte
	if err == nil {
		body, err = s.readBody(w, r)
	}
	var writes []shardcounter.Write
	if err == nil {
		writes, err = decodeWrites(body, s.opts.MaxBatch)
	}
	if err != nil {
		s.error(w, r, err)
		return
	}
	results, err := s.svc.WriteBatch(r.Context(), writes)
	if err == nil && len(results) != len(writes) {
		err = fmt.Errorf("WriteBatch returned %d results for %d writes", len(results), len(writes))
	}
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, WritesResponse{Results: results})
}

// GET /healthz: the process runs.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// GET /readyz: the store answers.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if s.opts.Ping != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.opts.Ping(ctx); err != nil {
			s.opts.Logger.Warn("store not ready", "request_id", r.Context().Value(requestIDKey{}), "error", err)
			s.error(w, r, shardcounter.Errorf(shardcounter.EUNAVAILABLE,
				"the store does not answer: %s; check that it runs and is reachable from the server", shardcounter.ErrorMessage(err)))
			return
		}
	}
	s.writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// writeJSON writes v as the JSON reply with the given status.
func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		s.opts.Logger.Debug("writing reply", "error", err)
	}
}

// error replies with err. Its status follows from its code alone. An
// internal error is logged with the request id, which the reply names so
// that an operator can find the log line; its details are not shown.
func (s *Server) error(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := shardcounter.ErrorCode(err), shardcounter.ErrorMessage(err)
	if shardcounter.IsOutcomeUnknown(err) && code != shardcounter.EINTERNAL {
		// 503 promises the write was not applied; this one may have been.
		code = shardcounter.EINTERNAL
	}
	if code == shardcounter.EINTERNAL {
		id, _ := r.Context().Value(requestIDKey{}).(string)
		s.opts.Logger.Error("internal error", "request_id", id, "method", r.Method,
			"path", r.URL.EscapedPath(), "error", err)
		var e *shardcounter.Error
		if errors.As(err, &e) {
			msg = fmt.Sprintf("%s (request id %s)", msg, id)
		} else {
			msg = fmt.Sprintf("internal error: the server logged it with request id %s; report it with that id", id)
		}
	}
	s.writeError(w, r, ErrorStatusCode(code), code, msg)
}

// writeError writes the API's error body.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(int((s.opts.RetryAfter+time.Second-1)/time.Second)))
	}
	s.writeJSON(w, status, ErrorResponse{Error: ErrorBody{Code: code, Message: msg}})
}

// EscapeID returns a counter id escaped as one path segment. Beyond
// url.PathEscape it escapes "." and "..", which HTTP path cleaning would
// otherwise resolve away.
func EscapeID(id string) string {
	switch id {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(id)
}

// saneRequestID reports whether a client's X-Request-Id can go into logs
// as is: short and printable ASCII.
func saneRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// newRequestID returns 16 random hex digits. The id only ties a reply to
// its log line, so it needs to be unique, not secret: math/rand/v2's
// generator, which needs no system call per request, will do.
func newRequestID() string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	return hex.EncodeToString(b[:])
}

// statusWriter remembers the status of a reply, for the request log and
// so that a panic after the reply started does not write a second one.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
