package redis_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/shard"
	"github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/storetest"
)

var errCrash = errors.New("injected crash")

// TestReshardCrash stops a reshard after each of its steps, as if the
// process had died there, then lets other processes recover it: the value
// must be exact, the shards laid out as the completed reshard lays them,
// and request ids still deduplicated.
func TestReshardCrash(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		for _, c := range []struct{ from, to int }{{8, 3}, {3, 8}, {5, 1}, {2, 7}} {
			for _, stop := range []string{"intent", "fence", "init", "fold#1", "fold#2", "commit"} {
				grow := c.to > c.from
				if grow && (stop == "fold#1" || stop == "fold#2") || !grow && stop == "init" {
					continue // no such step in this direction
				}
				if stop == "fold#2" && min(c.to, c.from-c.to) < 2 {
					continue // one shard takes the folds: one fold
				}
				t.Run(fmt.Sprintf("%dto%d/%s", c.from, c.to, stop), func(t *testing.T) {
					testReshardCrash(t, dsn, c.from, c.to, stop)
				})
			}
		}
	})
}

func testReshardCrash(t *testing.T, dsn string, from, to int, stop string) {
	ctx := context.Background()
	id := t.Name() + runID()
	crashing := MustOpen(t, dsn)
	storetest.MustCreate(t, crashing, id, from)
	var total int64
	want := make([]int64, max(from, to))
	for i := range from {
		v := int64(100 * (i + 1))
		if err := crashing.Add(ctx, id, v, uint64(i)); err != nil {
			t.Fatal(err)
		}
		want[i%to] += v
		total += v
	}
	rid := "rid-1"
	out, err := crashing.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 7, Pick: shard.PickFor(id, rid), RequestID: rid}})
	if err != nil || out[0].Err != nil {
		t.Fatal(err, out)
	}
	want[shard.Of(shard.PickFor(id, rid), from)%to] += 7
	total += 7

	seen := map[string]int{}
	redis.SetStepHook(crashing, func(step string) error {
		seen[step]++
		if fmt.Sprintf("%s#%d", step, seen[step]) == stop || step == stop {
			return errCrash
		}
		return nil
	})
	if _, err := crashing.ReshardCounter(ctx, id, to); !errors.Is(err, errCrash) {
		t.Fatalf("ReshardCounter = %v, want the injected crash", err)
	}

	// Other processes recover it, some by writing, one by reading.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := range 4 {
		wg.Go(func() {
			s := MustOpen(t, dsn)
			if w == 0 {
				if _, err := s.ReadCounter(ctx, id); err != nil {
					t.Errorf("ReadCounter while recovering: %v", err)
				}
				return
			}
			for i := range 5 {
				if err := s.Add(ctx, id, 1, uint64(w*10+i)); err != nil {
					t.Errorf("Add while recovering: %v", err)
					return
				}
				mu.Lock()
				total++
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	fresh := MustOpen(t, dsn)
	c, err := fresh.GetCounter(ctx, id)
	if err != nil || c.Shards != to {
		t.Fatalf("GetCounter after recovery = %+v, %v; want %d shards", c, err, to)
	}
	if got := storetest.MustRead(t, fresh, id); got != total {
		t.Fatalf("value after recovery = %d, want %d", got, total)
	}
	// The crashed process's own store, with its stale cache, agrees.
	if got := storetest.MustRead(t, crashing, id); got != total {
		t.Fatalf("value read by the crashed store = %d, want %d", got, total)
	}
	shards := storetest.MustShards(t, fresh, id)
	var writes int64
	for i := range to {
		writes += shards[i] - want[i]
	}
	if writes != 15 {
		t.Fatalf("shards after recovery = %v; want %v plus the 15 recovery writes", shards, want[:to])
	}
	out, err = fresh.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 7, Pick: shard.PickFor(id, rid), RequestID: rid}})
	if err != nil || out[0].Err != nil || !out[0].Duplicate {
		t.Fatalf("retry of %s after the recovered reshard: %v %+v, want duplicate", rid, err, out)
	}
}

// TestReshardProcesses reshards a counter from one process while two
// others write to it with their own cached layouts.
func TestReshardProcesses(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		id := t.Name() + runID()
		admin := MustOpen(t, dsn)
		storetest.MustCreate(t, admin, id, 4)
		writers := []*redis.CounterStore{MustOpen(t, dsn), MustOpen(t, dsn)}
		var sum [2]int64
		var wg sync.WaitGroup
		for w, s := range writers {
			wg.Go(func() {
				for i := range 300 {
					d := int64(i%7 + 1)
					if err := s.Add(ctx, id, d, uint64(i*31+w)); err != nil {
						t.Errorf("Add: %v", err)
						return
					}
					sum[w] += d
				}
			})
		}
		for _, n := range []int{9, 2, 16, 1, 5, 3} {
			if _, err := admin.ReshardCounter(ctx, id, n); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		if got, want := storetest.MustRead(t, admin, id), sum[0]+sum[1]; got != want {
			t.Fatalf("value = %d, want %d", got, want)
		}
	})
}

// pauseAt returns a reshard hook that, the first time it meets the named
// step, tells reached and waits for release before the reshard goes on.
func pauseAt(step string, reached, release chan struct{}) func(string) error {
	var once sync.Once
	return func(s string) error {
		if s == step {
			once.Do(func() {
				close(reached)
				<-release
			})
		}
		return nil
	}
}

// TestReshardLateCleanup lets the process that committed a shrink delay its
// last step until the counter has grown again and taken writes on the
// shards that the shrink removed: those shards are live again and must
// keep their writes.
func TestReshardLateCleanup(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		id := t.Name() + runID()
		slow, other := MustOpen(t, dsn), MustOpen(t, dsn)
		storetest.MustCreate(t, other, id, 8)
		var total int64
		add := func(s *redis.CounterStore, v int64, pick uint64) {
			t.Helper()
			if err := s.Add(ctx, id, v, pick); err != nil {
				t.Fatal(err)
			}
			total += v
		}
		for i := range 8 {
			add(other, int64(10*(i+1)), uint64(i))
		}

		reached, release := make(chan struct{}), make(chan struct{})
		redis.SetStepHook(slow, pauseAt("commit", reached, release))
		shrunk := make(chan error, 1)
		go func() { _, err := slow.ReshardCounter(ctx, id, 2); shrunk <- err }()
		<-reached // committed at 2 shards, the removed shards not yet cleaned up

		if _, err := other.ReshardCounter(ctx, id, 8); err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			add(other, -int64(1000*(i+1)), uint64(i)) // shards 2..7 take writes again
		}
		close(release)
		if err := <-shrunk; err != nil {
			t.Fatalf("ReshardCounter(2) after its pause: %v", err)
		}

		fresh := MustOpen(t, dsn)
		if got := storetest.MustRead(t, fresh, id); got != total {
			t.Fatalf("value = %d, want %d", got, total)
		}
		if err := fresh.Add(ctx, id, 1, 7); err != nil {
			t.Fatalf("Add after the late clean-up: %v", err)
		}
		if got := storetest.MustRead(t, fresh, id); got != total+1 {
			t.Fatalf("value after one more write = %d, want %d", got, total+1)
		}
	})
}

// TestReshardLateInit lets a helper of a grow stall before it creates the
// new shards until the grow is committed by another process and undone by
// a shrink. Its late create step must not bring a removed shard back at
// the grow's epoch, where a writer still holding the grown layout would
// write to it and the write would be acknowledged but lost.
func TestReshardLateInit(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		id := t.Name() + runID()
		late, other, writer := MustOpen(t, dsn), MustOpen(t, dsn), MustOpen(t, dsn)
		storetest.MustCreate(t, other, id, 2)

		reached, release := make(chan struct{}), make(chan struct{})
		initDone := make(chan struct{})
		redis.SetStepHook(late, func(step string) error {
			switch step {
			case "fence":
				close(reached)
				<-release
			case "init":
				close(initDone)
				return errCrash // stop here, as if the process died
			}
			return nil
		})
		grown := make(chan error, 1)
		go func() { _, err := late.ReshardCounter(ctx, id, 8); grown <- err }()
		<-reached // intent recorded and shards fenced, new shards not yet created

		if c, err := other.GetCounter(ctx, id); err != nil || c.Shards != 8 {
			t.Fatalf("GetCounter finishing the grow = %+v, %v; want 8 shards", c, err)
		}
		var total int64
		if err := writer.Add(ctx, id, 5, 5); err != nil { // caches the 8-shard layout
			t.Fatal(err)
		}
		total += 5
		if _, err := other.ReshardCounter(ctx, id, 2); err != nil {
			t.Fatal(err)
		}
		close(release)
		<-initDone
		if err := <-grown; !errors.Is(err, errCrash) {
			t.Fatalf("late ReshardCounter = %v, want the injected crash", err)
		}

		// The writer still holds the 8-shard layout: its write must be
		// refused by shard 5 and go to shard 5 mod 2 of the current layout.
		if err := writer.Add(ctx, id, 100, 5); err != nil {
			t.Fatal(err)
		}
		total += 100
		if got := storetest.MustRead(t, MustOpen(t, dsn), id); got != total {
			t.Fatalf("value = %d, want %d (the write with the stale layout was lost)", got, total)
		}
	})
}

// TestReshardOverflowStaysWithCaller records the intent of a shrink whose
// fold would leave the int64 range and stops its process there. Readers
// and writers that meet the intent finish it (the counter keeps its
// shards) and go on as if nothing happened: the out_of_range is the
// reshard's own, for its caller alone.
func TestReshardOverflowStaysWithCaller(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		id := t.Name() + runID()
		resharder := MustOpen(t, dsn)
		storetest.MustCreate(t, resharder, id, 3)
		// Shard 2 folds into shard 0, which is already at MaxInt64.
		for i, v := range []int64{math.MaxInt64, -10, 5} {
			if err := resharder.Add(ctx, id, v, uint64(i)); err != nil {
				t.Fatal(err)
			}
		}
		redis.SetStepHook(resharder, func(step string) error {
			if step == "intent" {
				return errCrash
			}
			return nil
		})
		if _, err := resharder.ReshardCounter(ctx, id, 2); !errors.Is(err, errCrash) {
			t.Fatalf("ReshardCounter = %v, want the injected crash", err)
		}

		want := int64(math.MaxInt64 - 5)
		if r, err := MustOpen(t, dsn).ReadCounter(ctx, id); err != nil || r.Value != want {
			t.Fatalf("a reader that met the intent: %+v, %v; want %d", r, err, want)
		}
		if err := MustOpen(t, dsn).Add(ctx, id, -1, 1); err != nil {
			t.Fatalf("a writer that met the intent: %v", err)
		}
		want--
		if c, err := MustOpen(t, dsn).GetCounter(ctx, id); err != nil || c.Shards != 3 {
			t.Fatalf("GetCounter = %+v, %v; want 3 shards", c, err)
		}
		redis.SetStepHook(resharder, nil)
		if _, err := resharder.ReshardCounter(ctx, id, 2); !errors.Is(err, shardcounter.ErrOutOfRange) {
			t.Fatalf("the caller's own ReshardCounter = %v, want ErrOutOfRange", err)
		}
		if got := storetest.MustRead(t, resharder, id); got != want {
			t.Fatalf("value = %d, want %d", got, want)
		}
	})
}

// TestReshardLateInitAfterDelete lets a helper of a grow stall before it
// creates the new shards until the grow is committed by another process
// and the counter deleted. Its late create step must not bring a shard
// key of the deleted counter back, where a writer still holding the grown
// layout would have a write acknowledged and lost.
func TestReshardLateInitAfterDelete(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		id := t.Name() + runID()
		late, other, writer := MustOpen(t, dsn), MustOpen(t, dsn), MustOpen(t, dsn)
		storetest.MustCreate(t, other, id, 2)

		reached, release := make(chan struct{}), make(chan struct{})
		redis.SetStepHook(late, pauseAt("fence", reached, release))
		grown := make(chan error, 1)
		go func() { _, err := late.ReshardCounter(ctx, id, 8); grown <- err }()
		<-reached // intent recorded and shards fenced, new shards not yet created

		if c, err := other.GetCounter(ctx, id); err != nil || c.Shards != 8 {
			t.Fatalf("GetCounter finishing the grow = %+v, %v; want 8 shards", c, err)
		}
		if err := writer.Add(ctx, id, 5, 5); err != nil { // caches the 8-shard layout
			t.Fatal(err)
		}
		key := redis.ShardKey(t, other, id, 5)
		if err := other.DeleteCounter(ctx, id); err != nil {
			t.Fatal(err)
		}
		close(release)
		<-grown // whatever it says: the counter is gone

		if n, err := redis.Client(other).Exists(ctx, key).Result(); err != nil || n != 0 {
			t.Fatalf("EXISTS %s after the late create step = %d, %v; want 0", key, n, err)
		}
		if err := writer.Add(ctx, id, 100, 5); !errors.Is(err, shardcounter.ErrNotFound) {
			t.Fatalf("Add with the layout of the deleted counter = %v, want ErrNotFound", err)
		}
	})
}

// TestReshardCrashDistinct stops a reshard of a distinct counter, whose
// members must move to their new shards, after each of its steps, then
// lets other processes add and remove members while they recover it:
// every member must be where its last write left it, counted once.
func TestReshardCrashDistinct(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		for _, c := range []struct{ from, to int }{{5, 3}, {2, 7}} {
			for _, stop := range []string{"intent", "fence", "init", "copy", "move", "commit"} {
				if stop == "init" && c.to < c.from {
					continue
				}
				t.Run(fmt.Sprintf("%dto%d/%s", c.from, c.to, stop), func(t *testing.T) {
					ctx := context.Background()
					id := t.Name() + runID()
					crashing := MustOpen(t, dsn)
					if _, err := crashing.CreateCounter(ctx, id, shardcounter.Spec{Shards: c.from, Kind: shardcounter.KindDistinct}); err != nil {
						t.Fatal(err)
					}
					want := map[string]bool{}
					var incs []shardcounter.Increment
					for i := range 60 {
						m := fmt.Sprintf("m%02d", i)
						incs = append(incs, shardcounter.Increment{Counter: id, Member: m, Delta: 1})
						want[m] = true
					}
					if _, err := crashing.Apply(ctx, incs); err != nil {
						t.Fatal(err)
					}
					redis.SetStepHook(crashing, func(step string) error {
						if step == stop {
							return errCrash
						}
						return nil
					})
					if _, err := crashing.ReshardCounter(ctx, id, c.to); !errors.Is(err, errCrash) {
						t.Fatalf("ReshardCounter = %v, want the injected crash", err)
					}
					var mu sync.Mutex
					var wg sync.WaitGroup
					for w := range 3 {
						wg.Go(func() {
							s := MustOpen(t, dsn)
							for i := range 10 {
								m := fmt.Sprintf("m%02d", w*20+i)
								add := i%2 == 0
								inc := shardcounter.Increment{Counter: id, Member: m, Delta: -1}
								if add {
									inc.Delta = 1
								}
								if out, err := s.Apply(ctx, []shardcounter.Increment{inc}); err != nil || out[0].Err != nil {
									t.Errorf("member write while recovering: %v %+v", err, out)
									return
								}
								mu.Lock()
								want[m] = add
								mu.Unlock()
							}
						})
					}
					wg.Wait()
					var members []string
					for m, in := range want {
						if in {
							members = append(members, m)
						}
					}
					fresh := MustOpen(t, dsn)
					if got, err := fresh.GetCounter(ctx, id); err != nil || got.Shards != c.to {
						t.Fatalf("GetCounter = %+v, %v; want %d shards", got, err, c.to)
					}
					storetest.CheckMembers(t, fresh, id, members)
				})
			}
		}
	})
}
