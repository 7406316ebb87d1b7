package http_test

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/metrics"
)

// metricValue returns the value of the sample name{labels} in a
// Prometheus text exposition, labels written as the exposition writes
// them (sorted by name), or -1 when there is no such sample.
func metricValue(tb testing.TB, exposition, sample string) float64 {
	tb.Helper()
	sc := bufio.NewScanner(strings.NewReader(exposition))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatalf("sample %s has value %q", sample, v)
			}
			return f
		}
	}
	return -1
}

func TestMetrics(t *testing.T) {
	e := MustServe(t, EnvOptions{Server: shttp.ServerOptions{AuthTokens: []string{"tok"}}})
	e.Client.Token = "tok"
	e.MustCreate(t, "m", 2)
	for range 3 {
		e.MustWrite(t, "m", 1)
	}
	if _, err := e.Client.ReadCounter(context.Background(), "m", shardcounter.Cached); err != nil {
		t.Fatal(err)
	}
	e.Do(t, "GET", path("m"), "").MustError(t, http.StatusUnauthorized, shardcounter.EUNAUTHENTICATED)
	// HEAD, served by GET's handler, is a series of its own; so is each
	// code a route answers.
	if r := e.Do(t, "HEAD", path("m"), "", "Authorization", "Bearer tok"); r.Status != http.StatusOK {
		t.Fatalf("HEAD: status %d", r.Status)
	}
	e.Do(t, "GET", path("nope"), "", "Authorization", "Bearer tok").MustError(t, http.StatusNotFound, shardcounter.ENOTFOUND)

	// /metrics needs no token, like the other operations routes.
	r := e.Do(t, "GET", "/metrics", "")
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: status %d, Content-Type %q", r.Status, r.Header.Get("Content-Type"))
	}
	body := string(r.Body)
	for sample, want := range map[string]float64{
		`shardcounter_http_request_duration_seconds_count{code="200",method="POST",route="/v1/counters/{id}/increment"}`: 3,
		`shardcounter_http_request_duration_seconds_count{code="201",method="PUT",route="/v1/counters/{id}"}`:            1,
		`shardcounter_http_request_duration_seconds_count{code="401",method="GET",route="/v1/counters/{id}"}`:            1,
		`shardcounter_http_request_duration_seconds_count{code="200",method="HEAD",route="/v1/counters/{id}"}`:           1,
		`shardcounter_http_request_duration_seconds_count{code="404",method="GET",route="/v1/counters/{id}"}`:            1,
		`shardcounter_cached_read_staleness_seconds_count`:                                                               1,
		`shardcounter_http_overload_rejections_total`:                                                                    0,
	} {
		if got := metricValue(t, body, sample); got != want {
			t.Errorf("%s = %v, want %v", sample, got, want)
		}
	}
	if metricValue(t, body, "go_goroutines") <= 0 {
		t.Error("no go_goroutines: the Go collector is missing")
	}
}

func TestRequestLog(t *testing.T) {
	logs := &syncBuffer{}
	e := MustServe(t, EnvOptions{Server: shttp.ServerOptions{
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}})
	r := e.Do(t, "POST", path("a/b")+"/increment", "", "X-Request-Id", "log-1")
	r.MustOK(t, http.StatusOK, nil)
	if got := r.Header.Get("X-Request-Id"); got != "log-1" {
		t.Fatalf("X-Request-Id %q, want log-1", got)
	}
	var line string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "request_id=log-1") {
			line = l
		}
	}
	for _, want := range []string{"level=DEBUG", "msg=request", "method=POST", `route=/v1/counters/{id}/increment`, "status=200", "duration="} {
		if !strings.Contains(line, want) {
			t.Errorf("request log line %q lacks %s", line, want)
		}
	}
}

// blocking is a CounterService whose reads wait until release is closed
// or their context ends, reporting each start on entered.
type blocking struct {
	shardcounter.CounterService
	entered chan time.Time // the read's deadline, or the zero time when it has none
	release chan struct{}
}

func (b *blocking) ReadCounter(ctx context.Context, id string, c shardcounter.Consistency) (*shardcounter.Reading, error) {
	deadline, _ := ctx.Deadline()
	b.entered <- deadline
	select {
	case <-b.release:
		return b.CounterService.ReadCounter(ctx, id, c)
	case <-ctx.Done():
		return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "store did not answer: %v", ctx.Err())
	}
}

func TestMaxConcurrent(t *testing.T) {
	b := &blocking{entered: make(chan time.Time, 8), release: make(chan struct{})}
	m := metrics.New()
	e := MustServe(t, EnvOptions{
		Server: shttp.ServerOptions{MaxConcurrent: 2, QueueWait: 10 * time.Millisecond, Metrics: m},
		Wrap: func(s shardcounter.CounterService) shardcounter.CounterService {
			b.CounterService = s
			return b
		},
	})
	e.MustCreate(t, "c", 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	var once sync.Once
	release := func() { once.Do(func() { close(b.release) }) }
	defer release() // a failing test must not leave the two readers hanging
	for range 2 {
		wg.Go(func() {
			if _, err := e.Client.ReadCounter(context.Background(), "c", ""); err != nil {
				t.Error(err)
			}
		})
	}
	<-b.entered
	<-b.entered

	r := e.Do(t, "GET", path("c"), "")
	r.MustError(t, http.StatusServiceUnavailable, shardcounter.EUNAVAILABLE)
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("overload 503 without Retry-After")
	}
	// Probes and metrics are not API requests: they answer under overload.
	e.Do(t, "GET", "/healthz", "").MustOK(t, http.StatusOK, nil)
	body := string(e.Do(t, "GET", "/metrics", "").Body)
	if got := metricValue(t, body, "shardcounter_http_overload_rejections_total"); got != 1 {
		t.Fatalf("overload_rejections_total = %v, want 1", got)
	}
	if got := metricValue(t, body, "shardcounter_http_in_flight_requests"); got != 2 {
		t.Fatalf("in_flight_requests = %v, want 2", got)
	}

	release()
	wg.Wait()
	if _, err := e.Client.ReadCounter(context.Background(), "c", ""); err != nil {
		t.Fatalf("after the slots freed: %v", err)
	}
}

func TestRequestTimeout(t *testing.T) {
	b := &blocking{entered: make(chan time.Time, 1), release: make(chan struct{})}
	defer close(b.release)
	e := MustServe(t, EnvOptions{
		Server: shttp.ServerOptions{RequestTimeout: 50 * time.Millisecond},
		Wrap: func(s shardcounter.CounterService) shardcounter.CounterService {
			b.CounterService = s
			return b
		},
	})
	start := time.Now()
	// The service answers only when the request's deadline ends its
	// context: a request that hangs fails the test by the client's own
	// 30s timeout.
	r := e.Do(t, "GET", path("c"), "")
	r.MustError(t, http.StatusServiceUnavailable, shardcounter.EUNAVAILABLE)
	deadline := <-b.entered
	if deadline.IsZero() || deadline.Sub(start) > 10*time.Second {
		t.Fatalf("the service's context has deadline %v (request started %v), want one RequestTimeout away", deadline, start)
	}
}

func TestSetAuthTokens(t *testing.T) {
	store, err := bolt.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	svc, closeSvc := newService(t, store, serviceOptions{})
	defer closeSvc()
	srv := shttp.NewServer(svc, shttp.ServerOptions{AuthTokens: []string{"old"}})
	ts := httptest.NewServer(Checked(t, srv))
	defer ts.Close()
	e := &Env{URL: ts.URL}

	e.Do(t, "GET", "/v1/counters", "", "Authorization", "Bearer old").MustOK(t, http.StatusOK, nil)
	srv.SetAuthTokens([]string{"new1", "new2"})
	e.Do(t, "GET", "/v1/counters", "", "Authorization", "Bearer old").MustError(t, http.StatusUnauthorized, shardcounter.EUNAUTHENTICATED)
	e.Do(t, "GET", "/v1/counters", "", "Authorization", "Bearer new2").MustOK(t, http.StatusOK, nil)
	srv.SetAuthTokens(nil)
	e.Do(t, "GET", "/v1/counters", "").MustOK(t, http.StatusOK, nil)
}
