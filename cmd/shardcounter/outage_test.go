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

func testStoreOutage(t *testing.T, store outageStore) {
	dir := t.TempDir()
	s := StartServerEnv(t, dir, nil, "--listen", "127.0.0.1:0", "--store", store.dsn, "--request-timeout", "2s")
	client := shttp.NewClient(s.URL)
	client.HTTPClient = &http.Client{Timeout: time.Minute} // a guard against a hang, far past replyBound
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var (
		mu       sync.Mutex
		outcomes []outcome
		acked    atomic.Int64
		stopLoad = make(chan struct{})
		wg       sync.WaitGroup
	)
	const clients = 8
	for i := range clients {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stopLoad:
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
					acked.Add(1)
				} else {
					time.Sleep(20 * time.Millisecond) // as a client honouring Retry-After would, briefly
				}
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
			}
		})
	}
	defer func() {
		select {
		case <-stopLoad:
		default:
			close(stopLoad)
		}
		wg.Wait()
	}()
	waitFor(t, "200 acknowledged writes before the outage", func() bool { return acked.Load() >= 200 })

	store.stop()
	downFrom := time.Now()
	waitFor(t, "/readyz to answer 503", func() bool { return getStatus(t, s.URL+"/readyz") == http.StatusServiceUnavailable })
	raw := waitRaw503(t, s.URL+"/v1/counters/hot/increment")
	time.Sleep(outageFor(t)) // the outage under load
	downUntil := time.Now()
	store.start()
	waitFor(t, "/readyz to answer 200 after the restart", func() bool { return getStatus(t, s.URL+"/readyz") == http.StatusOK })
	after := acked.Load()
	waitFor(t, "100 acknowledged writes after the restart", func() bool { return acked.Load() >= after+100 })
	close(stopLoad)
	wg.Wait()

	if raw.Header.Get("Retry-After") == "" {
		t.Errorf("503 during the outage without Retry-After")
	}
	var during, unavailable, unknown int
	var slowest time.Duration // of the writes sent and answered during the outage
	var firstUnavailable time.Duration = -1
	var settle []shardcounter.Write // unknown outcome, with a request id: retried below
	var unsettled int64             // unknown outcome, no request id: may or may not count
	for _, o := range outcomes {
		if o.err == nil {
			if !o.start.Before(downFrom) && o.end.Before(downUntil) {
				t.Errorf("write %+v sent at +%v while the store was down reported success", o.w, o.start.Sub(downFrom))
			}
			continue
		}
		switch {
		case shardcounter.IsOutcomeUnknown(o.err):
			unknown++
			if o.w.RequestID != "" {
				settle = append(settle, o.w)
			} else {
				unsettled++
			}
		case shardcounter.ErrorCode(o.err) == shardcounter.EUNAVAILABLE:
			unavailable++
			if d := o.end.Sub(downFrom); d >= 0 && (firstUnavailable < 0 || d < firstUnavailable) {
				firstUnavailable = d
			}
		default:
			t.Errorf("write %+v: %v, want unavailable or an outcome-unknown error", o.w, o.err)
		}
		if !o.start.Before(downFrom) && o.end.Before(downUntil) {
			during++
			slowest = max(slowest, o.end.Sub(o.start))
			if took := o.end.Sub(o.start); took > replyBound {
				t.Errorf("write %+v took %v to fail while the store was down, want under %v", o.w, took, replyBound)
			}
		}
	}
	if during < clients {
		t.Errorf("%d writes were sent and answered while the store was down, want at least %d", during, clients)
	}
	t.Logf("%d sent and answered during the outage, the slowest in %v", during, slowest)
	t.Logf("%d outcomes: %d acknowledged, %d unavailable, %d outcome unknown (%d with request id); %d sent and answered during the outage; first unavailable %v after the store stopped",
		len(outcomes), acked.Load(), unavailable, unknown, len(settle), during, firstUnavailable)

	// Settle the unknown writes that have request ids: a retry with the
	// same id is applied, or reports the earlier attempt as a duplicate.
	for _, w := range settle {
		res, err := client.WriteCounter(ctx, w)
		if err != nil || !(res.Applied || res.Duplicate) {
			t.Fatalf("retry of %+v after the restart = %+v, %v", w, res, err)
		}
	}
	total := acked.Load() + int64(len(settle))
	r, err := client.ReadCounter(ctx, "hot", shardcounter.Strong)
	if err != nil {
		t.Fatal(err)
	}
	if r.Value < total || r.Value > total+unsettled {
		t.Fatalf("value %d, want %d acknowledged (and settled) writes, plus up to %d of unknown outcome", r.Value, total, unsettled)
	}

	// /metrics tells the story of the run.
	metrics := getBody(t, s.URL+"/metrics")
	for _, want := range []string{`shardcounter_store_errors_total{kind="unavailable",op="apply"}`, `shardcounter_store_errors_total{kind="unavailable",op="ping"}`} {
		if v := sampleValue(metrics, want); v <= 0 {
			t.Errorf("%s = %v after the outage, want > 0", want, v)
		}
	}
	if v := sampleValue(metrics, "shardcounter_writes_applied_total"); v < float64(acked.Load()) {
		t.Errorf("writes_applied_total %v, want at least %d", v, acked.Load())
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
