package main_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/internal/redistest"
)

// TestStoreRestartUnderLoad restarts the store once under 16 writers
// against a running serve, the way an upgrade or a crash does: PostgreSQL
// with pg_ctl restart -m fast (open sessions are ended, idle ones first),
// Redis with SIGKILL and a start on its append-only file (appendfsync
// always). The batches in flight at the restart are settled by their
// markers, so no write is answered internal or outcome_unknown: each is
// acknowledged (and applied once) or unavailable (and not applied: its
// retry with the same request id applies). The counter then holds
// exactly the acknowledged and settled writes: none lost, none doubled.
func TestStoreRestartUnderLoad(t *testing.T) {
	t.Run("Postgres", func(t *testing.T) {
		srv := pgtest.StartServer(t)
		testRestartUnderLoad(t, srv.URL(), func() { srv.Stop(t); srv.Start(t) })
	})
	t.Run("Redis", func(t *testing.T) {
		srv := redistest.MustStart(t, "appendonly yes", "appendfsync always")
		testRestartUnderLoad(t, "redis://"+srv.Addr, func() {
			srv.Kill()
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
		})
	})
}

func testRestartUnderLoad(t *testing.T, dsn string, restart func()) {
	s := StartServerEnv(t, t.TempDir(), nil, "--listen", "127.0.0.1:0", "--store", dsn, "--request-timeout", "10s")
	client := shttp.NewClient(s.URL)
	client.HTTPClient = &http.Client{Timeout: time.Minute}
	ctx := context.Background()
	var (
		mu       sync.Mutex
		outcomes []outcome
		acked    atomic.Int64
		stopLoad = make(chan struct{})
		wg       sync.WaitGroup
	)
	for i := range 16 {
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
					time.Sleep(20 * time.Millisecond)
				}
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
			}
		})
	}
	waitFor(t, "200 acknowledged writes before the restart", func() bool { return acked.Load() >= 200 })
	restartAt := time.Now()
	restart()
	back := time.Now()
	after := acked.Load()
	waitFor(t, "200 acknowledged writes after the restart", func() bool { return acked.Load() >= after+200 })
	close(stopLoad)
	wg.Wait()
	checkRestart(t, ctx, client, outcomes, restartAt, back)
}

// checkRestart is TestStoreRestartUnderLoad's checker.
func checkRestart(t *testing.T, ctx context.Context, client *shttp.Client, outcomes []outcome, restartAt, back time.Time) {
	t.Helper()
	var acked, unavailable, settled int64
	var lastFail time.Time
	for _, o := range outcomes {
		switch code := shardcounter.ErrorCode(o.err); {
		case o.err == nil:
			acked++
			continue
		case code == shardcounter.EUNAVAILABLE && !shardcounter.IsOutcomeUnknown(o.err):
			unavailable++
			if o.end.After(lastFail) {
				lastFail = o.end
			}
		default:
			t.Errorf("write %+v: %v (code %s): want success or unavailable", o.w, o.err, code)
			continue
		}
		if o.w.RequestID == "" {
			continue // unavailable: not applied, nothing to settle
		}
		res, err := client.WriteCounter(ctx, o.w)
		switch {
		case err != nil:
			t.Fatalf("retry of %+v: %v", o.w, err)
		case res.Duplicate:
			t.Errorf("write %+v was answered unavailable, but its retry is a duplicate: it had been applied", o.w)
		default:
			settled++
		}
	}
	r, err := client.ReadCounter(ctx, "hot", shardcounter.Strong)
	if err != nil {
		t.Fatal(err)
	}
	if r.Value != acked+settled {
		t.Errorf("value %d, want %d: %d acknowledged + %d unavailable retried with their request ids (lost or doubled: %+d)",
			r.Value, acked+settled, acked, settled, r.Value-acked-settled)
	}
	failing := time.Duration(0)
	if !lastFail.IsZero() {
		failing = lastFail.Sub(restartAt)
	}
	t.Logf("restart took %v; %d writes: %d acknowledged, %d unavailable (%d retried), 0 internal, 0 outcome unknown; last failure %v after the restart began",
		back.Sub(restartAt).Round(time.Millisecond), len(outcomes), acked, unavailable, settled, failing.Round(time.Millisecond))
}
