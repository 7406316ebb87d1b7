package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

func ptr(v int64) *int64 { return &v }

// window returns a window spec of the given bucket and retention.
func window(bucket, retention time.Duration) *shardcounter.Window {
	return &shardcounter.Window{Bucket: shardcounter.Duration(bucket), Retention: shardcounter.Duration(retention)}
}

// wantSpec fails the test unless c has the spec want, with Kind "" read
// as KindSum: a store records "" as "sum".
func wantSpec(tb testing.TB, what string, c *shardcounter.Counter, want shardcounter.Spec) {
	tb.Helper()
	if want.Kind == "" {
		want.Kind = shardcounter.KindSum
	}
	if !c.Spec.Equal(want) || c.Kind != want.Kind {
		tb.Fatalf("%s: spec %s, want %s", what, specString(c.Spec), specString(want))
	}
}

func specString(s shardcounter.Spec) string {
	str := fmt.Sprintf("{shards %d, kind %q", s.Shards, s.Kind)
	if s.Min != nil {
		str += fmt.Sprintf(", min %d", *s.Min)
	}
	if s.Max != nil {
		str += fmt.Sprintf(", max %d", *s.Max)
	}
	if s.Window != nil {
		str += fmt.Sprintf(", window %s:%s", s.Window.Bucket, s.Window.Retention)
	}
	return str + "}"
}

// testSpec checks that a counter keeps the spec it was created with, as
// CreateCounter, GetCounter and ListCounters return it, and that a spec
// ValidateSpec refuses is refused and leaves nothing behind.
func testSpec(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	p := prefix(t)
	specs := []shardcounter.Spec{
		{Shards: 3},
		{Shards: 2, Kind: shardcounter.KindSum, Min: ptr(-5), Max: ptr(100)},
		{Shards: 1, Kind: shardcounter.KindDistinct},
		{Shards: 4, Window: window(time.Hour, 7*24*time.Hour)},
		{Shards: 2, Min: ptr(0), Window: window(time.Minute, time.Hour)},
		{Shards: 5, Max: ptr(0)},
		{Shards: 1, Min: ptr(-1 << 62), Window: window(24*time.Hour, 30*24*time.Hour)},
	}
	for i, spec := range specs {
		id := fmt.Sprintf("%sc%d", p, i)
		c, err := s.CreateCounter(ctx, id, spec)
		if err != nil {
			t.Fatalf("CreateCounter(%s): %v", specString(spec), err)
		}
		wantSpec(t, "CreateCounter", c, spec)
		got, err := s.GetCounter(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		wantSpec(t, "GetCounter", got, spec)
		if !got.CreatedAt.Equal(c.CreatedAt) {
			t.Fatalf("GetCounter created_at %v, CreateCounter said %v", got.CreatedAt, c.CreatedAt)
		}
	}
	listed, err := s.ListCounters(ctx, p, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != len(specs) {
		t.Fatalf("ListCounters returned %d counters, want %d", len(listed), len(specs))
	}
	for i, c := range listed {
		wantSpec(t, "ListCounters", c, specs[i])
	}

	bad := []shardcounter.Spec{
		{Shards: 1, Kind: "other"},
		{Shards: 1, Kind: shardcounter.KindDistinct, Min: ptr(0)},
		{Shards: 1, Kind: shardcounter.KindDistinct, Window: window(time.Hour, time.Hour)},
		{Shards: 1, Min: ptr(1)},
		{Shards: 1, Max: ptr(-1)},
		{Shards: 1, Window: window(2*time.Hour, 4*time.Hour)},
		{Shards: 1, Window: window(time.Hour, 90*time.Minute)},
		{Shards: 1, Window: window(time.Minute, 8*24*time.Hour)},
		{Shards: 0, Kind: shardcounter.KindDistinct},
	}
	for _, spec := range bad {
		id := p + "bad"
		_, err := s.CreateCounter(ctx, id, spec)
		wantCode(t, fmt.Sprintf("CreateCounter(%s)", specString(spec)), err, shardcounter.EINVALID)
		if _, err := s.GetCounter(ctx, id); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
			t.Fatalf("a refused create (%s) left a counter behind: %v", specString(spec), err)
		}
	}
}

// testCreateOnWrite checks Increment.Create: a missing counter is created
// with the spec in the same commit as the write; a Create on an existing
// counter is ignored; an item that fails creates nothing.
func testCreateOnWrite(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	p := prefix(t)
	id := p + "c"
	spec := shardcounter.Spec{Shards: 4, Min: ptr(0)}
	out := applyOK(t, s,
		shardcounter.Increment{Counter: id, Delta: 5, Pick: 1, Create: &spec},
		shardcounter.Increment{Counter: id, Delta: 2, Pick: 2}, // created by the item before
		shardcounter.Increment{Counter: p + "missing", Delta: 1},
	)
	applied(t, "creating write", out[0])
	applied(t, "write after the creating one", out[1])
	wantCode(t, "write to a missing counter without Create", out[2].Err, shardcounter.ENOTFOUND)
	c, err := s.GetCounter(ctx, id)
	if err != nil {
		t.Fatalf("GetCounter of a counter created on write: %v", err)
	}
	wantSpec(t, "counter created on write", c, spec)
	if got, want := MustShards(t, s, id), []int64{0, 5, 2, 0}; !equalShards(got, want) {
		t.Fatalf("shards = %v, want %v", got, want)
	}

	t.Run("ExistingIgnoresCreate", func(t *testing.T) { testCreateExisting(t, s, id, spec) })
	t.Run("RequestID", func(t *testing.T) { testCreateRequestID(t, s, p) })
	t.Run("Distinct", func(t *testing.T) { testCreateDistinct(t, s, p) })
	t.Run("FailedItemCreatesNothing", func(t *testing.T) { testCreateFailedItem(t, s, p) })
}

// testCreateExisting checks that a Create on an existing counter is
// ignored: the write applies and the spec stays the one it was created with.
func testCreateExisting(t *testing.T, s shardcounter.CounterStore, id string, spec shardcounter.Spec) {
	ctx := context.Background()
	other := shardcounter.Spec{Shards: 8, Max: ptr(3)}
	out := applyOK(t, s, shardcounter.Increment{Counter: id, Delta: 10, Pick: 0, Create: &other})
	applied(t, "write with Create to an existing counter", out[0])
	c, err := s.GetCounter(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	wantSpec(t, "counter after a write with another Create", c, spec)
	if got := MustRead(t, s, id); got != 17 {
		t.Fatalf("value = %d, want 17", got)
	}
	_, err = s.CreateCounter(ctx, id, spec)
	wantCode(t, "CreateCounter of a counter created on write", err, shardcounter.EEXISTS)
}

// testCreateRequestID checks that the retry of a creating write with a
// request id is a duplicate, not a second create or a second write.
func testCreateRequestID(t *testing.T, s shardcounter.CounterStore, p string) {
	id := p + "rid"
	spec := shardcounter.Spec{Shards: 2}
	inc := shardcounter.Increment{Counter: id, Delta: 3, Pick: 5, RequestID: "r", Create: &spec}
	applied(t, "first write with a request id", applyOK(t, s, inc)[0])
	if o := applyOK(t, s, inc)[0]; o.Err != nil || !o.Duplicate {
		t.Fatalf("retry of a creating write: %+v, want duplicate", o)
	}
	if got := MustRead(t, s, id); got != 3 {
		t.Fatalf("value = %d, want 3", got)
	}
}

// testCreateDistinct checks that member items create a distinct counter,
// and that the second item sees the counter the first one created.
func testCreateDistinct(t *testing.T, s shardcounter.CounterStore, p string) {
	ctx := context.Background()
	id := p + "likes"
	spec := shardcounter.Spec{Shards: 2, Kind: shardcounter.KindDistinct}
	out := applyOK(t, s,
		shardcounter.Increment{Counter: id, Member: "alice", Delta: 1, Create: &spec},
		shardcounter.Increment{Counter: id, Member: "bob", Delta: 1, Create: &spec},
	)
	applied(t, "add alice", out[0])
	applied(t, "add bob", out[1])
	c, err := s.GetCounter(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	wantSpec(t, "distinct counter created on write", c, spec)
	if got := MustRead(t, s, id); got != 2 {
		t.Fatalf("value = %d, want 2", got)
	}
}

// testCreateFailedItem checks that an item that fails creates nothing,
// and that in a batch a later item that fits still creates the counter.
func testCreateFailedItem(t *testing.T, s shardcounter.CounterStore, p string) {
	ctx := context.Background()
	floor := shardcounter.Spec{Shards: 1, Min: ptr(0)}
	distinct := shardcounter.Spec{Shards: 1, Kind: shardcounter.KindDistinct}
	invalid := shardcounter.Spec{Shards: 0}
	for _, inc := range []shardcounter.Increment{
		{Counter: p + "floor", Delta: -1, Create: &floor},
		{Counter: p + "kind", Delta: 1, Create: &distinct},
		{Counter: p + "kind", Member: "m", Delta: 1, Create: &floor},
		{Counter: p + "invalid", Delta: 1, Create: &invalid},
	} {
		o := applyOK(t, s, inc)[0]
		if o.Err == nil {
			t.Fatalf("Apply(%+v) = %+v, want an error", inc, o)
		}
		if _, err := s.GetCounter(ctx, inc.Counter); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
			t.Fatalf("a failed creating write (%v) left a counter: GetCounter = %v", o.Err, err)
		}
	}
	// In batch order: a refused first item creates nothing, a later
	// one that fits creates the counter, and the items after it see it.
	out := applyOK(t, s,
		shardcounter.Increment{Counter: p + "floor", Delta: -1, Create: &floor},
		shardcounter.Increment{Counter: p + "floor", Delta: 3, Create: &floor},
		shardcounter.Increment{Counter: p + "floor", Delta: -1},
	)
	wantCode(t, "write below min 0 on a new counter", out[0].Err, shardcounter.EOUTOFRANGE)
	applied(t, "creating write that fits", out[1])
	applied(t, "write after it", out[2])
	if got := MustRead(t, s, p+"floor"); got != 2 {
		t.Fatalf("value = %d, want 2", got)
	}
}

// applyOK applies incs and fails the test if the batch as a whole fails.
func applyOK(t *testing.T, s shardcounter.CounterStore, incs ...shardcounter.Increment) []shardcounter.Outcome {
	t.Helper()
	out, err := s.Apply(context.Background(), incs)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return out
}

// applied fails the test unless o is an item that applied.
func applied(t *testing.T, what string, o shardcounter.Outcome) {
	t.Helper()
	if o.Err != nil || o.Duplicate || o.Unchanged {
		t.Fatalf("%s: %+v, want applied", what, o)
	}
}

// testKinds checks that a member item on a sum counter and a delta item on
// a distinct counter each fail on their own with ErrInvalid, as do the
// reads a counter's kind does not have.
func testKinds(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	sum, distinct := prefix(t)+"sum", prefix(t)+"distinct"
	MustCreate(t, s, sum, 2)
	if _, err := s.CreateCounter(ctx, distinct, shardcounter.Spec{Shards: 2, Kind: shardcounter.KindDistinct}); err != nil {
		t.Fatal(err)
	}
	out, err := s.Apply(ctx, []shardcounter.Increment{
		{Counter: sum, Member: "m", Delta: 1},
		{Counter: distinct, Delta: 5},
		{Counter: sum, Delta: 3},
		{Counter: distinct, Member: "m", Delta: 1},
		{Counter: distinct, Delta: -1, RequestID: "r"},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "member item on a sum counter", out[0].Err, shardcounter.EINVALID)
	wantCode(t, "delta item on a distinct counter", out[1].Err, shardcounter.EINVALID)
	wantCode(t, "delta item with a request id on a distinct counter", out[4].Err, shardcounter.EINVALID)
	for _, i := range []int{2, 3} {
		if out[i].Err != nil || out[i].Duplicate || out[i].Unchanged {
			t.Fatalf("outcome %d = %+v, want applied", i, out[i])
		}
	}
	if got := MustRead(t, s, sum); got != 3 {
		t.Fatalf("sum counter = %d, want 3", got)
	}
	if got := MustRead(t, s, distinct); got != 1 {
		t.Fatalf("distinct counter = %d, want 1", got)
	}
	wantCode(t, "Add to a distinct counter", s.Add(ctx, distinct, 1, 0), shardcounter.EINVALID)
	_, err = s.IsMember(ctx, sum, "m")
	wantCode(t, "IsMember on a sum counter", err, shardcounter.EINVALID)
	_, err = s.ListMembers(ctx, sum, "", 10)
	wantCode(t, "ListMembers on a sum counter", err, shardcounter.EINVALID)
	now := time.Now()
	_, err = s.ReadWindow(ctx, sum, now.Add(-time.Hour), now)
	wantCode(t, "ReadWindow on a counter without a window", err, shardcounter.EINVALID)
	_, err = s.ReadSeries(ctx, distinct, now.Add(-time.Hour), now)
	wantCode(t, "ReadSeries on a counter without a window", err, shardcounter.EINVALID)
	// The refused delta's request id was not recorded.
	if out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: distinct, Member: "n", Delta: 1, RequestID: "r"}}); err != nil || out[0].Err != nil || out[0].Duplicate {
		t.Fatalf("member write reusing a refused item's request id: %v %+v, want applied", err, out)
	}
}

// testConcurrentCreateOnWrite sends the first writes of a new counter from
// many goroutines at once, with and without request ids: the counter is
// created once, with its spec, and every write counts (each request id
// once).
func testConcurrentCreateOnWrite(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	const writers = 16
	n := scale(4, 12)
	for _, kind := range []shardcounter.Kind{shardcounter.KindSum, shardcounter.KindDistinct} {
		t.Run(string(kind), func(t *testing.T) {
			id := prefix(t) + "new"
			spec := shardcounter.Spec{Shards: 4, Kind: kind}
			var applied, changed atomic.Int64
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
					for i := range n + 1 {
						inc := shardcounter.Increment{Counter: id, Delta: 1, Pick: rng.Uint64(), Create: &spec}
						switch {
						case i == n: // every writer sends this one: it counts once
							inc.RequestID = "shared"
						case i%2 == 0:
							inc.RequestID = fmt.Sprintf("w%d-%d", w, i)
						}
						if kind == shardcounter.KindDistinct {
							inc.Member = fmt.Sprintf("m%d-%d", w, i)
							if i == n {
								inc.Member = "everyone"
							}
						}
						out, err := s.Apply(ctx, []shardcounter.Increment{inc})
						if err != nil || out[0].Err != nil {
							t.Errorf("first writes to a new counter: Apply(%+v) = %+v, %v", inc, out, err)
							return
						}
						if !out[0].Duplicate {
							applied.Add(1)
						}
						if !out[0].Duplicate && !out[0].Unchanged {
							changed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			want := int64(writers*n + 1)
			if got := applied.Load(); got != want {
				t.Errorf("%d writes applied, want %d (the shared request id once)", got, want)
			}
			if got := changed.Load(); got != want {
				t.Errorf("%d writes changed the counter, want %d", got, want)
			}
			if got := MustRead(t, s, id); got != want {
				t.Errorf("value = %d, want %d", got, want)
			}
			c, err := s.GetCounter(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			wantSpec(t, "counter created by concurrent first writes", c, spec)
		})
	}
}
