package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// createOnApply wraps a real store as a store that does not create
// counters on write (it drops Increment.Create), counting the
// CreateCounter calls the engine then makes, and failing them on demand.
type createOnApply struct {
	shardcounter.CounterStore
	creates atomic.Int64
	fail    atomic.Pointer[shardcounter.Error]
}

func (s *createOnApply) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	stripped := make([]shardcounter.Increment, len(incs))
	for i, inc := range incs {
		inc.Create = nil
		stripped[i] = inc
	}
	return s.CounterStore.Apply(ctx, stripped)
}

func (s *createOnApply) CreateCounter(ctx context.Context, id string, spec shardcounter.Spec) (*shardcounter.Counter, error) {
	s.creates.Add(1)
	if err := s.fail.Load(); err != nil {
		return nil, err
	}
	return s.CounterStore.CreateCounter(ctx, id, spec)
}

// TestAutoCreateOncePerFlush queues many writes with request ids, and
// folded ones of both signs, to one missing counter into one flush, on a
// store that does not create on write: the engine creates the counter
// once, not once per write, and when that fails every write gets the
// error once (Stats count each write once).
func TestAutoCreateOncePerFlush(t *testing.T) {
	const n = 40
	write := func(i int) shardcounter.Write {
		w := shardcounter.Write{Counter: "new", Delta: 1}
		switch i % 4 {
		case 0, 1:
			w.RequestID = fmt.Sprint(i)
		case 2:
			w.Delta = -1
		}
		return w
	}
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail=%v", fail), func(t *testing.T) {
			store := MustOpenStore(t)
			s := &createOnApply{CounterStore: store}
			if fail {
				s.fail.Store(&shardcounter.Error{Code: shardcounter.EUNAVAILABLE, Message: "injected: create refused"})
			}
			g := newGate(s, 10)
			e := MustNew(t, g, engine.Config{DefaultShards: 3})
			g.releaseOnCleanup(t)
			first := startHeld(t, g, e, shardcounter.Write{Counter: "other", Delta: 1})
			results, errs, wait := queueWrites(t, e, n, write)
			close(g.hold)
			<-first
			wait()
			defer func() {
				if creates := s.creates.Load(); creates > 2 { // "other", then "new"
					t.Errorf("%d CreateCounter calls for 2 counters, want at most 2", creates)
				}
			}()
			st := e.Stats()
			for i := range n {
				switch {
				case fail && (errs[i] == nil || shardcounter.ErrorCode(errs[i]) != shardcounter.EUNAVAILABLE):
					t.Fatalf("write %d = %+v, %v; want the create's unavailable", i, results[i], errs[i])
				case !fail && (errs[i] != nil || !results[i].Applied):
					t.Fatalf("write %d = %+v, %v; want applied", i, results[i], errs[i])
				}
			}
			if fail {
				if got := st.Errors.Load(); got != n+1 {
					t.Fatalf("Stats.Errors = %d, want %d: each failed write counted once", got, n+1)
				}
				return
			}
			if got := st.Writes.Load(); got != n+1 || st.Errors.Load() != 0 {
				t.Fatalf("Stats: writes %d errors %d, want %d, 0", got, st.Errors.Load(), n+1)
			}
			if got, want := read(t, e, "new"), int64(n-2*(n/4)); got != want {
				t.Fatalf("new = %d, want %d", got, want)
			}
			c, err := store.GetCounter(context.Background(), "new")
			if err != nil || c.Shards != 3 || c.Kind != shardcounter.KindSum {
				t.Fatalf("created counter %+v, %v; want a sum counter of 3 shards", c, err)
			}
		})
	}
}

// slowStore wraps a real store that does not create on write, and makes
// Apply and CreateCounter each take 60ms of bubble time, or less when
// their context ends first. Make it inside the bubble.
type slowStore struct{ createOnApply }

func (s *slowStore) pause(ctx context.Context) error {
	select {
	case <-time.After(60 * time.Millisecond):
		return nil
	case <-ctx.Done():
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "injected: no answer: %v", ctx.Err())
	}
}

func (s *slowStore) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	if err := s.pause(ctx); err != nil {
		return nil, err
	}
	return s.createOnApply.Apply(ctx, incs)
}

func (s *slowStore) CreateCounter(ctx context.Context, id string, spec shardcounter.Spec) (*shardcounter.Counter, error) {
	if err := s.pause(ctx); err != nil {
		return nil, err
	}
	return s.createOnApply.CreateCounter(ctx, id, spec)
}

// TestFlushTimeoutBoundsWholeFlush checks that FlushTimeout bounds a whole
// flush, retries included, not each store call: a first write that needs
// an Apply, a CreateCounter and a second Apply of 60ms each is answered
// within the 100ms bound, with the store's unavailable.
func TestFlushTimeoutBoundsWholeFlush(t *testing.T) {
	store := MustOpenStore(t)
	synctest.Test(t, func(t *testing.T) {
		s := &slowStore{createOnApply{CounterStore: store}}
		e := MustStart(t, s, engine.Config{FlushTimeout: 100 * time.Millisecond})
		defer e.Close(context.Background())
		start := time.Now()
		_, err := e.WriteCounter(context.Background(), shardcounter.Write{Counter: "new", Delta: 1})
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Fatalf("write answered after %v, past the 100ms flush bound (error %v)", took, err)
		}
		if shardcounter.ErrorCode(err) != shardcounter.EUNAVAILABLE {
			t.Fatalf("write = %v, want the store's unavailable", err)
		}
	})
}

// countingCreates wraps a real store and counts CreateCounter calls.
type countingCreates struct {
	shardcounter.CounterStore
	creates atomic.Int64
}

func (s *countingCreates) CreateCounter(ctx context.Context, id string, spec shardcounter.Spec) (*shardcounter.Counter, error) {
	s.creates.Add(1)
	return s.CounterStore.CreateCounter(ctx, id, spec)
}

// TestAutoCreateInTheCommit checks that first writes to new counters, on a
// store that creates on write, create them in the batch's own commit
// with no CreateCounter call: a sum counter for delta writes, a distinct
// one for member writes, with the default shard count.
func TestAutoCreateInTheCommit(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, store shardcounter.CounterStore) {
		counting := &countingCreates{CounterStore: store}
		e := MustNew(t, counting, engine.Config{DefaultShards: 5})
		ctx := context.Background()
		var ws []shardcounter.Write
		for i := range 20 {
			ws = append(ws, shardcounter.Write{Counter: "views", Delta: 1, RequestID: fmt.Sprint(i)}, shardcounter.AddMember("likes", fmt.Sprint("u", i%10)))
		}
		res, err := e.WriteBatch(ctx, ws)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if !r.Applied {
				t.Fatalf("write %d = %+v, want applied", i, r)
			}
		}
		if got := counting.creates.Load(); got != 0 {
			t.Fatalf("%d CreateCounter calls, want 0: the store creates on write", got)
		}
		for id, want := range map[string]shardcounter.Kind{"views": shardcounter.KindSum, "likes": shardcounter.KindDistinct} {
			c, err := e.GetCounter(ctx, id)
			if err != nil || c.Kind != want || c.Shards != 5 {
				t.Fatalf("GetCounter(%s) = %+v, %v; want a %s counter of 5 shards", id, c, err, want)
			}
		}
		if read(t, e, "views") != 20 || read(t, e, "likes") != 10 {
			t.Fatalf("views, likes = %d, %d; want 20, 10", read(t, e, "views"), read(t, e, "likes"))
		}
	})
}

// TestAutoCreateMarker writes a new hash's marker joined to its first
// field, as the RESP front end does: the field is a counter of the
// default shards, the marker one of a single shard (it is only looked
// for), both made by the writes, on a store that creates on write and on
// one that leaves creating to the engine.
func TestAutoCreateMarker(t *testing.T) {
	ctx := context.Background()
	for _, onApply := range []bool{true, false} {
		t.Run(fmt.Sprintf("createOnWrite=%v", onApply), func(t *testing.T) {
			var store shardcounter.CounterStore = MustOpenStore(t)
			if !onApply {
				store = &createOnApply{CounterStore: store}
			}
			eng, err := engine.New(store, engine.Config{DefaultShards: 8})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { eng.Close(ctx) })
			marker, field := shardcounter.HashMarkerID("post:1"), shardcounter.HashFieldID("post:1", "likes")
			res, err := eng.WriteBatch(ctx, []shardcounter.Write{
				{Counter: marker, Delta: 1, JoinNext: true},
				{Counter: field, Delta: 1},
			})
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.Error != nil || !r.Applied {
					t.Errorf("write %d: %+v", i, r)
				}
			}
			for id, shards := range map[string]int{marker: 1, field: 8} {
				if c, err := eng.GetCounter(ctx, id); err != nil || c.Shards != shards || c.Kind != shardcounter.KindSum {
					t.Errorf("%q: %+v, %v; want a sum counter of %d shards", id, c, err, shards)
				}
			}
		})
	}
}
