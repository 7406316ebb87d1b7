package main_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
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

// TestStoreRestartUnderLoad restarts the store once under 16 writers
// against a running serve, the way an upgrade or a crash does: PostgreSQL
// with pg_ctl restart -m fast (open sessions are ended, idle ones first),
// Redis with SIGKILL and a start on its append-only file (appendfsync
// always). The batches in flight at the restart are settled by their
// markers, so no write is answered internal or outcome_unknown: each is
// acknowledged (and applied once) or unavailable (and not applied: its
// retry with the same request id applies). The counter then holds
// exactly the acknowledged and settled writes: none lost, none doubled.
//
// On a Cluster with wait_replicas=1 a master is SIGKILLed and its replica
// promoted; the old master then rejoins as the new one's replica. A write
// whose WAIT fell short when its master died is outcome_unknown there (its
// replica may not have it): the checker retries those with their request
// ids, and they must settle exactly once.
//
// scripts/soak-faults.sh runs it for minutes: SOAK_RESTARTS restarts (default
// 1), SOAK_EVERY apart (default 0), under SOAK_WRITERS writers (default
// 16).
func TestStoreRestartUnderLoad(t *testing.T) {
	soak := soakSettings(t)
	t.Run("Postgres", func(t *testing.T) {
		srv := pgtest.StartServer(t)
		testRestartUnderLoad(t, soak, srv.URL(), false, func() { srv.Stop(t); srv.Start(t) })
	})
	t.Run("Redis", func(t *testing.T) {
		srv := redistest.MustStart(t, "appendonly yes", "appendfsync always")
		testRestartUnderLoad(t, soak, "redis://"+srv.Addr, false, func() {
			srv.Kill()
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("ClusterFailover", func(t *testing.T) {
		cl := redistest.MustStartClusterReplicas(t, 3)
		a := cl.Addrs()
		dsn := "redis+cluster://" + a[0] + "?addr=" + strings.Join(a[1:], "&addr=") + "&wait_replicas=1"
		n := 0
		testRestartUnderLoad(t, soak, dsn, true, func() { failover(t, cl, n%len(cl.Masters)); n++ })
	})
}

// failover SIGKILLs the i-th master of cl, waits for its replica to take
// over, and restarts it, to rejoin as the new master's replica.
func failover(t *testing.T, cl *redistest.Cluster, i int) {
	m := cl.Masters[i]
	m.Kill()
	promoted, err := cl.WaitFailover(m, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m.Addr+" to replicate "+promoted.Addr, func() bool {
		info, err := m.Do("INFO", "replication")
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	cl.Masters[i], cl.Replicas[i] = promoted, m
}

// soak is how TestStoreRestartUnderLoad loads and restarts its stores.
type soak struct {
	restarts, writers int
	every             time.Duration
}

func soakSettings(t *testing.T) soak {
	s := soak{restarts: 1, writers: 16}
	for name, p := range map[string]*int{"SOAK_RESTARTS": &s.restarts, "SOAK_WRITERS": &s.writers} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: give a positive number", name, v)
			}
			*p = n
		}
	}
	if v := os.Getenv("SOAK_EVERY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			t.Fatalf("SOAK_EVERY=%q: give a duration such as 15s", v)
		}
		s.every = d
	}
	return s
}

func testRestartUnderLoad(t *testing.T, soak soak, dsn string, unknownOK bool, restart func()) {
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
	for i := range soak.writers {
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
	var restarts []time.Time
	var took time.Duration
	for i := range soak.restarts {
		if i > 0 {
			time.Sleep(soak.every)
		}
		at := time.Now()
		restart()
		took = max(took, time.Since(at))
		restarts = append(restarts, at)
		after := acked.Load()
		waitFor(t, "200 acknowledged writes after the restart", func() bool { return acked.Load() >= after+200 })
	}
	close(stopLoad)
	wg.Wait()
	checkRestart(t, ctx, client, outcomes, restarts, unknownOK)
	t.Logf("%d restarts, the longest took %v", len(restarts), took.Round(time.Millisecond))
}

// checkRestart is TestStoreRestartUnderLoad's checker.
func checkRestart(t *testing.T, ctx context.Context, client *shttp.Client, outcomes []outcome, restarts []time.Time, unknownOK bool) {
	t.Helper()
	var acked, unavailable, unknown, settled, maybe int64
	failing := make([]time.Duration, len(restarts)) // per restart, how long after it writes failed
	for _, o := range outcomes {
		code := shardcounter.ErrorCode(o.err)
		switch {
		case o.err == nil:
			acked++
			continue
		case code == shardcounter.EUNAVAILABLE && !shardcounter.IsOutcomeUnknown(o.err):
			unavailable++
		case unknownOK && shardcounter.IsOutcomeUnknown(o.err):
			unknown++
		default:
			t.Errorf("write %+v: %v (code %s): want success or unavailable", o.w, o.err, code)
			continue
		}
		for i := len(restarts) - 1; i >= 0; i-- {
			if o.end.After(restarts[i]) {
				failing[i] = max(failing[i], o.end.Sub(restarts[i]))
				break
			}
		}
		if o.w.RequestID == "" {
			if code != shardcounter.EUNAVAILABLE {
				maybe++
			}
			continue // unavailable: not applied, nothing to settle
		}
		res, err := client.WriteCounter(ctx, o.w)
		switch {
		case err != nil:
			t.Fatalf("retry of %+v: %v", o.w, err)
		case res.Duplicate && code == shardcounter.EUNAVAILABLE:
			t.Errorf("write %+v was answered unavailable, but its retry is a duplicate: it had been applied", o.w)
		default:
			settled++ // counted once, by the first attempt or by the retry
		}
	}
	r, err := client.ReadCounter(ctx, "hot", shardcounter.Strong)
	if err != nil {
		t.Fatal(err)
	}
	if r.Value < acked+settled || r.Value > acked+settled+maybe {
		t.Errorf("value %d, want %d (+ up to %d of unknown outcome without request id): %d acknowledged + %d settled by retry with their request ids (lost or doubled: %+d)",
			r.Value, acked+settled, maybe, acked, settled, r.Value-acked-settled)
	}
	t.Logf("%d writes: %d acknowledged, %d unavailable, %d outcome unknown, 0 internal; %d retried with their request ids; value %d = %d expected; writes failed for up to %v after each restart began",
		len(outcomes), acked, unavailable, unknown, settled, r.Value, acked+settled, failing)
}
