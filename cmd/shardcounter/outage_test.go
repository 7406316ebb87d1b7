package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/internal/redistest"
)

// outageStore is a store the test can stop and start again with its data.
type outageStore struct {
	dsn         string
	stop, start func()
}

// replyBound is how long any reply may take while the store is down. The
// server's --request-timeout is 2s; the bound is generous so that a slow
// machine does not fail the test, and tight enough to catch a request
// that waits for the store to come back.
const replyBound = 10 * time.Second

// TestStoreOutage stops the store under load against a running serve,
// and starts it again: while it is down, every write fails within a
// bounded time with unavailable (with Retry-After), or with an
// outcome-unknown error (the writes in flight at the crash), and none
// reports success; /readyz is 503; once the store is back the same server
// process writes again, and the counter holds every acknowledged write.
// Writes with an unknown outcome and a request id are retried with the
// same id after the restart, as docs/OPERATIONS.md tells clients to, so
// they count exactly once; those without one may or may not count.
func TestStoreOutage(t *testing.T) {
	stores := []struct {
		name string
		open func(t *testing.T) outageStore
	}{
		{"Postgres", func(t *testing.T) outageStore {
			srv := pgtest.StartServer(t) // private: stopping it disturbs no other test
			return outageStore{dsn: srv.URL(), stop: func() { srv.Stop(t) }, start: func() { srv.Start(t) }}
		}},
		{"Redis", func(t *testing.T) outageStore {
			// appendfsync always: what Redis acknowledged survives its
			// restart, as on a durable deployment.
			srv := redistest.MustStart(t, "appendonly yes", "appendfsync always")
			return outageStore{dsn: "redis://" + srv.Addr, stop: srv.Stop, start: func() {
				if err := srv.Restart(); err != nil {
					t.Fatal(err)
				}
			}}
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) { testStoreOutage(t, st.open(t)) })
	}
}

// outcome is what one client write got.
type outcome struct {
	start, end time.Time
	w          shardcounter.Write
	err        error
}

// testStoreOutage runs its phases in order: load the server with
// clients, stop the store under that load, start it again, then judge
// every client's outcome, settle the unknown ones and check the value
// and the metrics against what the clients were told.
func testStoreOutage(t *testing.T, store outageStore) {
	dir := t.TempDir()
	s := StartServerEnv(t, dir, nil, "--listen", "127.0.0.1:0", "--store", store.dsn, "--request-timeout", "2s")
	client := shttp.NewClient(s.URL)
	client.HTTPClient = &http.Client{Timeout: time.Minute} // a guard against a hang, far past replyBound
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const clients = 8
	load := startOutageLoad(ctx, client, clients)
	defer load.halt()
	waitFor(t, "200 acknowledged writes before the outage", func() bool { return load.acked.Load() >= 200 })

	store.stop()
	downFrom := time.Now()
	waitFor(t, "/readyz to answer 503", func() bool { return getStatus(t, s.URL+"/readyz") == http.StatusServiceUnavailable })
	raw := waitRaw503(t, s.URL+"/v1/counters/hot/increment")
	time.Sleep(outageFor(t)) // the outage under load
	downUntil := time.Now()
	store.start()
	waitFor(t, "/readyz to answer 200 after the restart", func() bool { return getStatus(t, s.URL+"/readyz") == http.StatusOK })
	after := load.acked.Load()
	waitFor(t, "100 acknowledged writes after the restart", func() bool { return load.acked.Load() >= after+100 })
	load.halt()

	if raw.Header.Get("Retry-After") == "" {
		t.Errorf("503 during the outage without Retry-After")
	}
	tl := tallyOutage(t, load.outcomes, downFrom, downUntil)
	if tl.during < clients {
		t.Errorf("%d writes were sent and answered while the store was down, want at least %d", tl.during, clients)
	}
	t.Logf("%d sent and answered during the outage, the slowest in %v", tl.during, tl.slowest)
	t.Logf("%d outcomes: %d acknowledged, %d unavailable, %d outcome unknown (%d with request id); %d sent and answered during the outage; first unavailable %v after the store stopped",
		len(load.outcomes), load.acked.Load(), tl.unavailable, tl.unknown, len(tl.settle), tl.during, tl.firstUnavailable)
	checkOutageValue(t, ctx, client, load.acked.Load(), tl)
	checkOutageMetrics(t, s.URL, load.acked.Load())
}

// outageLoad is the clients writing to "hot" through the outage, every
// other write with a request id, each outcome kept for the judging.
type outageLoad struct {
	mu       sync.Mutex
	outcomes []outcome
	acked    atomic.Int64
	stop     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
}

func startOutageLoad(ctx context.Context, client *shttp.Client, clients int) *outageLoad {
	l := &outageLoad{stop: make(chan struct{})}
	for i := range clients {
		l.wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-l.stop:
					return
				default:
				}
				w := shardcounter.Write{Counter: "hot", Delta: 1}
				if n%2 == 0 {
					w.RequestID = fmt.Sprintf("c%d-%d", i, n)
				}
				o := outcome{start: time.Now(), w: w}
				_, o.err = client.WriteCounter(ctx, w)
				o.end = time.Now()
				if o.err == nil {
					l.acked.Add(1)
				} else {
					time.Sleep(20 * time.Millisecond) // as a client honouring Retry-After would, briefly
				}
				l.mu.Lock()
				l.outcomes = append(l.outcomes, o)
				l.mu.Unlock()
			}
		})
	}
	return l
}

// halt stops the clients and waits for them; it may be called again.
func (l *outageLoad) halt() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// outageTally counts the failed writes by kind, and those sent and
// answered while the store was down.
type outageTally struct {
	during, unavailable, unknown int
	slowest                      time.Duration // of the writes sent and answered during the outage
	firstUnavailable             time.Duration
	settle                       []shardcounter.Write // unknown outcome, with a request id: retried after
	unsettled                    int64                // unknown outcome, no request id: may or may not count
}

// tallyOutage judges each outcome: no success for a write sent and
// answered while the store was down, every failure unavailable or of
// unknown outcome, and each answered within replyBound.
func tallyOutage(t *testing.T, outcomes []outcome, downFrom, downUntil time.Time) outageTally {
	tl := outageTally{firstUnavailable: -1}
	for _, o := range outcomes {
		if o.err == nil {
			if !o.start.Before(downFrom) && o.end.Before(downUntil) {
				t.Errorf("write %+v sent at +%v while the store was down reported success", o.w, o.start.Sub(downFrom))
			}
			continue
		}
		switch {
		case shardcounter.IsOutcomeUnknown(o.err):
			tl.unknown++
			if o.w.RequestID != "" {
				tl.settle = append(tl.settle, o.w)
			} else {
				tl.unsettled++
			}
		case shardcounter.ErrorCode(o.err) == shardcounter.EUNAVAILABLE:
			tl.unavailable++
			if d := o.end.Sub(downFrom); d >= 0 && (tl.firstUnavailable < 0 || d < tl.firstUnavailable) {
				tl.firstUnavailable = d
			}
		default:
			t.Errorf("write %+v: %v, want unavailable or an outcome-unknown error", o.w, o.err)
		}
		if !o.start.Before(downFrom) && o.end.Before(downUntil) {
			tl.during++
			tl.slowest = max(tl.slowest, o.end.Sub(o.start))
			if took := o.end.Sub(o.start); took > replyBound {
				t.Errorf("write %+v took %v to fail while the store was down, want under %v", o.w, took, replyBound)
			}
		}
	}
	return tl
}

// checkOutageValue settles the unknown writes that have request ids (a
// retry with the same id is applied, or reports the earlier attempt as a
// duplicate) and checks the counter holds every acknowledged write, plus
// at most the unknown ones without a request id.
func checkOutageValue(t *testing.T, ctx context.Context, client *shttp.Client, acked int64, tl outageTally) {
	for _, w := range tl.settle {
		res, err := client.WriteCounter(ctx, w)
		if err != nil || !(res.Applied || res.Duplicate) {
			t.Fatalf("retry of %+v after the restart = %+v, %v", w, res, err)
		}
	}
	total := acked + int64(len(tl.settle))
	r, err := client.ReadCounter(ctx, "hot", shardcounter.Strong)
	if err != nil {
		t.Fatal(err)
	}
	if r.Value < total || r.Value > total+tl.unsettled {
		t.Fatalf("value %d, want %d acknowledged (and settled) writes, plus up to %d of unknown outcome", r.Value, total, tl.unsettled)
	}
}

// checkOutageMetrics checks that /metrics tells the story of the run.
func checkOutageMetrics(t *testing.T, url string, acked int64) {
	metrics := getBody(t, url+"/metrics")
	ping := `shardcounter_store_errors_total{kind="unavailable",op="ping"}`
	if v := sampleValue(metrics, ping); v <= 0 {
		t.Errorf("%s = %v after the outage, want > 0", ping, v)
	}
	// No count of failed applies is asked for: which batches a stop cuts,
	// and whether they fail as unavailable or outcome unknown or wait in
	// the queue until their writes' deadlines, depends on timing; the
	// probe of the store fails whatever the timing.
	if v := sampleValue(metrics, "shardcounter_writes_applied_total"); v < float64(acked) {
		t.Errorf("writes_applied_total %v, want at least %d", v, acked)
	}
}

// waitFor polls cond until it holds, failing the test after a bound.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var probe = &http.Client{Timeout: replyBound}

func getStatus(tb testing.TB, url string) int {
	tb.Helper()
	resp, err := probe.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func getBody(tb testing.TB, url string) string {
	tb.Helper()
	resp, err := probe.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// waitRaw503 posts to url until a reply is 503 with the API's unavailable
// body (a write in flight at the crash may get an outcome-unknown 500
// first), and returns it.
func waitRaw503(tb testing.TB, url string) *http.Response {
	tb.Helper()
	var resp *http.Response
	waitFor(tb, "a 503 unavailable reply to a write", func() bool {
		var err error
		resp, err = probe.Post(url, "application/json", strings.NewReader(`{}`))
		if err != nil {
			tb.Fatal(err)
		}
		defer resp.Body.Close()
		var body shttp.ErrorResponse
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode == http.StatusServiceUnavailable && body.Error.Code == shardcounter.EUNAVAILABLE
	})
	return resp
}

// sampleValue returns the value of a sample in a Prometheus text
// exposition, or -1 when it is absent.
func sampleValue(exposition, sample string) float64 {
	for line := range strings.Lines(exposition) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), sample+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return -1
}

// outageFor is how long TestStoreOutage keeps the store down: 1 s, or
// $OUTAGE_FOR (docs/OPERATIONS.md measures a 5 s one).
func outageFor(t *testing.T) time.Duration {
	v := os.Getenv("OUTAGE_FOR")
	if v == "" {
		return time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("OUTAGE_FOR=%q: give a duration such as 5s", v)
	}
	return d
}
