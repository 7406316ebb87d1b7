package main_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/internal/redistest"
)

// sharedStores returns the stores that several server processes can share:
// a fresh redis-server per test (started by the harness; it outlives our
// process, so appendonly no loses nothing when only the shardcounter
// process dies) and a fresh database on the tests' PostgreSQL.
func sharedStores(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"Redis":    func(t *testing.T) string { return "redis://" + redistest.MustStart(t).Addr },
		"Postgres": func(t *testing.T) string { return pgtest.MustDatabase(t) },
	}
}

// TestCrashUnderLoad kills the server with SIGKILL while many clients
// write with durable acknowledgement, restarts it on the same store, and
// checks invariant 1: the value holds every acknowledged write, and at
// most the writes that were in flight (sent, never answered) besides.
func TestCrashUnderLoad(t *testing.T) {
	stores := map[string]func(t *testing.T) string{
		"Bolt":   func(t *testing.T) string { return "bolt:" + filepath.Join(t.TempDir(), "data", "c.db") },
		"Pebble": func(t *testing.T) string { return "pebble:" + filepath.Join(t.TempDir(), "data", "pebble") },
	}
	for name, f := range sharedStores(t) {
		stores[name] = f
	}
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			dsn := store(t)
			args := []string{"--listen", "127.0.0.1:0", "--store", dsn}
			s := StartServerEnv(t, dir, nil, args...)
			client := shttp.NewClient(s.URL)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			const clients = 32
			var acked, inflight atomic.Int64 // inflight: sent and never answered
			var wg sync.WaitGroup
			for i := range clients {
				wg.Go(func() {
					for n := 0; ; n++ {
						// Every third write carries a request id, so the
						// crash also hits writes whose ids are recorded.
						w := shardcounter.Write{Counter: "hot", Delta: 1}
						if n%3 == 0 {
							w.RequestID = fmt.Sprintf("c%d-%d", i, n)
						}
						res, err := client.WriteCounter(ctx, w)
						if err != nil {
							// The server died under this write: it may or
							// may not have been committed.
							inflight.Add(1)
							return
						}
						if !res.Applied {
							t.Errorf("write %+v = %+v, want applied", w, res)
							return
						}
						acked.Add(1)
					}
				})
			}
			for acked.Load() < 500 && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			if code := s.Stop(t, syscall.SIGKILL); code == 0 {
				t.Fatalf("exit 0 after SIGKILL")
			}
			wg.Wait()

			s = StartServerEnv(t, dir, nil, args...)
			r, err := shttp.NewClient(s.URL).ReadCounter(ctx, "hot", shardcounter.Strong)
			if err != nil {
				t.Fatal(err)
			}
			lo, hi := acked.Load(), acked.Load()+inflight.Load()
			if r.Value < lo || r.Value > hi {
				t.Fatalf("value %d after SIGKILL and restart, want %d acknowledged (+ up to %d in flight)", r.Value, lo, inflight.Load())
			}
			t.Logf("%d acknowledged, %d in flight at the kill, value %d", lo, inflight.Load(), r.Value)
		})
	}
}

// TestDuplicateFloodTwoProcesses sends one request id many times, from
// many goroutines, to two server processes sharing one store: it counts
// once (invariant 2).
func TestDuplicateFloodTwoProcesses(t *testing.T) {
	for name, store := range sharedStores(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			dsn := store(t)
			var clients []*shttp.Client
			for range 2 {
				s := StartServerEnv(t, dir, nil, "--listen", "127.0.0.1:0", "--store", dsn)
				clients = append(clients, shttp.NewClient(s.URL))
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var applied, dups atomic.Int64
			var wg sync.WaitGroup
			for i := range 64 {
				wg.Go(func() {
					for range 5 {
						res, err := clients[i%2].WriteCounter(ctx, shardcounter.Write{Counter: "flood", Delta: 7, RequestID: "the-one"})
						if err != nil {
							t.Error(err)
							return
						}
						switch {
						case res.Applied && !res.Duplicate:
							applied.Add(1)
						case res.Duplicate && !res.Applied:
							dups.Add(1)
						default:
							t.Errorf("result %+v", res)
						}
					}
				})
			}
			wg.Wait()
			if applied.Load() != 1 || dups.Load() != 64*5-1 {
				t.Fatalf("applied %d, duplicates %d; want 1 and %d", applied.Load(), dups.Load(), 64*5-1)
			}
			for i, c := range clients {
				if r, err := c.ReadCounter(ctx, "flood", shardcounter.Strong); err != nil || r.Value != 7 {
					t.Fatalf("server %d reads %+v, %v; want 7", i, r, err)
				}
			}
		})
	}
}
