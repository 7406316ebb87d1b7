package redis_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestScriptFailsPartWay makes the write script fail after it applied the
// first item of its group: Redis does not roll a script back, so an error
// that arrives after the script ran may follow applied writes. Every item
// that got an error must say its outcome is unknown, or not be counted.
func TestScriptFailsPartWay(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := MustOpen(t, dsn)
		id := t.Name() + runID()
		storetest.MustCreate(t, s, id, 1)
		// The request-id set of shard 0 is not a sorted set: the second
		// item's duplicate check fails with WRONGTYPE.
		if err := redis.Client(s).Set(ctx, redis.ShardKey(t, s, id, 0)+":ids", "not a sorted set", 0).Err(); err != nil {
			t.Fatal(err)
		}
		incs := []shardcounter.Increment{{Counter: id, Delta: 5}, {Counter: id, Delta: 7, RequestID: "r"}}
		out, err := s.Apply(ctx, incs)
		got := storetest.MustRead(t, s, id)
		if err != nil {
			if !shardcounter.IsOutcomeUnknown(err) && got != 0 {
				t.Fatalf("Apply = %v, not outcome unknown, but the value is %d", err, got)
			}
			return
		}
		var counted int64
		for i, o := range out {
			if o.Err == nil {
				counted += incs[i].Delta
			} else if shardcounter.IsOutcomeUnknown(o.Err) {
				return // the caller knows to look
			}
		}
		if got != counted {
			t.Fatalf("outcomes %+v claim %d applied, value is %d", out, counted, got)
		}
	})
}

// TestTotalOutOfRange checks the rule every store keeps: a write that
// would take the counter's total (not just its shard) outside the int64
// range is refused and changes nothing, while one that keeps the total in
// range is applied however the value is spread over the shards.
func TestTotalOutOfRange(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := MustOpen(t, dsn)
		id := t.Name() + runID()
		storetest.MustCreate(t, s, id, 2)
		if err := s.Add(ctx, id, math.MaxInt64, 0); err != nil {
			t.Fatalf("Add(MaxInt64) to shard 0: %v", err)
		}
		if err := s.Add(ctx, id, 1, 1); !errors.Is(err, shardcounter.ErrOutOfRange) {
			t.Fatalf("Add(1) to shard 1 of a counter at MaxInt64: %v, want ErrOutOfRange", err)
		}
		out, err := s.Apply(ctx, []shardcounter.Increment{
			{Counter: id, Delta: math.MaxInt64, Pick: 1, RequestID: "big"},
			{Counter: id, Delta: -3, Pick: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(out[0].Err, shardcounter.ErrOutOfRange) || out[1].Err != nil {
			t.Fatalf("Apply = %+v, want [out of range, applied]", out)
		}
		if got := storetest.MustRead(t, s, id); got != math.MaxInt64-3 {
			t.Fatalf("value = %d, want MaxInt64-3", got)
		}
		// The refused item's request id was not recorded: now it fits.
		if err := s.Add(ctx, id, -math.MaxInt64+10, 0); err != nil {
			t.Fatal(err)
		}
		// Shards 10 and -3: this fits on either (a request id picks the shard).
		out, err = s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: math.MaxInt64 - 20, Pick: 1, RequestID: "big"}})
		if err != nil || out[0].Err != nil || out[0].Duplicate {
			t.Fatalf("retry once it fits: %+v, %v; want applied", out, err)
		}
		if got := storetest.MustRead(t, s, id); got != math.MaxInt64-13 {
			t.Fatalf("value = %d, want MaxInt64-13", got)
		}
		// The other end of the range, on a shard of its own.
		if err := s.Add(ctx, id, math.MinInt64, 0); err != nil {
			t.Fatalf("Add(MinInt64): %v", err)
		}
		if err := s.Add(ctx, id, -1, 1); err != nil {
			t.Fatalf("Add(-1) to a total of -14: %v", err)
		}
		if err := s.Add(ctx, id, math.MinInt64, 1); !errors.Is(err, shardcounter.ErrOutOfRange) {
			t.Fatalf("Add(MinInt64) to a total of -15: %v, want ErrOutOfRange", err)
		}
		if got := storetest.MustRead(t, s, id); got != -15 {
			t.Fatalf("value = %d, want -15", got)
		}
	})
}

// TestTotalOutOfRangeConcurrent races 16 writers of MaxInt64/8 on four
// shards: exactly 8 fit, whatever the interleaving.
func TestTotalOutOfRangeConcurrent(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		id := t.Name() + runID()
		storetest.MustCreate(t, MustOpen(t, dsn), id, 4)
		var applied, refused atomic.Int64
		var wg sync.WaitGroup
		for w := range 16 {
			s := MustOpen(t, dsn)
			wg.Go(func() {
				switch err := s.Add(ctx, id, math.MaxInt64/8, uint64(w)); {
				case err == nil:
					applied.Add(1)
				case errors.Is(err, shardcounter.ErrOutOfRange):
					refused.Add(1)
				default:
					t.Errorf("Add: %v", err)
				}
			})
		}
		wg.Wait()
		if applied.Load() != 8 || refused.Load() != 8 {
			t.Fatalf("%d applied, %d refused; want 8 and 8", applied.Load(), refused.Load())
		}
		if got := storetest.MustRead(t, MustOpen(t, dsn), id); got != 8*(math.MaxInt64/8) {
			t.Fatalf("value = %d, want %d", got, 8*(math.MaxInt64/8))
		}
	})
}

// TestCreateOnWrite checks Increment.Create on sum counters: the first
// write creates the counter with its spec and lands on its pick; later
// items of the batch see it; a Create on an existing counter is ignored;
// a retry of a creating write with a request id is a duplicate; and many
// first writes at once create one counter and all count.
func TestCreateOnWrite(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := MustOpen(t, dsn)
		id := t.Name() + runID()
		spec := shardcounter.Spec{Shards: 4}
		out, err := s.Apply(ctx, []shardcounter.Increment{
			{Counter: id, Delta: 5, Pick: 1, Create: &spec},
			{Counter: id, Delta: 2, Pick: 2},
			{Counter: id + "/missing", Delta: 1},
		})
		if err != nil || out[0].Err != nil || out[1].Err != nil || !errors.Is(out[2].Err, shardcounter.ErrNotFound) {
			t.Fatalf("Apply = %+v, %v; want applied, applied, not found", out, err)
		}
		if got, want := storetest.MustShards(t, MustOpen(t, dsn), id), []int64{0, 5, 2, 0}; !slices.Equal(got, want) {
			t.Fatalf("shards = %v, want %v", got, want)
		}
		other := shardcounter.Spec{Shards: 8}
		if out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 1, Create: &other}}); err != nil || out[0].Err != nil {
			t.Fatalf("Apply with Create to an existing counter: %+v, %v", out, err)
		}
		if c, err := s.GetCounter(ctx, id); err != nil || c.Shards != 4 {
			t.Fatalf("GetCounter = %+v, %v; want 4 shards", c, err)
		}
		rid := shardcounter.Increment{Counter: id + "/rid", Delta: 3, RequestID: "r", Create: &spec}
		for i, dup := range []bool{false, true} {
			out, err := MustOpen(t, dsn).Apply(ctx, []shardcounter.Increment{rid})
			if err != nil || out[0].Err != nil || out[0].Duplicate != dup {
				t.Fatalf("creating write with a request id, try %d: %+v, %v", i, out, err)
			}
		}
		if _, err := s.ListCounters(ctx, id, "", 10); err != nil {
			t.Fatal(err)
		}
		if cs, _ := s.ListCounters(ctx, id, "", 10); len(cs) != 2 {
			t.Fatalf("ListCounters = %d counters, want the 2 created on write", len(cs))
		}

		// 16 processes send first writes to one new counter at once.
		race := id + "/race"
		var wg sync.WaitGroup
		var applied atomic.Int64
		for w := range 16 {
			p := MustOpen(t, dsn)
			wg.Go(func() {
				for i := range 5 {
					out, err := p.Apply(ctx, []shardcounter.Increment{{Counter: race, Delta: 1, Pick: uint64(w*5 + i), Create: &spec}})
					if err != nil || out[0].Err != nil {
						t.Errorf("first writes: %+v, %v", out, err)
						return
					}
					applied.Add(1)
				}
			})
		}
		wg.Wait()
		if got := storetest.MustRead(t, MustOpen(t, dsn), race); got != applied.Load() || got != 80 {
			t.Fatalf("value = %d, %d applied; want 80", got, applied.Load())
		}
	})
}

// TestWriteRoundTrips checks the hot path's cost on one server: a batch
// of writes to counters whose layout the store has cached reads no
// metadata and runs one script.
func TestWriteRoundTrips(t *testing.T) {
	srv := MustStartServer(t)
	ctx := context.Background()
	s := MustOpen(t, serverDSN(srv))
	var batch []shardcounter.Increment
	for i := range 10 {
		id := fmt.Sprintf("%s%s/%d", t.Name(), runID(), i)
		batch = append(batch, shardcounter.Increment{Counter: id, Delta: 1, Pick: uint64(i), Create: &shardcounter.Spec{Shards: 4}})
	}
	if out, err := s.Apply(ctx, batch); err != nil || slices.ContainsFunc(out, func(o shardcounter.Outcome) bool { return o.Err != nil }) {
		t.Fatalf("first batch: %+v, %v", out, err)
	}
	before := commandCalls(t, srv.Addr)
	if out, err := s.Apply(ctx, batch); err != nil || slices.ContainsFunc(out, func(o shardcounter.Outcome) bool { return o.Err != nil }) {
		t.Fatalf("second batch: %+v, %v", out, err)
	}
	after := commandCalls(t, srv.Addr)
	// commandstats also counts the commands scripts run (hget, hincrby).
	for cmd, want := range map[string]int64{"evalsha": 1, "eval": 0, "hgetall": 0, "hmget": 0, "exec": 0, "script|load": 0} {
		if d := after[cmd] - before[cmd]; d != want {
			t.Errorf("the second batch ran %s %d times, want %d", cmd, d, want)
		}
	}
}

// commandCalls returns how often the server has run each command.
func commandCalls(tb testing.TB, addr string) map[string]int64 {
	tb.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	out := make(map[string]int64)
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if ok && strings.HasPrefix(line, "cmdstat_") {
			var n int64
			fmt.Sscanf(rest, "%d", &n)
			out[name] = n
		}
	}
	return out
}

// TestLuaLess checks the scripts' comparison of int64 values as text
// (bounded counters compare their total with their bounds that way, where
// Lua's doubles would round) against Go's, at the edges and at random.
func TestLuaLess(t *testing.T) {
	ctx := context.Background()
	c := redis.Client(MustOpen(t, serverDSN(sharedServer(t))))
	vals := []int64{0, 1, -1, 9, 10, -9, -10, 99, 100, math.MaxInt64, math.MaxInt64 - 1, math.MinInt64, math.MinInt64 + 1, 1 << 53, 1<<53 + 1, -(1 << 53) - 1}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		vals = append(vals, int64(rng.Uint64()), rng.Int64N(1000)-500)
	}
	for i, a := range vals {
		for _, b := range []int64{vals[(i+1)%len(vals)], vals[(i*7+3)%len(vals)], a, a + 1, a - 1} {
			got, err := redis.LessScript.Run(ctx, c, nil, strconv.FormatInt(a, 10), strconv.FormatInt(b, 10)).Int()
			if err != nil {
				t.Fatal(err)
			}
			if want := a < b; (got == 1) != want {
				t.Fatalf("lt(%d, %d) = %d, want %v", a, b, got, want)
			}
		}
	}
}
