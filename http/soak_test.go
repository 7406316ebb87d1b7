//go:build soak

package http_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/dsn"
	"github.com/shardcounter/shardcounter/engine"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/metrics"
)

// TestSoak runs mixed load through the HTTP API at about 80% of the
// capacity it first measures, for SHARDCOUNTER_SOAK_DURATION (default
// 60s), over the store SHARDCOUNTER_SOAK_STORE (default a bolt file). It
// checks that the heap in use and the goroutine count stay flat (the last
// third of the run against the first) and that every counter ends at the
// sum of its acknowledged writes. It is behind the soak build tag, so the
// default test run never pays for it:
//
//	go test -tags soak -run TestSoak -v -timeout 10m ./http
func TestSoak(t *testing.T) {
	duration, storeDSN := soakSettings(t)
	client := startSoakServer(t, storeDSN)
	run := fmt.Sprintf("soak-%d/", time.Now().UnixNano()) // fresh counters on a reused store
	l := &soakLoad{client: client, prefix: run}
	const workers = 32

	// Capacity: closed-loop, as fast as the workers go.
	capacity := l.closedLoop(t, workers, 5*time.Second)
	rate := 0.8 * capacity
	t.Logf("capacity %.0f ops/s; soaking at %.0f ops/s for %v", capacity, rate, duration)

	heap, goroutines, behind := l.openLoop(t, workers, rate, duration)
	t.Logf("%d ops, %d errors, %d ops behind schedule", l.ops.Load(), l.errors.Load(), behind)
	if n := l.errors.Load(); n > 0 {
		t.Errorf("%d operations failed under load below capacity", n)
	}
	checkFlat(t, heap, goroutines, workers)
	l.check(t)
}

// soakSettings reads how long to soak and over which store from the
// environment, with their defaults.
func soakSettings(t *testing.T) (duration time.Duration, storeDSN string) {
	duration = 60 * time.Second
	if v := os.Getenv("SHARDCOUNTER_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SHARDCOUNTER_SOAK_DURATION=%q: %v", v, err)
		}
		duration = d
	}
	storeDSN = os.Getenv("SHARDCOUNTER_SOAK_STORE")
	if storeDSN == "" {
		storeDSN = "bolt:" + filepath.Join(t.TempDir(), "soak.db")
	}
	return duration, storeDSN
}

// startSoakServer starts a server as the command wires it (metrics
// included, since they are on the path of every operation) over the store
// storeDSN, stopped when the test ends, and returns a client of it.
func startSoakServer(t *testing.T, storeDSN string) *shttp.Client {
	ctx := context.Background()
	store, err := dsn.Open(ctx, storeDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	m := metrics.New()
	eng, err := engine.New(m.Store(store), engine.Config{OnFlush: m.ObserveFlush})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(ctx) })
	m.RegisterEngine(eng.Stats())
	ts := httptest.NewServer(shttp.NewServer(eng, shttp.ServerOptions{Metrics: m}))
	t.Cleanup(ts.Close)
	return shttp.NewClient(ts.URL)
}

// openLoop runs the mix at rate ops a second for d with n workers: an open
// loop, so that a slow server shows as ops behind schedule rather than as
// a lower rate. It samples the heap in use and the goroutine count each
// second, and returns the samples and the ops the workers could not keep
// up with.
func (l *soakLoad) openLoop(t *testing.T, n int, rate float64, d time.Duration) (heap, goroutines []float64, behind int64) {
	tokens := make(chan struct{}, n*4)
	stop := make(chan struct{})
	var late atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for range tokens {
				l.op(t)
			}
		})
	}
	go meterTokens(rate, tokens, stop, &late)
	var ms runtime.MemStats
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		time.Sleep(time.Second)
		runtime.ReadMemStats(&ms)
		heap = append(heap, float64(ms.HeapInuse))
		goroutines = append(goroutines, float64(runtime.NumGoroutine()))
	}
	close(stop)
	wg.Wait()
	return heap, goroutines, late.Load()
}

// meterTokens sends rate tokens a second on tokens until stop is closed,
// then closes tokens. A token no worker is free to take is dropped and
// counted in behind, so that the schedule does not slip.
func meterTokens(rate float64, tokens chan<- struct{}, stop <-chan struct{}, behind *atomic.Int64) {
	const tick = 10 * time.Millisecond
	per := rate * tick.Seconds()
	var owed float64
	tk := time.NewTicker(tick)
	defer tk.Stop()
	defer close(tokens)
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
		}
		for owed += per; owed >= 1; owed-- {
			select {
			case tokens <- struct{}{}:
			default:
				behind.Add(1)
			}
		}
	}
}

// checkFlat fails the test unless the heap in use and the goroutine count
// in the last third of the samples stay near those in the first.
func checkFlat(t *testing.T, heap, goroutines []float64, workers int) {
	firstHeap, lastHeap := thirds(heap)
	firstG, lastG := thirds(goroutines)
	t.Logf("heap in use: first third %.1f MiB, last third %.1f MiB; goroutines: %.0f, %.0f", firstHeap/(1<<20), lastHeap/(1<<20), firstG, lastG)
	// Flat, with room for the garbage collector's rhythm: a leak of a few
	// bytes per op over a minute of thousands of ops a second is far
	// beyond these margins.
	if lastHeap > firstHeap*1.5+16<<20 {
		t.Errorf("heap in use grew from %.1f MiB to %.1f MiB", firstHeap/(1<<20), lastHeap/(1<<20))
	}
	if lastG > firstG+float64(workers) {
		t.Errorf("goroutines grew from %.0f to %.0f", firstG, lastG)
	}
}

// thirds returns the means of the first and the last third of xs.
func thirds(xs []float64) (first, last float64) {
	n := len(xs) / 3
	if n == 0 {
		return 0, 0
	}
	mean := func(s []float64) float64 {
		var sum float64
		for _, x := range s {
			sum += x
		}
		return sum / float64(len(s))
	}
	return mean(xs[:n]), mean(xs[len(xs)-n:])
}

// soakLoad is the mixed workload: writes, retried writes, batches, strong
// and cached reads and listings over a few dozen counters, keeping the
// sum of acknowledged deltas per counter.
type soakLoad struct {
	client *shttp.Client
	prefix string

	mu       sync.Mutex
	expected map[string]int64
	ops      atomic.Int64
	errors   atomic.Int64
	seq      atomic.Int64
}

const soakCounters = 50

func (l *soakLoad) counter() string { return fmt.Sprintf("%sc%02d", l.prefix, rand.IntN(soakCounters)) }

func (l *soakLoad) acked(id string, delta int64) {
	l.mu.Lock()
	if l.expected == nil {
		l.expected = make(map[string]int64)
	}
	l.expected[id] += delta
	l.mu.Unlock()
}

func (l *soakLoad) fail(t *testing.T, what string, err error) {
	if l.errors.Add(1) <= 5 {
		t.Logf("%s: %v", what, err)
	}
}

// op runs one operation of the mix.
func (l *soakLoad) op(t *testing.T) {
	ctx := context.Background()
	l.ops.Add(1)
	switch p := rand.IntN(100); {
	case p < 55: // increment, a quarter with a request id, sent twice
		w := shardcounter.Write{Counter: l.counter(), Delta: 1 + rand.Int64N(5)}
		if p < 14 {
			w.RequestID = fmt.Sprintf("r%d", l.seq.Add(1))
		}
		res, err := l.client.WriteCounter(ctx, w)
		if err != nil {
			l.fail(t, "increment", err)
			return
		}
		if res.Applied {
			l.acked(w.Counter, w.Delta)
		}
		if w.RequestID != "" {
			if res, err := l.client.WriteCounter(ctx, w); err != nil || !res.Duplicate {
				l.fail(t, "retry", fmt.Errorf("%+v, %v: want a duplicate", res, err))
			}
		}
	case p < 65: // decrement
		w := shardcounter.Write{Counter: l.counter(), Delta: -1}
		if _, err := l.client.WriteCounter(ctx, w); err != nil {
			l.fail(t, "decrement", err)
			return
		}
		l.acked(w.Counter, w.Delta)
	case p < 75: // a batch
		ws := make([]shardcounter.Write, 5)
		for i := range ws {
			ws[i] = shardcounter.Write{Counter: l.counter(), Delta: rand.Int64N(21) - 10}
			if ws[i].Delta == 0 {
				ws[i].Delta = 1
			}
		}
		res, err := l.client.WriteBatch(ctx, ws)
		if err != nil {
			l.fail(t, "batch", err)
			return
		}
		for i, r := range res {
			if r.Error != nil {
				l.fail(t, "batch item", r.Error)
			} else if r.Applied {
				l.acked(ws[i].Counter, ws[i].Delta)
			}
		}
	case p < 95: // reads, half cached
		c := shardcounter.Strong
		if p < 85 {
			c = shardcounter.Cached
		}
		if _, err := l.client.ReadCounter(ctx, l.counter(), c); err != nil && shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
			l.fail(t, "read", err)
		}
	default:
		if _, err := l.client.ListCounters(ctx, shardcounter.ListOptions{Prefix: l.prefix, Limit: 20}); err != nil {
			l.fail(t, "list", err)
		}
	}
}

// closedLoop runs the mix with n workers for d and returns ops a second.
func (l *soakLoad) closedLoop(t *testing.T, n int, d time.Duration) float64 {
	before := l.ops.Load()
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for time.Now().Before(end) {
				l.op(t)
			}
		})
	}
	wg.Wait()
	return float64(l.ops.Load()-before) / d.Seconds()
}

// check reads every counter and compares it with its acknowledged writes.
func (l *soakLoad) check(t *testing.T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, want := range l.expected {
		r, err := l.client.ReadCounter(context.Background(), id, shardcounter.Strong)
		if err != nil {
			t.Errorf("read %s: %v", id, err)
			continue
		}
		if r.Value != want {
			t.Errorf("%s = %d, want %d acknowledged", id, r.Value, want)
		}
	}
	t.Logf("%d counters check out", len(l.expected))
}
