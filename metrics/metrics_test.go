package metrics_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/metrics"
)

// down is a store whose calls fail with err while it is set.
type down struct {
	shardcounter.CounterStore
	err error
}

func (d *down) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	if d.err != nil {
		return nil, d.err
	}
	return d.CounterStore.Apply(ctx, incs)
}

func (d *down) Ping(ctx context.Context) error {
	if d.err != nil {
		return d.err
	}
	return d.CounterStore.Ping(ctx)
}

func TestEngineMetrics(t *testing.T) {
	b, err := bolt.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st := &down{CounterStore: b}
	m := metrics.New()
	e, err := engine.New(m.Store(st), engine.Config{OnFlush: m.ObserveFlush})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	m.RegisterEngine(e.Stats())
	ctx := context.Background()

	for i := range 5 {
		if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "c", Delta: 1, RequestID: "r" + string(rune('0'+i%3))}); err != nil {
			t.Fatal(err)
		}
	}
	// A missing counter is an answer of the store, not a failure of it.
	if _, err := e.ReadCounter(ctx, "nope", shardcounter.Strong); !errors.Is(err, shardcounter.ErrNotFound) {
		t.Fatal(err)
	}
	st.err = shardcounter.Errorf(shardcounter.EUNAVAILABLE, "injected: connection refused")
	if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "c", Delta: 1}); !errors.Is(err, shardcounter.ErrUnavailable) {
		t.Fatalf("write to a down store = %v, want unavailable", err)
	}
	e.Ping(ctx) //nolint:errcheck // counted below
	st.err = &shardcounter.Error{Code: shardcounter.EOUTCOMEUNKNOWN, Message: "injected: commit sent, no answer", OutcomeUnknown: true}
	if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "c", Delta: 1}); !shardcounter.IsOutcomeUnknown(err) {
		t.Fatalf("write = %v, want outcome unknown", err)
	}

	want := `
# HELP shardcounter_writes_applied_total Writes committed as applied.
# TYPE shardcounter_writes_applied_total counter
shardcounter_writes_applied_total 3
# HELP shardcounter_writes_duplicate_total Writes not applied because their request id had been recorded (retries).
# TYPE shardcounter_writes_duplicate_total counter
shardcounter_writes_duplicate_total 2
# HELP shardcounter_writes_failed_total Writes that failed: answered with an error, or (async) failed after their answer.
# TYPE shardcounter_writes_failed_total counter
shardcounter_writes_failed_total 2
# HELP shardcounter_writes_queued Writes waiting for a commit now.
# TYPE shardcounter_writes_queued gauge
shardcounter_writes_queued 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"shardcounter_writes_applied_total", "shardcounter_writes_duplicate_total",
		"shardcounter_writes_failed_total", "shardcounter_writes_queued"); err != nil {
		t.Error(err)
	}

	errs := map[string]float64{}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var flushes, flushWrites float64
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			switch mf.GetName() {
			case "shardcounter_store_errors_total":
				var op, kind string
				for _, l := range mt.GetLabel() {
					switch l.GetName() {
					case "op":
						op = l.GetValue()
					case "kind":
						kind = l.GetValue()
					}
				}
				if v := mt.GetCounter().GetValue(); v != 0 {
					errs[op+"/"+kind] = v
				}
			case "shardcounter_flush_batch_writes":
				flushes = float64(mt.GetHistogram().GetSampleCount())
				flushWrites = mt.GetHistogram().GetSampleSum()
			}
		}
	}
	wantErrs := map[string]float64{"apply/unavailable": 1, "ping/unavailable": 1, "apply/outcome_unknown": 1}
	if len(errs) != len(wantErrs) {
		t.Errorf("store errors %v, want %v", errs, wantErrs)
	}
	for k, v := range wantErrs {
		if errs[k] != v {
			t.Errorf("store errors %v, want %v", errs, wantErrs)
		}
	}
	// Every write went through a commit of its own (they were sequential),
	// and the commit that auto-created the counter carried the first one.
	if flushes < 7 || flushWrites < 7 {
		t.Errorf("flush histogram: %v commits carrying %v writes, want at least 7 of each", flushes, flushWrites)
	}
}

func TestCachedReadAndRequests(t *testing.T) {
	m := metrics.New()
	m.ObserveCachedRead(250 * time.Millisecond)
	m.ObserveCachedRead(-time.Millisecond) // clock skew counts as fresh
	m.ObserveRequest("/v1/counters/{id}", "GET", 200, time.Millisecond)
	m.ObserveRequest("/v1/counters/{id}", "GET", 418, time.Millisecond)
	if n := testutil.CollectAndCount(m.Registry(), "shardcounter_http_request_duration_seconds"); n != 2 {
		t.Errorf("request series = %d, want 2 (one per code)", n)
	}
	mfs, _ := m.Registry().Gather()
	for _, mf := range mfs {
		if mf.GetName() == "shardcounter_cached_read_staleness_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 2 || h.GetSampleSum() != 0.25 {
				t.Errorf("staleness count %d sum %v, want 2 and 0.25", h.GetSampleCount(), h.GetSampleSum())
			}
		}
	}
}

// TestStoreErrorsEveryOperation fails every operation of a real store (a
// bolt file closed under the wrapper) and checks that each failure is
// counted under its operation. An operation without its series once made
// the wrapper panic, which took the whole server down when it happened on
// a goroutine nobody recovers (the engine's value read after a commit).
func TestStoreErrorsEveryOperation(t *testing.T) {
	b, err := bolt.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	s := m.Store(b)
	b.Close()
	ctx := context.Background()
	now := time.Now()
	calls := map[string]func() error{
		"create":       func() error { _, err := s.CreateCounter(ctx, "c", shardcounter.Spec{Shards: 1}); return err },
		"get":          func() error { _, err := s.GetCounter(ctx, "c"); return err },
		"list":         func() error { _, err := s.ListCounters(ctx, "", "", 10); return err },
		"delete":       func() error { return s.DeleteCounter(ctx, "c") },
		"read":         func() error { _, err := s.ReadCounter(ctx, "c"); return err },
		"read_batch":   func() error { _, err := s.ReadCounters(ctx, []string{"c"}); return err },
		"read_shards":  func() error { _, _, err := s.ReadShards(ctx, "c"); return err },
		"placement":    func() error { _, err := s.Placement(ctx, "c"); return err },
		"read_window":  func() error { _, err := s.ReadWindow(ctx, "c", now.Add(-time.Hour), now); return err },
		"read_series":  func() error { _, err := s.ReadSeries(ctx, "c", now.Add(-time.Hour), now); return err },
		"is_member":    func() error { _, err := s.IsMember(ctx, "c", "m"); return err },
		"list_members": func() error { _, err := s.ListMembers(ctx, "c", "", 10); return err },
		"add":          func() error { return s.Add(ctx, "c", 1, 0) },
		"apply": func() error {
			_, err := s.Apply(ctx, []shardcounter.Increment{{Counter: "c", Delta: 1}})
			return err
		},
		"reshard": func() error { _, err := s.ReshardCounter(ctx, "c", 2); return err },
		"ping":    func() error { return s.Ping(ctx) },
	}
	for op, call := range calls {
		t.Run(op, func(t *testing.T) {
			if err := call(); err == nil {
				t.Fatal("a call on a closed store succeeded")
			}
			if got := storeErrors(t, m, op); got != 1 {
				t.Errorf("store errors counted for %s = %v, want 1", op, got)
			}
		})
	}
}

// storeErrors sums shardcounter_store_errors_total over the kinds of one
// operation, as /metrics exports it.
func storeErrors(t *testing.T, m *metrics.Metrics, op string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "shardcounter_store_errors_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == op {
					sum += mt.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// TestLimitMetrics checks shardcounter_limit_takes_total as /metrics
// serves it: takes decided, by limit and result, without peeks or
// retries of a request id; a deleted limit's series go with it.
func TestLimitMetrics(t *testing.T) {
	ctx := context.Background()
	b, err := bolt.Open(ctx, filepath.Join(t.TempDir(), "c.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m := metrics.New()
	e, err := engine.New(m.Store(b), engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	m.RegisterEngine(e.Stats())
	for _, name := range []string{"api", "upload"} {
		p, _ := shardcounter.ParseLimitPolicy("fixed 2/366d")
		if _, _, err := e.CreateLimit(ctx, name, p); err != nil {
			t.Fatal(err)
		}
	}
	take := func(name, rid string) {
		t.Helper()
		if _, err := e.Take(ctx, name, "k", 1, rid); err != nil {
			t.Fatal(err)
		}
	}
	take("api", "r1")
	take("api", "r1") // a retry: not counted
	take("api", "")
	take("api", "") // refused
	take("upload", "")
	if _, err := e.Peek(ctx, "api", "k", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Take(ctx, "none", "k", 1, ""); !errors.Is(err, shardcounter.ErrNotFound) {
		t.Fatalf("take of a missing limit: %v", err)
	}
	scrape := func() string {
		t.Helper()
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		var lines []string
		for _, l := range strings.Split(rec.Body.String(), "\n") {
			if strings.HasPrefix(l, "shardcounter_limit_takes_total") {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "\n")
	}
	want := `shardcounter_limit_takes_total{limit="api",result="allowed"} 2
shardcounter_limit_takes_total{limit="api",result="refused"} 1
shardcounter_limit_takes_total{limit="upload",result="allowed"} 1
shardcounter_limit_takes_total{limit="upload",result="refused"} 0`
	if got := scrape(); got != want {
		t.Fatalf("/metrics has\n%s\nwant\n%s", got, want)
	}
	if err := e.DeleteLimit(ctx, "upload"); err != nil {
		t.Fatal(err)
	}
	if got, want := scrape(), want[:strings.Index(want, "\nshardcounter_limit_takes_total{limit=\"upload\"")]; got != want {
		t.Fatalf("after the delete, /metrics has\n%s\nwant\n%s", got, want)
	}
}

// TestRequestSeries checks that a route's bound series records into the
// series ObserveRequest does: the same labels, the counts added up, a
// status outside the cached ones included, and no series for a status
// never answered.
func TestRequestSeries(t *testing.T) {
	m := metrics.New()
	s := m.RequestSeries("/v1/counters/{id}/increment", "POST")
	for range 3 {
		s.Observe(200, time.Millisecond)
	}
	s.Observe(504, time.Second)
	s.Observe(418, time.Millisecond)
	m.ObserveRequest("/v1/counters/{id}/increment", "POST", 200, time.Millisecond)
	want := map[string]uint64{"200": 4, "504": 1, "418": 1}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "shardcounter_http_request_duration_seconds" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] != "/v1/counters/{id}/increment" || labels["method"] != "POST" {
				t.Errorf("series with labels %v", labels)
			}
			got[labels["code"]] = mt.GetHistogram().GetSampleCount()
		}
	}
	if len(got) != len(want) {
		t.Errorf("series by code %v, want %v", got, want)
	}
	for code, n := range want {
		if got[code] != n {
			t.Errorf("code %s: %d requests, want %d (all: %v)", code, got[code], n, got)
		}
	}
}
