package http

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/authtoken"
)

// request is what the middleware learns about a request before its
// handler runs: the id it is logged with and, on the API, its body, read
// in full.
type request struct {
	w    statusWriter // one allocation for the state and the writer
	id   string
	body []byte
}

// requestKey is the context key of the *request.
type requestKey struct{}

// requestOf returns what the middleware learned about r.
func requestOf(r *http.Request) *request {
	if req, ok := r.Context().Value(requestKey{}).(*request); ok {
		return req
	}
	return &request{} // a handler called without ServeHTTP, as no route is
}

// ServeHTTP implements http.Handler. It gives every request an id (the
// client's X-Request-Id when it is sane, else a random one) that is
// echoed in the reply and logged with internal errors, checks the bearer
// token on /v1 paths, reads an API request's body in full (bounded by
// MaxBodyBytes and BodyTimeout) and only then takes one of the
// MaxConcurrent slots, bounds the request's time, records each request in
// the metrics and (at debug level) the log, and turns a panic into a
// logged 500.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := &request{id: r.Header.Get("X-Request-Id")}
	if !saneRequestID(req.id) {
		req.id = newRequestID()
	}
	id := req.id
	w.Header()["X-Request-Id"] = []string{id} // canonical already: no Set

	api := r.URL.Path == "/v1" || strings.HasPrefix(r.URL.Path, "/v1/")
	short := api && !isWatch(r) // a watch stream is bounded by WatchOptions instead
	// One context and one copy of the request for the id and, on the API,
	// the deadline: each WithContext copies the whole request.
	valCtx := context.WithValue(r.Context(), requestKey{}, req)
	ctx := valCtx
	if short && s.opts.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.RequestTimeout)
		defer cancel()
	}
	r = r.WithContext(ctx)
	req.w.ResponseWriter = w
	sw := &req.w
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
		s.unauthorized(sw, r)
		return
	}
	if err := checkPath(r.URL.EscapedPath()); err != nil {
		s.error(sw, r, err)
		return
	}
	if api {
		// The body first: a slot held while a slow client sends its body
		// would let a few such clients stop the server.
		var err error
		var taken int64
		req.body, taken, err = s.readBody(sw, r)
		defer s.bodies.give(taken)
		if err != nil {
			s.bodyError(sw, r, err)
			return
		}
		defer putBody(req.body) // decoders copy what they keep
		if short && s.opts.RequestTimeout > 0 && time.Since(start) > s.opts.RequestTimeout/10 {
			// The body took a while to arrive (it has BodyTimeout of its
			// own): the deadline of the request's work, down to the
			// store, counts from now, so that a write is not cut short,
			// its outcome unknown, for its client's slow upload. Rare, so
			// the usual request pays for one copy of itself, not two.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(valCtx, s.opts.RequestTimeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
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
// the server has none.
func (s *Server) authorized(r *http.Request) bool {
	if !s.tokens.Required() {
		return true
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && s.tokens.Match([]byte(token))
}

// bodyError answers a request whose body could not be taken: 415 for a
// Content-Encoding, the error's own status otherwise.
func (s *Server) bodyError(w http.ResponseWriter, r *http.Request, err error) {
	var ue unsupportedEncoding
	if errors.As(err, &ue) {
		s.writeError(w, r, http.StatusUnsupportedMediaType, ue.err.Code, ue.err.Message)
		return
	}
	s.error(w, r, err)
}

// unauthorized answers a request without one of the server's tokens:
// 401, or, once its address has failed too often (AuthGuard), 429
// resource_exhausted with Retry-After. Either way nothing was done.
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request) {
	if v := s.guard.Fail(authtoken.HTTP, r.RemoteAddr); v.Throttled {
		secs := int((v.Wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		s.error(w, r, shardcounter.Errorf(shardcounter.EEXHAUSTED,
			"too many failed authentications from your address: nothing was done; retry after %d s with a token from the server's --auth-token-file", secs))
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="shardcounter"`)
	s.error(w, r, shardcounter.Errorf(shardcounter.EUNAUTHENTICATED,
		"missing or wrong bearer token: send the header Authorization: Bearer TOKEN with a token from the server's --auth-token-file"))
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
	var x [16]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	hex.Encode(x[:], b[:])
	return string(x[:])
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
