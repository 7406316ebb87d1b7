package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// killLoopEnv sets the number of kills of TestKillLoop: 20 by default, a
// run of about a minute on two cores.
const killLoopEnv = "SHARDCOUNTER_KILL_LOOP"

// TestKillLoop kills the server with SIGKILL under 64 writers, again and
// again, on the default store (Pebble), and checks after the last restart
// that no acknowledged write was lost and none was counted twice. Every
// write carries a request id; a writer whose server died under it retries
// the same write, with the same id, against the next server until it is
// answered. So every write is, in the end, acknowledged exactly once, and
// each counter must hold exactly the writes acknowledged on it.
func TestKillLoop(t *testing.T) {
	kills := 20
	if v := os.Getenv(killLoopEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: give a number of kills", killLoopEnv, v)
		}
		kills = n
	}
	dir := t.TempDir()
	args := []string{"--listen", "127.0.0.1:0", "--store", "pebble:" + filepath.Join(dir, "data", "pebble")}

	var (
		mu      sync.Mutex
		client  *shttp.Client
		changed = make(chan struct{}) // closed, and replaced, when the server changes
	)
	current := func() (*shttp.Client, chan struct{}) {
		mu.Lock()
		defer mu.Unlock()
		return client, changed
	}
	serve := func() *Server {
		s := StartServerEnv(t, dir, nil, args...)
		mu.Lock()
		client = shttp.NewClient(s.URL)
		close(changed)
		changed = make(chan struct{})
		mu.Unlock()
		return s
	}

	const writers, counters = 64, 8
	var acked [counters]atomic.Int64
	var total atomic.Int64
	var stop atomic.Bool
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	s := serve()
	for w := range writers {
		wg.Go(func() {
			for n := 0; !stop.Load(); n++ {
				c := (w + n) % counters
				wr := shardcounter.Write{Counter: fmt.Sprint("k", c), Delta: 1, RequestID: fmt.Sprintf("w%d-%d", w, n)}
				for retry := false; ; retry = true {
					cl, next := current()
					res, err := cl.WriteCounter(ctx, wr)
					if err == nil {
						// A duplicate is a retry whose earlier try was
						// applied before a kill: it counts once.
						if !res.Applied && !(res.Duplicate && retry) {
							t.Errorf("write %+v = %+v", wr, res)
							return
						}
						acked[c].Add(1)
						total.Add(1)
						break
					}
					select { // the server died: wait for the next one and retry
					case <-next:
					case <-ctx.Done():
						t.Errorf("write %+v: %v", wr, err)
						return
					}
				}
			}
		})
	}
	for i := range kills {
		start := total.Load()
		deadline := time.Now().Add(5 * time.Second)
		for total.Load() < start+300 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if total.Load() == start {
			t.Fatalf("kill %d: no write acknowledged in 5s:\n%s", i, s.Logs())
		}
		if code := s.Stop(t, syscall.SIGKILL); code == 0 {
			t.Fatalf("exit 0 after SIGKILL")
		}
		s = serve()
	}
	// Every writer settles its write in flight against the last server.
	stop.Store(true)
	wg.Wait()
	cl, _ := current()
	for c := range counters {
		id := fmt.Sprint("k", c)
		r, err := cl.ReadCounter(ctx, id, shardcounter.Strong)
		if err != nil {
			t.Fatal(err)
		}
		if r.Value != acked[c].Load() {
			t.Errorf("%s = %d after %d kills, want %d: every write acknowledged exactly once", id, r.Value, kills, acked[c].Load())
		}
	}
	t.Logf("%d kills, %d writes acknowledged", kills, total.Load())
}
