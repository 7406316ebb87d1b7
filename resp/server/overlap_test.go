package server_test

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/internal/redistest"
	sredis "github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/resp/server"
)

// heldCommits wraps a store and holds every Apply until release is
// closed, sending on entered as each begins. It advises what Redis's
// store does (shardcounter.HotCommitPipeliner): two commits at once, of
// one counter too.
type heldCommits struct {
	shardcounter.CounterStore
	entered chan struct{}
	release chan struct{}
}

func (h *heldCommits) Unwrap() shardcounter.CounterStore { return h.CounterStore }
func (h *heldCommits) CommitsInFlight() int              { return 2 }
func (h *heldCommits) PipelinesHotCommits() bool         { return true }

func (h *heldCommits) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	h.entered <- struct{}{}
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.CounterStore.Apply(ctx, incs)
}

// TestHotCommitsOverlap checks that over an engine whose commits of one
// hot counter overlap, another connection's INCR of the counter reaches
// the store while the first connection's commit is held: the server does
// not hold one batch at a time there (it serves a goroutine a connection),
// so the engine's second flush has writes to carry. Both INCRs then
// answer, and the counter counts both.
func TestHotCommitsOverlap(t *testing.T) {
	ctx := context.Background()
	store, err := bolt.Open(ctx, filepath.Join(t.TempDir(), "counters.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	held := &heldCommits{CounterStore: store, entered: make(chan struct{}, 8), release: make(chan struct{})}
	// The first commit is held past the wait below rather than time out.
	eng, err := engine.New(held, engine.Config{FlushTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !eng.OverlapsHotCommits() {
		t.Fatal("OverlapsHotCommits() = false over a store advising two commits of one counter at once")
	}
	released := false
	release := func() {
		if !released {
			released = true
			close(held.release)
		}
	}
	t.Cleanup(func() {
		release()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := eng.Close(ctx); err != nil {
			t.Error(err)
		}
		store.Close()
	})
	_, addr := MustServe(t, eng, server.Options{Engine: eng.Stats(), CommandTimeout: time.Minute})
	// No read deadline: the first INCR waits for as long as its commit is
	// held.
	client := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: -1})
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := client(), client()
	// Both connections are open, and past HELLO, before the first INCR.
	if err := a.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([]int64, 2)
	errs := make([]error, 2)
	wg.Add(1)
	go func() { defer wg.Done(); got[0], errs[0] = a.Incr(ctx, "hot").Result() }()
	wait := func(what string) bool {
		select {
		case <-held.entered:
			return true
		case <-time.After(10 * time.Second):
			t.Errorf("%s did not reach the store within 10s", what)
			return false
		}
	}
	if !wait("the first INCR") {
		release()
		wg.Wait()
		return
	}
	wg.Add(1)
	go func() { defer wg.Done(); got[1], errs[1] = b.Incr(ctx, "hot").Result() }()
	wait("another connection's INCR, while the first one's commit was held,")
	release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("INCR %d: %v", i, err)
		}
	}
	if got[0]+got[1] != 3 {
		t.Errorf("the two INCRs answered %d and %d, want 1 and 2", got[0], got[1])
	}
	if n, err := a.Get(ctx, "hot").Int64(); err != nil || n != 2 {
		t.Errorf("GET hot = %d, %v; want 2", n, err)
	}
}

// TestServingMode checks how the server serves each kind of engine, from
// INFO's multiplexing_api: a goroutine a connection over Redis durable
// (whose commits of one hot counter overlap) unless Options.EventLoop
// says otherwise, the event loop over Redis async and over bolt.
func TestServingMode(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the event loop serves on Linux only")
	}
	if connGoroutines {
		t.Skip("SHARDCOUNTER_RESP_GOROUTINES=1 serves every connection on a goroutine")
	}
	ctx := context.Background()
	url := "redis://" + redistest.MustStart(t).Addr
	redisEngine := func(t *testing.T, d engine.Durability) *engine.Engine {
		s, err := sredis.Open(ctx, url, sredis.Options{})
		if err != nil {
			t.Fatal(err)
		}
		eng, err := engine.New(s, engine.Config{Durability: d})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := eng.Close(ctx); err != nil {
				t.Error(err)
			}
			s.Close()
		})
		return eng
	}
	for _, tc := range []struct {
		name string
		eng  func(t *testing.T) *engine.Engine
		opts server.Options
		want string
	}{
		{"redis durable", func(t *testing.T) *engine.Engine { return redisEngine(t, engine.Durable) }, server.Options{}, "goroutine"},
		{"redis durable, EventLoop", func(t *testing.T) *engine.Engine { return redisEngine(t, engine.Durable) }, server.Options{EventLoop: true}, "epoll"},
		{"redis durable, EventLoop and ConnGoroutines", func(t *testing.T) *engine.Engine { return redisEngine(t, engine.Durable) },
			server.Options{EventLoop: true, ConnGoroutines: true}, "goroutine"},
		{"redis async", func(t *testing.T) *engine.Engine { return redisEngine(t, engine.Async) }, server.Options{}, "epoll"},
		{"bolt durable", func(t *testing.T) *engine.Engine { return MustEngine(t) }, server.Options{}, "epoll"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := MustServe(t, tc.eng(t), tc.opts)
			info, err := MustClient(t, addr, 2, "").Info(ctx, "server").Result()
			if err != nil {
				t.Fatal(err)
			}
			if want := "multiplexing_api:" + tc.want; !strings.Contains(info, want+"\r\n") {
				t.Errorf("INFO server does not say %q:\n%s", want, info)
			}
		})
	}
}
