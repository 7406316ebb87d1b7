// Package metrics exports what shardcounter measures in the Prometheus
// text format, through client_golang on a registry of its own.
//
// # Why a registry of its own
//
// A library that registers on prometheus.DefaultRegisterer collides with
// any other user of that global in the same process (two servers in one
// test binary, an application that embeds the engine), so every metric
// here lives on the Registry that New makes, and Handler serves only it.
//
// # Where the numbers come from
//
//   - The HTTP server calls ObserveRequest, ObserveCachedRead,
//     ObserveRejected and ObserveBodyRejected as it answers.
//   - The authentication Guard shared by the HTTP and RESP servers counts
//     failures, which RegisterAuth exports at scrape time (limits.go).
//   - The engine keeps plain atomic totals (engine.Stats); RegisterEngine
//     adds a collector that reads them at scrape time, so the write path
//     pays nothing for being measured.
//   - The engine calls ObserveFlush (engine.Config.OnFlush) after each
//     commit, for the batch-size and commit-latency histograms.
//   - Store wraps a CounterStore and counts its failures by operation and
//     kind, whoever made the call.
//
// docs/OPERATIONS.md lists every metric and what to alert on.
package metrics

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shardcounter/shardcounter/engine"
)

// namespace starts every metric name.
const namespace = "shardcounter"

// Metrics holds the server's metrics and the registry they live on. Its
// methods are safe for concurrent use; each observation is a few atomic
// operations.
type Metrics struct {
	reg *prometheus.Registry

	requests  *prometheus.HistogramVec
	inFlight  prometheus.Gauge
	rejected  prometheus.Counter
	staleness prometheus.Histogram

	bodyRejected prometheus.Counter

	flushWrites   prometheus.Histogram
	flushDuration prometheus.Histogram

	storeErrors *prometheus.CounterVec
}

// New returns Metrics on a new registry that also holds the Go runtime's
// and the process's standard collectors (goroutines, heap, file
// descriptors, CPU), which are what an operator looks at first when a
// server misbehaves.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg: reg,
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "http", Name: "request_duration_seconds",
			Help: "Time to answer an HTTP request, by route pattern, method and status code; its _count is the number of requests.",
			// 0.5 ms to 10 s: a durable write is one commit, typically
			// milliseconds; the top buckets catch requests that ran into
			// --request-timeout.
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method", "code"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "http", Name: "in_flight_requests",
			Help: "API requests being served now (bounded by --max-concurrent).",
		}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "http", Name: "overload_rejections_total",
			Help: "API requests answered 503 unavailable because --max-concurrent requests were already being served.",
		}),
		bodyRejected: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "http", Name: "body_budget_rejections_total",
			Help: "API requests answered 503 unavailable because the request bodies in flight already held --max-body-total bytes.",
		}),
		staleness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "cached_read_staleness_seconds",
			Help:    "Age of the rollup value served by each cached read (consistency=cached).",
			Buckets: []float64{.001, .01, .05, .1, .25, .5, .75, 1, 2, 5},
		}),
		flushWrites: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "flush_batch_writes",
			Help:    "Client writes carried by one store commit of the write engine (group commit at work).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 15), // 1 to 16384
		}),
		flushDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "flush_duration_seconds",
			Help:    "Time of one store commit (store.Apply) of the write engine, failed ones included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "store_errors_total",
			Help: "Store calls that failed, by operation and kind: unavailable (nothing applied), outcome_unknown (a commit got no answer) or internal.",
		}, []string{"op", "kind"}),
	}
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.inFlight, m.rejected, m.staleness, m.bodyRejected,
		m.flushWrites, m.flushDuration, m.storeErrors,
	)
	return m
}

// Registry returns the registry the metrics live on, for callers that add
// their own collectors or gather in tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format (or
// OpenMetrics, when the scraper asks for it).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		Registry:          m.reg, // count the handler's own errors
		EnableOpenMetrics: true,
	})
}

// ObserveRequest records one answered HTTP request. route is the matched
// route pattern (never the raw path, whose ids would make every counter a
// new series) and method one of the methods the API knows.
func (m *Metrics) ObserveRequest(route, method string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, method, statusLabel(status)).Observe(d.Seconds())
}

// InFlight returns the gauge of API requests being served.
func (m *Metrics) InFlight() prometheus.Gauge { return m.inFlight }

// ObserveRejected records a request refused because the server was
// serving its limit of concurrent requests.
func (m *Metrics) ObserveRejected() { m.rejected.Inc() }

// ObserveCachedRead records the age of the rollup a cached read served.
func (m *Metrics) ObserveCachedRead(age time.Duration) {
	if age < 0 {
		age = 0 // clocks of the reading and the server may differ a little
	}
	m.staleness.Observe(age.Seconds())
}

// ObserveFlush records one commit of the write engine. It has the type of
// engine.Config.OnFlush.
func (m *Metrics) ObserveFlush(ev engine.FlushEvent) {
	m.flushWrites.Observe(float64(ev.Writes))
	m.flushDuration.Observe(ev.Duration.Seconds())
}

// RegisterEngine exports an engine's running totals. The collector reads
// the atomics of s when scraped, so the engine's hot path is unchanged.
// Call it once per Metrics.
func (m *Metrics) RegisterEngine(s *engine.Stats) {
	m.reg.MustRegister(&statsCollector{s: s})
}

// statusCodes are the statuses the API answers with, whose labels are
// made once (statusLabel) and whose histogram children a RequestSeries
// keeps.
var statusCodes = [...]int{200, 201, 202, 204, 400, 401, 403, 404, 405, 409, 413, 415, 429, 500, 503, 504}

// statusLabels are the labels of statusCodes, index for index.
var statusLabels = func() (l [len(statusCodes)]string) {
	for i, c := range statusCodes {
		l[i] = strconv.Itoa(c)
	}
	return l
}()

// statusIndex returns the index of status in statusCodes, or -1.
func statusIndex(status int) int {
	for i, c := range statusCodes {
		if c == status {
			return i
		}
	}
	return -1
}

// statusLabel turns a status into its label without allocating for the
// statuses the API uses.
func statusLabel(status int) string {
	if i := statusIndex(status); i >= 0 {
		return statusLabels[i]
	}
	return strconv.Itoa(status)
}

// RequestSeries is ObserveRequest bound to one route and method (a route
// of the HTTP server's table): it keeps the histogram child of each status
// of statusCodes once it has seen it, so that an observation is the
// histogram's own atomics, without WithLabelValues's hashing of the three
// labels and its map lookup under a lock. A status it has not seen yet
// makes its child then, so /metrics shows the series a server answered,
// as with ObserveRequest.
type RequestSeries struct {
	vec           *prometheus.HistogramVec
	route, method string
	codes         [len(statusCodes)]atomic.Pointer[observer]
}

type observer struct{ prometheus.Observer }

// RequestSeries returns the series of route and method (see
// ObserveRequest), to be made once per route and kept.
func (m *Metrics) RequestSeries(route, method string) *RequestSeries {
	return &RequestSeries{vec: m.requests, route: route, method: method}
}

// Observe records one answered request of the series' route and method,
// as ObserveRequest(route, method, status, d) does.
func (s *RequestSeries) Observe(status int, d time.Duration) {
	i := statusIndex(status)
	if i < 0 {
		s.vec.WithLabelValues(s.route, s.method, strconv.Itoa(status)).Observe(d.Seconds())
		return
	}
	o := s.codes[i].Load()
	if o == nil {
		// Two first requests may both get here: WithLabelValues gives
		// both the one child.
		o = &observer{s.vec.WithLabelValues(s.route, s.method, statusLabels[i])}
		s.codes[i].Store(o)
	}
	o.Observe(d.Seconds())
}

// statsCollector is a prometheus.Collector over engine.Stats.
type statsCollector struct {
	s *engine.Stats
}

var (
	descWrites = prometheus.NewDesc(namespace+"_writes_applied_total",
		"Writes committed as applied.", nil, nil)
	descDuplicates = prometheus.NewDesc(namespace+"_writes_duplicate_total",
		"Writes not applied because their request id had been recorded (retries).", nil, nil)
	descFailed = prometheus.NewDesc(namespace+"_writes_failed_total",
		"Writes that failed: answered with an error, or (async) failed after their answer.", nil, nil)
	descAsyncLost = prometheus.NewDesc(namespace+"_writes_async_lost_total",
		"Async writes acknowledged as accepted whose commit then failed (also in writes_failed_total).", nil, nil)
	descQueued = prometheus.NewDesc(namespace+"_writes_queued",
		"Writes waiting for a commit now.", nil, nil)
	descIncrements = prometheus.NewDesc(namespace+"_store_increments_total",
		"Increments the engine sent to the store, after folding writes to one counter together.", nil, nil)
	descWriteErrors = prometheus.NewDesc(namespace+"_write_errors_total",
		"Writes that failed, by error code (writes_failed_total split by code).", []string{"code"}, nil)
	descPaceWait = prometheus.NewDesc(namespace+"_pace_wait_seconds_total",
		"Time commits waited for a shard to be due under --shard-write-interval (pacing).", nil, nil)
	descLimitTakes = prometheus.NewDesc(namespace+"_limit_takes_total",
		"Takes of rate limits decided by this server, by limit and by result (allowed or refused); peeks and retries of a request id are not counted.", []string{"limit", "result"}, nil)
	descLimitStatesRemoved = prometheus.NewDesc(namespace+"_limit_states_removed_total",
		"Idle states of rate limit keys this server's sweeper removed (docs/LIMITS.md, \"How keys are kept\").", nil, nil)
	descCachedReads = prometheus.NewDesc(namespace+"_cached_reads_total",
		"Counters read with consistency=cached, by whether the cache held a fresh enough rollup (hit) or the store was read (miss).", []string{"result"}, nil)
)

// Describe implements prometheus.Collector.
func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descWrites, descDuplicates, descFailed, descAsyncLost, descQueued, descIncrements, descWriteErrors, descPaceWait, descCachedReads, descLimitTakes, descLimitStatesRemoved} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	counter(descWrites, c.s.Writes.Load())
	counter(descDuplicates, c.s.Duplicates.Load())
	counter(descFailed, c.s.Errors.Load())
	counter(descAsyncLost, c.s.AsyncLost.Load())
	counter(descIncrements, c.s.Items.Load())
	counter(descLimitStatesRemoved, c.s.LimitStatesRemoved.Load())
	ch <- prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, float64(c.s.Queued.Load()))
	for i, code := range engine.ErrorCodes {
		ch <- prometheus.MustNewConstMetric(descWriteErrors, prometheus.CounterValue, float64(c.s.ErrorCodes[i].Load()), code)
	}
	ch <- prometheus.MustNewConstMetric(descPaceWait, prometheus.CounterValue, time.Duration(c.s.PaceWaitNanos.Load()).Seconds())
	ch <- prometheus.MustNewConstMetric(descCachedReads, prometheus.CounterValue, float64(c.s.CacheHits.Load()), "hit")
	ch <- prometheus.MustNewConstMetric(descCachedReads, prometheus.CounterValue, float64(c.s.CacheMisses.Load()), "miss")
	c.s.EachLimit(func(name string, allowed, refused int64) {
		ch <- prometheus.MustNewConstMetric(descLimitTakes, prometheus.CounterValue, float64(allowed), name, "allowed")
		ch <- prometheus.MustNewConstMetric(descLimitTakes, prometheus.CounterValue, float64(refused), name, "refused")
	})
}
