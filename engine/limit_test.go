package engine_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// TestLimits runs a fixed window through the engine on the model and on
// PostgreSQL: takes up to the quota, a refusal with its retry after, a
// retried request id answered with its first decision and charged once,
// peeks that change nothing, a reset, a redefinition that starts every
// key afresh, listing and deletion.
func TestLimits(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: time.Unix(1_800_000_000, 0)} // a window's start
	eachStore(t, clk.Now, func(t *testing.T, store shardcounter.CounterStore) {
		clk.set(time.Unix(1_800_000_000, 0))
		e := MustNew(t, store, engine.Config{Now: clk.Now})
		p, _ := shardcounter.ParseLimitPolicy("fixed 3/10s")
		l, created, err := e.CreateLimit(ctx, "api", p)
		if err != nil || !created || l.LimitPolicy != p {
			t.Fatalf("CreateLimit = %+v, %v, %v", l, created, err)
		}
		if _, created, err := e.CreateLimit(ctx, "api", p); err != nil || created {
			t.Fatalf("CreateLimit again = %v, %v; want not created", created, err)
		}
		take := func(key string, cost int64, rid string) shardcounter.LimitResult {
			t.Helper()
			r, err := e.Take(ctx, "api", key, cost, rid)
			if err != nil {
				t.Fatalf("Take(%s, %d, %q): %v", key, cost, rid, err)
			}
			return *r
		}
		if r := take("u1", 2, "a"); !r.Allowed || r.Remaining != 1 || r.ResetAfterMS != 10000 {
			t.Errorf("first take = %+v", r)
		}
		if r := take("u1", 2, "a"); !r.Duplicate || !r.Allowed || r.Remaining != 1 {
			t.Errorf("retried take = %+v; want the first decision, charged once", r)
		}
		if r, err := e.Peek(ctx, "api", "u1", 1); err != nil || !r.Allowed || r.Remaining != 1 {
			t.Errorf("Peek = %+v, %v", r, err)
		}
		if r := take("u1", 2, "b"); r.Allowed || r.RetryAfterMS != 10000 {
			t.Errorf("take past the quota = %+v; want refused, retry after 10s", r)
		}
		clk.advance(10 * time.Second)
		if r := take("u1", 2, "b"); !r.Duplicate || r.Allowed {
			t.Errorf("retry of a refused take in the next window = %+v; want its first decision, refused", r)
		}
		if r := take("u1", 3, ""); !r.Allowed || r.Remaining != 0 {
			t.Errorf("take in the next window = %+v", r)
		}
		if err := e.ResetLimitKey(ctx, "api", "u1"); err != nil {
			t.Fatal(err)
		}
		if r := take("u1", 3, ""); !r.Allowed {
			t.Errorf("take after a reset = %+v", r)
		}
		q, _ := shardcounter.ParseLimitPolicy("gcra 1/1s burst 5")
		if _, created, err := e.CreateLimit(ctx, "api", q); err != nil || !created {
			t.Fatalf("redefining = %v, %v", created, err)
		}
		if r := take("u1", 5, ""); !r.Allowed || r.Remaining != 0 {
			t.Errorf("take after a redefinition = %+v; want a fresh bucket", r)
		}
		ls, err := e.ListLimits(ctx)
		if err != nil || len(ls) != 1 || ls[0].Name != "api" || ls[0].LimitPolicy != q {
			t.Errorf("ListLimits = %+v, %v", ls, err)
		}
		if err := e.DeleteLimit(ctx, "api"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Take(ctx, "api", "u1", 1, ""); !errors.Is(err, shardcounter.ErrNotFound) {
			t.Errorf("Take of a deleted limit: %v; want not_found", err)
		}
		if err := e.DeleteLimit(ctx, "api"); !errors.Is(err, shardcounter.ErrNotFound) {
			t.Errorf("DeleteLimit again: %v; want not_found", err)
		}
		cs, _, err := store.ReadShards(ctx, shardcounter.LimitKeyID("api", q, "u1"))
		if !errors.Is(err, shardcounter.ErrNotFound) {
			t.Errorf("a deleted limit's key state: %v, %v; want none", cs, err)
		}
	})
}

// TestLimitInvalid: what a take or a definition cannot use is
// invalid_argument, and changes nothing.
func TestLimitInvalid(t *testing.T) {
	ctx := context.Background()
	e := MustNew(t, MustOpenStore(t), engine.Config{})
	for _, p := range []shardcounter.LimitPolicy{
		{Kind: "leaky", Limit: 1, Period: shardcounter.Duration(time.Second)},
		{Kind: shardcounter.LimitFixed, Limit: 1, Period: shardcounter.Duration(500 * time.Millisecond)},
		{Kind: shardcounter.LimitFixed, Limit: 0, Period: shardcounter.Duration(time.Second)},
	} {
		if _, _, err := e.CreateLimit(ctx, "x", p); !errors.Is(err, shardcounter.ErrInvalid) {
			t.Errorf("CreateLimit(%+v): %v; want invalid_argument", p, err)
		}
	}
	if ls, err := e.ListLimits(ctx); err != nil || len(ls) != 0 {
		t.Errorf("ListLimits after refusals = %v, %v", ls, err)
	}
	p, _ := shardcounter.ParseLimitPolicy("fixed 3/10s")
	if _, _, err := e.CreateLimit(ctx, "x", p); err != nil {
		t.Fatal(err)
	}
	for _, cost := range []int64{0, -1} {
		if _, err := e.Take(ctx, "x", "k", cost, ""); !errors.Is(err, shardcounter.ErrInvalid) {
			t.Errorf("Take of cost %d: %v; want invalid_argument", cost, err)
		}
	}
	if _, err := e.Take(ctx, "x", "bad\x00key", 1, ""); !errors.Is(err, shardcounter.ErrInvalid) {
		t.Errorf("Take of a bad key: %v; want invalid_argument", err)
	}
	if r, err := e.Peek(ctx, "x", "k", 3); err != nil || !r.Allowed || r.Remaining != 3 {
		t.Errorf("Peek after refused takes = %+v, %v; want the whole quota", r, err)
	}
}

// TestLimitConcurrentTakes: many clients taking from one key at once
// are admitted exactly up to the quota, in group commits.
func TestLimitConcurrentTakes(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	eachStore(t, clk.Now, func(t *testing.T, store shardcounter.CounterStore) {
		e := MustNew(t, store, engine.Config{Now: clk.Now})
		p, _ := shardcounter.ParseLimitPolicy("fixed 100/1m")
		if _, _, err := e.CreateLimit(ctx, "hot", p); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		allowed := 0
		var wg sync.WaitGroup
		for c := range 16 {
			wg.Go(func() {
				for range 10 {
					r, err := e.Take(ctx, "hot", "tenant", 1, "")
					if err != nil {
						t.Errorf("client %d: %v", c, err)
						return
					}
					if r.Allowed {
						mu.Lock()
						allowed++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if allowed != 100 {
			t.Errorf("%d takes of 160 allowed; want exactly the quota, 100", allowed)
		}
	})
}

// listGate counts the store's lists of one prefix and holds each until
// release is closed.
type listGate struct {
	shardcounter.CounterStore
	prefix  string
	lists   atomic.Int64
	release chan struct{}
}

func (g *listGate) ListCounters(ctx context.Context, prefix, after string, limit int) ([]*shardcounter.Counter, error) {
	if prefix == g.prefix {
		g.lists.Add(1)
		<-g.release
	}
	return g.CounterStore.ListCounters(ctx, prefix, after, limit)
}

// TestLimitDefinitionReadShared: takes of a limit whose definition this
// server has not read (or read over a second ago) wait for one read of it,
// not one each, however many arrive while it runs.
func TestLimitDefinitionReadShared(t *testing.T) {
	ctx := context.Background()
	store := MustOpenStore(t)
	p, _ := shardcounter.ParseLimitPolicy("fixed 1000/1m")
	if _, _, err := MustNew(t, store, engine.Config{}).CreateLimit(ctx, "hot", p); err != nil {
		t.Fatal(err)
	}
	g := &listGate{CounterStore: store, prefix: shardcounter.LimitDefinitionPrefix("hot"), release: make(chan struct{})}
	e := MustNew(t, g, engine.Config{}) // another server: its cache is empty
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Go(func() {
			if _, err := e.Take(ctx, "hot", "tenant", 1, ""); err != nil {
				errs <- err
			}
		})
	}
	for g.lists.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the others arrive while the read is held
	close(g.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := g.lists.Load(); n != 1 {
		t.Fatalf("64 takes read the definition %d times, want once", n)
	}
}
