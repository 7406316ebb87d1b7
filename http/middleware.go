package http

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/trace"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/acl"
	"github.com/shardcounter/shardcounter/internal/authtoken"
	"github.com/shardcounter/shardcounter/metrics"
)

// request is what the middleware learns about a request before its
// handler runs: the id it is logged with and, on the API, its body, read
// in full.
type request struct {
	w    statusWriter // one allocation for the state and the writer
	id   string
	body []byte
	// idBytes holds a request id the server made, and idHeader the
	// X-Request-Id value of the reply: parts of the one allocation.
	idBytes  [16]byte
	idHeader [1]string
	// ctx is the context the route's handler gets (serveRoute): r's,
	// with this request as the value of requestKey.
	ctx requestContext
	// dctx is, on the API, ctx with the request's deadline.
	dctx deadlineContext
	// start is when ServeHTTP took the request.
	start time.Time
	// bodyTaken is what the body's bytes hold of the body budget, given
	// back when the handler is done or, sooner, by doneWithBody.
	bodyTaken int64
	user      *acl.User // who sent it, once authenticated (requireToken)
	// series is the request metrics' series of its route and method,
	// set by serveRoute; nil for a request no route served.
	series *metrics.RequestSeries
}

// requestKey is the context key of the *request.
type requestKey struct{}

// requestContext is a request's context with its *request as the value
// of requestKey: context.WithValue's work without its allocation, since
// it is part of the request's.
type requestContext struct {
	context.Context
	req *request
}

func (c *requestContext) Value(key any) any {
	if _, ok := key.(requestKey); ok {
		return c.req
	}
	return c.Context.Value(key)
}

// requestOf returns what the middleware learned about r.
func requestOf(r *http.Request) *request {
	if req, ok := r.Context().Value(requestKey{}).(*request); ok {
		return req
	}
	return &request{} // a handler called without ServeHTTP, as no route is
}

// writerRequest returns the request that ServeHTTP made for the reply w.
func writerRequest(w http.ResponseWriter) *request {
	if sw, ok := w.(*statusWriter); ok && sw.req != nil {
		return sw.req
	}
	return &request{} // a handler called without ServeHTTP
}

// ServeHTTP implements http.Handler. It gives every request an id (the
// client's X-Request-Id when it is sane, else a random one) that is
// echoed in the reply and logged with internal errors, refuses paths the
// mux would redirect, records each request in the metrics and (at debug
// level) the log, turns a panic into a logged 500, and hands the request
// to the mux, which the route table wires (routes.go): serveRoute does
// what the route's class asks before its handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := &request{id: r.Header.Get("X-Request-Id")}
	if !saneRequestID(req.id) {
		req.id = newRequestID(&req.idBytes)
	}
	id := req.id
	req.idHeader[0] = id
	w.Header()["X-Request-Id"] = req.idHeader[:] // canonical already: no Set
	req.w.ResponseWriter = w
	req.w.req = req
	sw := &req.w
	start := time.Now()
	req.start = start
	var span trace.Span
	if s.opts.Tracer != nil {
		r, span = s.startSpan(r)
	}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.opts.Logger.Error("panic serving request", "request_id", id, "method", r.Method,
				"path", r.URL.EscapedPath(), "panic", fmt.Sprint(v))
			if sw.status == 0 {
				s.error(sw, r.WithContext(context.WithValue(r.Context(), requestKey{}, req)), errors.New("panic"))
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
		if req.series != nil {
			req.series.Observe(status, took) // its route's, bound once
		} else {
			s.metrics.ObserveRequest(route, methodLabel(r.Method), status, took)
		}
		if span != nil {
			endSpan(span, r, route, status, id)
		}
		if s.opts.Logger.Enabled(r.Context(), slog.LevelDebug) { // skip the work on the hot path
			s.opts.Logger.Debug("request", "request_id", id, "method", r.Method, "route", route,
				"path", r.URL.EscapedPath(), "status", status, "duration", took)
		}
	}()
	if err := checkPath(r.URL.EscapedPath()); err != nil {
		if tokenSpace(r.URL.Path) && s.authenticate(r) == nil {
			s.unauthorized(sw, r) // the token first, as on the routes
			return
		}
		s.error(sw, r, err)
		return
	}
	s.mux.ServeHTTP(sw, r)
}

// tokenSpace reports whether a path is under /v1 or /admin, where every
// route needs the token (Route.NeedsToken): a path there that is no
// route, or that the mux cannot route, needs it too, so that what a
// client without one learns is that it needs one.
func tokenSpace(path string) bool {
	for _, p := range [...]string{"/v1", "/admin"} {
		if rest, ok := strings.CutPrefix(path, p); ok && (rest == "" || rest[0] == '/') {
			return true
		}
	}
	return false
}

// requireToken wraps the handler of a pattern whose routes need the
// token: a request without one of the server's tokens (or a user's
// password) gets 401 (or 429) before its method is looked at. The user
// it authenticates as is the request's, for serveRoute's permission
// check.
func (s *Server) requireToken(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := s.authenticate(r)
		if u == nil {
			s.unauthorized(w, r)
			return
		}
		writerRequest(w).user = u
		h.ServeHTTP(w, r)
	})
}

// serveRoute returns the handler of rt, which does what rt's class asks
// before rt's handler runs: for the API, it reads the body in full
// (bounded by MaxBodyBytes, BodyTimeout and MaxBodyTotal) and only then
// takes one of the MaxConcurrent slots, and bounds the request's time.
// The token was checked before (requireToken); the user's permission for
// the route and the keys of its path and query is checked here, before
// the body is read (permit), and the keys of the body by the handler
// that decodes it (permitKeys).
func (s *Server) serveRoute(rt *Route) http.HandlerFunc {
	handle, class := rt.handle, rt.Class
	body := class == ClassAPI || class == ClassStream
	short := class == ClassAPI // a watch stream is bounded by WatchOptions instead
	pm := newRoutePerm(rt)
	series := s.metrics.RequestSeries(rt.Pattern, rt.Method)
	return func(w http.ResponseWriter, r *http.Request) {
		req := writerRequest(w)
		if r.Method == rt.Method { // not HEAD served by GET's handler
			req.series = series
		}
		start := req.start // ServeHTTP's clock reading, taken microseconds ago
		if start.IsZero() {
			start = time.Now()
		}
		if req.user != nil && req.user != acl.Everyone {
			if !s.permit(w, r, req.user, pm) {
				return
			}
			if s.opts.Audit.Wants(pm.cats, false) {
				defer s.auditDone(w, r, req.user, pm)
			}
		}
		// One context and one copy of the request for the request's facts
		// and, on the API, the deadline: each WithContext copies the whole
		// request.
		req.ctx = requestContext{Context: r.Context(), req: req}
		valCtx := context.Context(&req.ctx)
		ctx := valCtx
		watched := false // whether the deadline watcher bounds the body
		if short && s.opts.RequestTimeout > 0 {
			// context.WithTimeout's work, without its allocations and
			// runtime timer a request (deadlineContext); and the body's
			// BodyTimeout, without setting and clearing the connection's
			// read deadline.
			var bw http.ResponseWriter
			var bodyDeadline time.Time
			if watched = body && s.opts.BodyTimeout > 0 && r.Body != nil && r.Body != http.NoBody; watched {
				bw, bodyDeadline = w, start.Add(s.opts.BodyTimeout)
			}
			s.deadlines.start(&req.dctx, valCtx, start.Add(s.opts.RequestTimeout), bw, bodyDeadline)
			defer s.deadlines.stop(&req.dctx)
			ctx = &req.dctx
		}
		r = r.WithContext(ctx)
		if body {
			// The body first: a slot held while a slow client sends its
			// body would let a few such clients stop the server.
			var err error
			req.body, req.bodyTaken, err = s.readBody(w, r, watched)
			defer func() { s.bodies.give(req.bodyTaken) }() // unless doneWithBody gave it
			if watched && s.deadlines.bodyRead(&req.dctx) && err == nil {
				// Its last byte came as the watcher cut the reads at the
				// body's deadline: late all the same, and the
				// connection's reads now fail.
				putBody(req.body)
				req.body, err = nil, s.bodyLate(w)
			}
			if err != nil {
				s.bodyError(w, r, err)
				return
			}
			// Decoders copy what they keep. req.body is read at the end,
			// not now: a deferred call's argument would keep a body
			// doneWithBody let go of from the collector.
			defer func() { putBody(req.body) }()
			// What decoding the body will hold comes from the budget too,
			// before the handler decodes it. The body is in: rather than
			// drop it at once, wait up to QueueWait for bodies still
			// arriving to be refused, or for handlers to finish.
			decoded, err := decodedSize(req.body)
			if err == nil && int64(len(req.body))+decoded > s.opts.MaxBodyTotal {
				err = shardcounter.Errorf(shardcounter.ETOOLARGE,
					"request body of %d bytes would hold %d bytes more once decoded, over the server's --max-body-total of %d: send fewer values",
					len(req.body), decoded, s.opts.MaxBodyTotal)
			}
			if err != nil {
				s.error(w, r, err)
				return
			}
			if !s.bodies.takeWait(r.Context(), decoded, s.opts.QueueWait) {
				s.metrics.ObserveBodyRejected()
				s.error(w, r, s.bodiesFull())
				return
			}
			defer s.bodies.give(decoded)
			if short && s.opts.RequestTimeout > 0 && time.Since(start) > s.opts.RequestTimeout/10 {
				// The body took a while to arrive (it has BodyTimeout of
				// its own): the deadline of the request's work, down to
				// the store, counts from now, so that a write is not cut
				// short, its outcome unknown, for its client's slow
				// upload. Rare, so the usual request pays for one copy of
				// itself, not two.
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(valCtx, s.opts.RequestTimeout)
				defer cancel()
				r = r.WithContext(ctx)
				// So does the reply's write deadline (serve's WriteTimeout
				// counts from the headers): a write that waited its full
				// deadline on the store after a slow upload would
				// otherwise lose its connection, unanswered.
				http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.opts.RequestTimeout + ReplySlack))
			}
		}
		if short {
			if !s.acquire(r.Context()) {
				s.metrics.ObserveRejected()
				s.error(w, r, shardcounter.Errorf(shardcounter.EUNAVAILABLE,
					"the server is serving its limit of %d concurrent requests: nothing was done, retry after the Retry-After delay", cap(s.slots)))
				return
			}
			defer s.release()
		}
		handle(s, w, r)
	}
}

// doneWithBody gives back to the body budget the bytes of r's body, once
// its handler has decoded it and before it waits on the store, when the
// body is not a pooled buffer: the decoders copy what they keep, so the
// bytes are garbage from then on, and the budget's decoded share, held
// until the handler returns, covers what the handler still holds. A
// handler that keeps its decoded body through a slow store call (a 1 MiB
// document waits for Pebble's commits of those before it) would
// otherwise hold twice what it needs, and turn away half the bodies the
// budget could take.
func (s *Server) doneWithBody(r *http.Request) {
	req := requestOf(r)
	if cap(req.body) == smallBody || req.bodyTaken == 0 {
		return // pooled, and given back with the buffer once the handler returns
	}
	req.body = nil
	s.bodies.give(req.bodyTaken)
	req.bodyTaken = 0
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

// authenticate returns the user r authenticates as, or nil: the user and
// password of Basic credentials, the user whose password a Bearer token
// is, or, without credentials, the user its verified TLS client
// certificate names (acl.Users.ByCertificate), else the user every
// client is before it
// authenticates (acl.Set.Unauthenticated: everyone when the server has
// no users or tokens).
func (s *Server) authenticate(r *http.Request) *acl.User {
	h := r.Header.Get("Authorization")
	us := s.users.Users()
	if us == nil {
		return acl.Everyone
	}
	if h == "" {
		if u := us.ByCertificate(r.TLS); u != nil {
			return u
		}
		return s.users.Unauthenticated()
	}
	scheme, cred, ok := strings.Cut(h, " ")
	switch {
	case !ok:
		return nil
	case strings.EqualFold(scheme, "Bearer"):
		return us.ByPassword([]byte(cred))
	case strings.EqualFold(scheme, "Basic"):
		user, pass, ok := r.BasicAuth()
		if !ok {
			return nil
		}
		return us.Authenticate([]byte(user), []byte(pass))
	}
	return nil
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
// resource_exhausted with Retry-After. Either way nothing was done, and
// the audit trail has a line for it.
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request) {
	v := s.guard.Fail(authtoken.HTTP, r.RemoteAddr)
	s.auditUnauthorized(r, v.Throttled)
	if v.Throttled {
		secs := int((v.Wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		s.error(w, r, shardcounter.Errorf(shardcounter.EEXHAUSTED,
			"too many failed authentications from your address: nothing was done; retry after %d s with a token from the server's --auth-token-file", secs))
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="shardcounter"`)
	s.error(w, r, shardcounter.Errorf(shardcounter.EUNAUTHENTICATED,
		"missing or wrong bearer token: send the header Authorization: Bearer TOKEN with a token from the server's --auth-token-file, or a user's password (or Basic credentials) of its --users-file"))
}

// auditUnauthorized writes the audit line of a request refused for its
// credentials: the user name of Basic credentials, never a password or a
// token, and which credentials were wrong or missing. A user name longer
// than 128 bytes is cut there.
func (s *Server) auditUnauthorized(r *http.Request, throttled bool) {
	if s.opts.Audit == nil {
		return
	}
	user, outcome := "", "refused: no credentials"
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, _, _ := strings.Cut(h, " ")
		switch name, _, ok := r.BasicAuth(); {
		case ok:
			user, outcome = name, "refused: wrong user name or password, or the user is off"
			if len(user) > 128 {
				user = user[:128]
			}
		case strings.EqualFold(scheme, "Bearer"):
			outcome = "refused: a bearer token that is no user's password"
		default:
			outcome = "refused: unreadable Authorization header"
		}
	}
	if throttled {
		outcome += "; answered 429, too many failures from the address"
	}
	s.opts.Audit.Log("http", r.RemoteAddr, user, "auth", nil, outcome)
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

// newRequestID returns 16 random hex digits, written into *x, which the
// string shares: x must not change after. The id only ties a reply to its
// log line, so it needs to be unique, not secret: math/rand/v2's
// generator, which needs no system call per request, will do.
func newRequestID(x *[16]byte) string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	hex.Encode(x[:], b[:])
	return unsafe.String(&x[0], len(x))
}

// statusWriter remembers the status of a reply, for the request log and
// so that a panic after the reply started does not write a second one.
type statusWriter struct {
	http.ResponseWriter
	status int
	req    *request // the request this writer is part of
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
