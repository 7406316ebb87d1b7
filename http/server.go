package http

import (
	"context"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"log/slog"
	"net/http"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/acl"
	"github.com/shardcounter/shardcounter/internal/authtoken"
	"github.com/shardcounter/shardcounter/metrics"
)

// Defaults of ServerOptions.
const (
	DefaultMaxBodyBytes = 1 << 20 // 1 MiB, SPEC's --max-body default
	DefaultMaxBatch     = 10000   // writes per POST /v1/writes

	// DefaultMaxConcurrent bounds the API requests served at once. Each
	// waits on the store at most RequestTimeout, so the bound caps the
	// goroutines and memory an overload or a slow store can pile up.
	DefaultMaxConcurrent = 1024
	// DefaultQueueWait is how long a request waits for a free slot before
	// it gets 503: long enough to ride out a burst, short enough that a
	// client under sustained overload hears so at once.
	DefaultQueueWait = 100 * time.Millisecond
	// DefaultBodyTimeout bounds the time a request body takes to arrive:
	// a body of DefaultMaxBodyBytes at 100 KB/s.
	DefaultBodyTimeout = 10 * time.Second
	// DefaultRequestTimeout is the deadline of an API request's call to
	// the service, and so to the store.
	DefaultRequestTimeout = 5 * time.Second
	// ReplySlack is how long past RequestTimeout a reply may take to be
	// written: serve's WriteTimeout is RequestTimeout and ReplySlack from
	// a request's headers, and a request whose body arrived slowly gets
	// as long again from its body's arrival.
	ReplySlack = 10 * time.Second
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
	// and /admin paths; a request without one of them gets 401
	// unauthenticated. The public routes (/healthz, /readyz, /metrics,
	// /openapi.json, the dashboard's page) never need a token. SetAuthTokens
	// replaces them while the server runs.
	AuthTokens []string

	// Users, when set, are the users the server accepts (Basic
	// credentials, or Bearer with a user's password), each with what it
	// may run and touch (package acl); it wins over AuthTokens, whose
	// tokens the caller adds as default's passwords (acl.Users.WithTokens).
	// A request its user may not make gets 403 permission_denied. SetUsers
	// replaces them.
	Users *acl.Users

	// Audit, when set, receives a line for every request refused for its
	// user's rights and every @admin or @keyspace one (acl.Audit).
	Audit *acl.Audit

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
	// outcome_unknown error (504: it may still apply); give the
	// engine a shorter flush timeout so that writers hear the store's own
	// answer first. Negative means none. Default DefaultRequestTimeout.
	RequestTimeout time.Duration

	// BodyTimeout bounds the time an API request's body takes to arrive,
	// from when the server starts reading it; a late body gets 400 and
	// the connection is closed. The body is read before the request
	// takes one of the MaxConcurrent slots, so slow clients hold a
	// goroutine and the bytes they sent, never a slot. Negative means no
	// bound. Default DefaultBodyTimeout.
	BodyTimeout time.Duration

	// MaxBodyTotal bounds the bytes of request bodies held at once across
	// all requests (a semaphore on bytes, taken as the bytes arrive), and
	// of what they become while decoded (taken once a body is in, before
	// its handler decodes it; decodedSize): a body that would take the
	// total past it is refused with 503 unavailable and Retry-After, its
	// bytes read and dropped rather than held. Default DefaultMaxBodyTotal.
	MaxBodyTotal int64

	// AuthGuard counts failed authentications and slows them by remote
	// address (authtoken.Guard): past a burst, a request with a wrong or
	// missing token gets 429 resource_exhausted with Retry-After instead
	// of 401. serve shares one with the RESP server, so that failures on
	// either count together. Default: a Guard of the server's own, whose
	// bursts are logged at warn level.
	AuthGuard *authtoken.Guard

	// AsyncWrites says that the service answers writes once they are
	// queued, before they are committed (the engine's async durability):
	// write replies are then 202 Accepted rather than 200, since the
	// write is not yet applied.
	AsyncWrites bool

	// Collections, when set, serves the /v1/collections routes; without
	// it they are 404 not_found.
	Collections shardcounter.CollectionService

	// Watch configures GET /v1/counters/{id}/watch (watch.go).
	Watch WatchOptions

	// Admin, when its handlers are set, serves the admin endpoints
	// (export, import, verify, backup) under /admin/ (admin.go).
	Admin Admin

	// Tracer, when set, gives every request a server span (trace.go),
	// the parent or remote parent its headers carry by Propagator: the
	// span the engine links a write's commit to. Nil, the default, makes
	// no span and costs a request a nil check.
	Tracer trace.Tracer
	// Propagator reads a request's trace context from its headers.
	// Default propagation.TraceContext, W3C traceparent and tracestate.
	Propagator propagation.TextMapPropagator
}

// Server serves the HTTP API over a CounterService. It is an http.Handler;
// the caller owns the listener and the http.Server. It is safe for
// concurrent use.
type Server struct {
	svc     shardcounter.CounterService
	opts    ServerOptions
	users   acl.Set
	mux     *http.ServeMux
	metrics *metrics.Metrics
	slots   chan struct{} // a token per request being served; nil: no bound
	bodies  *bodyBudget
	guard   *authtoken.Guard
	watch   *watchHub
	// rankings is the service's rankings, when it has them: the
	// /v1/rankings routes are served only then.
	rankings shardcounter.RankingService
	// limits is the service's rate limits, when it has them: the
	// /v1/limits routes are served only then.
	limits shardcounter.LimitService
	// policyHeaders are the RateLimit-Policy values of the limits taken
	// from (limitfast.go).
	policyHeaders policyHeaders
	// metricsHandler serves /metrics.
	metricsHandler http.Handler
	// traceFields are the headers the propagator reads, canonical: a
	// request with none of them is not given to it (startSpan).
	traceFields []string
	// deadlines ends API requests' contexts at their RequestTimeout.
	deadlines deadlineWatcher
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
	if opts.BodyTimeout == 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.Tracer != nil && opts.Propagator == nil {
		opts.Propagator = propagation.TraceContext{}
	}
	if opts.MaxBodyTotal <= 0 {
		opts.MaxBodyTotal = DefaultMaxBodyTotal
	}
	if opts.AuthGuard == nil {
		log := opts.Logger
		opts.AuthGuard = &authtoken.Guard{OnBurst: func(addr string, p authtoken.Protocol, n int64) {
			log.Warn("failed authentications: slowing this address down", "addr", addr, "protocol", p.String(), "failures", n)
		}}
	}
	s := &Server{svc: svc, opts: opts, mux: http.NewServeMux(), metrics: opts.Metrics,
		bodies: newBodyBudget(opts.MaxBodyTotal), guard: opts.AuthGuard}
	s.metrics.RegisterBodyBudget(func() float64 { return float64(s.bodies.InFlight()) })
	s.metrics.RegisterAuth(s.guard)
	if opts.MaxConcurrent > 0 {
		s.slots = make(chan struct{}, opts.MaxConcurrent)
	}
	if opts.Users == nil {
		opts.Users = acl.FromTokens(opts.AuthTokens)
	}
	s.SetUsers(opts.Users)

	if opts.Tracer != nil {
		for _, f := range opts.Propagator.Fields() {
			s.traceFields = append(s.traceFields, http.CanonicalHeaderKey(f))
		}
	}
	s.rankings, _ = svc.(shardcounter.RankingService)
	s.limits, _ = svc.(shardcounter.LimitService)
	s.metricsHandler = s.metrics.Handler()
	s.startWatch()
	s.wire(Routes())
	return s
}

// SetAuthTokens replaces the bearer tokens accepted on /v1 paths; none
// means no token is needed. Requests already past the check are not
// affected, but for watch streams, which end when their token is no
// longer accepted. It is safe to call while the server serves (serve calls it on
// SIGHUP).
func (s *Server) SetAuthTokens(tokens []string) {
	s.SetUsers(acl.FromTokens(tokens))
}

// SetUsers replaces the users; nil means no credentials are needed.
// Requests already past the check are not affected, but for watch
// streams, which end when their user may no longer watch their counter.
// It is safe to call while the server serves (serve calls it on SIGHUP).
func (s *Server) SetUsers(us *acl.Users) { s.users.Replace(us) }
