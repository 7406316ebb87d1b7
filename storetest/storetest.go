// Package storetest is the conformance suite of the shardcounter.CounterStore
// contract. Every store package runs it against a real server:
//
//	func TestCounterStore(t *testing.T) {
//		storetest.RunCounterStore(t, func(tb testing.TB) shardcounter.CounterStore {
//			return MustOpen(tb, Options{})
//		}, storetest.Options{
//			OpenWithClock: func(tb testing.TB, now func() time.Time) shardcounter.CounterStore {
//				return MustOpen(tb, Options{Now: now})
//			},
//		})
//	}
//
// A store is done when it passes under -race. The suite may share one store
// (one database) between its subtests: each subtest uses counter ids under
// its own unique prefix, so stores need not be empty. Options say what a
// store offers beyond what every store must; the zero value asks for
// everything.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

// OpenFunc returns a store for a test. It may return the same store to
// every caller; the suite never closes it.
type OpenFunc func(tb testing.TB) shardcounter.CounterStore

var runID = fmt.Sprintf("%x", time.Now().UnixNano())

// prefixes holds the prefix of each running test, and runs numbers them:
// with -count=N a test runs N times under one name in one process.
var (
	prefixes sync.Map // *testing.T -> string
	runs     atomic.Int64
)

// prefix returns a counter id prefix unique to this test and run, so
// subtests can share a store, and reruns (also -count) a database. Every
// call in one test returns the same prefix.
func prefix(t *testing.T) string {
	if p, ok := prefixes.Load(t); ok {
		return p.(string)
	}
	p, _ := prefixes.LoadOrStore(t, fmt.Sprintf("%s/%s/%d/", runID, t.Name(), runs.Add(1)))
	return p.(string)
}

// Options tell the suite what a store offers where the contract lets
// stores differ. The zero value is the strongest store: set a field only
// where the store's documentation says it falls short.
type Options struct {
	// NoBatchSnapshot is set by a store whose ReadCounters is not one
	// snapshot across the counters it reads (Redis Cluster reads each
	// master at its own moment). The suite then checks that each reading
	// of a batch is linearizable on its own, instead of that the batch is
	// one snapshot.
	NoBatchSnapshot bool

	// OpenWithClock returns a store whose clock is now: the time a write
	// commits at (which window bucket it lands in, which buckets are past
	// retention) follows it. It may share Open's database. The window
	// cases need it and fail without it.
	OpenWithClock func(tb testing.TB, now func() time.Time) shardcounter.CounterStore

	// Totals is set by a store that gives every item asking for it its
	// counter's total with the commit (Outcome.Total). The suite then
	// checks that each comes; without it, only that those that come are
	// right.
	Totals bool

	// LoadScale scales the writes of the load cases (Exactness,
	// ReshardUnderWrites), 0 meaning 1: a store on an emulator that
	// commits a few hundred batches a second (Firestore's, whose tests
	// set 0.25) runs them with fewer writes per writer, the same writers
	// and the same checks, so that its run stays within minutes.
	LoadScale float64
}

// scaled returns n scaled by opts.LoadScale, at least 1.
func (o Options) scaled(n int) int {
	if o.LoadScale <= 0 {
		return n
	}
	return max(1, int(float64(n)*o.LoadScale))
}

// RunCounterStore runs every test of the contract.
func RunCounterStore(t *testing.T, open OpenFunc, opts Options) {
	t.Run("Create", func(t *testing.T) { testCreate(t, open(t)) })
	t.Run("NotFound", func(t *testing.T) { testNotFound(t, open(t)) })
	t.Run("Invalid", func(t *testing.T) { testInvalid(t, open(t)) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, open(t)) })
	t.Run("List", func(t *testing.T) { testList(t, open(t)) })
	t.Run("AddPlacement", func(t *testing.T) { testAddPlacement(t, open(t)) })
	t.Run("Apply", func(t *testing.T) { testApply(t, open(t)) })
	t.Run("ApplyDuplicate", func(t *testing.T) { testApplyDuplicate(t, open(t)) })
	t.Run("OutOfRange", func(t *testing.T) { testOutOfRange(t, open(t)) })
	t.Run("TotalOutOfRange", func(t *testing.T) { testTotalOutOfRange(t, open(t)) })
	t.Run("FullShard", func(t *testing.T) { testFullShard(t, open(t)) })
	t.Run("Reshard", func(t *testing.T) { testReshard(t, open(t)) })
	t.Run("Exactness", func(t *testing.T) { testExactness(t, open(t), opts) })
	t.Run("ConcurrentDuplicates", func(t *testing.T) { testConcurrentDuplicates(t, open(t)) })
	t.Run("ReshardUnderWrites", func(t *testing.T) { testReshardUnderWrites(t, open(t), opts) })
	t.Run("Spec", func(t *testing.T) { testSpec(t, open(t)) })
	t.Run("CreateOnWrite", func(t *testing.T) { testCreateOnWrite(t, open(t)) })
	t.Run("Kinds", func(t *testing.T) { testKinds(t, open(t)) })
	t.Run("HashIDs", func(t *testing.T) { testHashIDs(t, open(t)) })
	t.Run("Expiry", func(t *testing.T) { testExpiry(t, open(t)) })
	t.Run("Reset", func(t *testing.T) { testReset(t, open(t), opts) })
	t.Run("ConcurrentCreateOnWrite", func(t *testing.T) { testConcurrentCreateOnWrite(t, open(t)) })
	t.Run("ReadCounters", func(t *testing.T) { testReadCounters(t, open(t)) })
	t.Run("Placement", func(t *testing.T) { testPlacement(t, open(t)) })
	t.Run("BatchSnapshot", func(t *testing.T) { testBatchSnapshot(t, open(t), opts) })
	t.Run("Transfer", func(t *testing.T) { testTransfer(t, open(t)) })
	t.Run("Linearizable", func(t *testing.T) { testLinearizable(t, open(t)) })
	t.Run("Totals", func(t *testing.T) { testTotals(t, open(t), opts) })
	t.Run("Distinct", func(t *testing.T) { testDistinct(t, open(t)) })
	t.Run("ListMembers", func(t *testing.T) { testListMembers(t, open(t)) })
	t.Run("MembersConcurrent", func(t *testing.T) { testMembersConcurrent(t, open(t), false) })
	t.Run("MembersReshard", func(t *testing.T) { testMembersConcurrent(t, open(t), true) })
	t.Run("Bounds", func(t *testing.T) { testBounds(t, open(t)) })
	t.Run("BoundsConcurrent", func(t *testing.T) { testBoundsConcurrent(t, open(t), false) })
	t.Run("BoundsReshard", func(t *testing.T) { testBoundsConcurrent(t, open(t), true) })
	t.Run("Window", func(t *testing.T) { testWindow(t, opts) })
	t.Run("WindowRetention", func(t *testing.T) { testWindowRetention(t, opts) })
	t.Run("WindowUnderWrites", func(t *testing.T) { testWindowUnderWrites(t, opts) })
}

// RunStrongReads runs the cases that check that strong reads are
// linearizable while writes and reshards go on (the Transfer and
// Linearizable cases of RunCounterStore) against s alone. It is for a
// CounterStore built over something that adds its own read path, such as
// the engine's gathering of strong reads, seen through an adapter whose
// reads and writes go through it.
func RunStrongReads(t *testing.T, s shardcounter.CounterStore) {
	t.Run("Transfer", func(t *testing.T) { testTransfer(t, s) })
	t.Run("Linearizable", func(t *testing.T) { testLinearizable(t, s) })
}

// MustCreate creates a counter or fails the test.
func MustCreate(tb testing.TB, s shardcounter.CounterStore, id string, shards int) *shardcounter.Counter {
	tb.Helper()
	c, err := s.CreateCounter(context.Background(), id, shardcounter.Spec{Shards: shards})
	if err != nil {
		tb.Fatalf("CreateCounter(%q, %d): %v", id, shards, err)
	}
	return c
}

// MustRead reads a counter's value or fails the test.
func MustRead(tb testing.TB, s shardcounter.CounterStore, id string) int64 {
	tb.Helper()
	r, err := s.ReadCounter(context.Background(), id)
	if err != nil {
		tb.Fatalf("ReadCounter(%q): %v", id, err)
	}
	if r.ID != id || r.Consistency != shardcounter.Strong {
		tb.Fatalf("ReadCounter(%q) = %+v, want id %q and strong consistency", id, r, id)
	}
	return r.Value
}

// MustShards reads a counter's shard values or fails the test.
func MustShards(tb testing.TB, s shardcounter.CounterStore, id string) []int64 {
	tb.Helper()
	c, vals, err := s.ReadShards(context.Background(), id)
	if err != nil {
		tb.Fatalf("ReadShards(%q): %v", id, err)
	}
	if len(vals) != c.Shards {
		tb.Fatalf("ReadShards(%q): %d values for %d shards", id, len(vals), c.Shards)
	}
	return vals
}

func wantCode(tb testing.TB, what string, err error, code string) {
	tb.Helper()
	if got := shardcounter.ErrorCode(err); got != code {
		tb.Fatalf("%s: error %v (code %q), want code %q", what, err, got, code)
	}
}

func equalShards(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func testCreate(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "likes"
	before := time.Now().Add(-time.Minute)
	c := MustCreate(t, s, id, 8)
	if c.ID != id || c.Shards != 8 || c.CreatedAt.Before(before) || c.CreatedAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("CreateCounter = %+v, want id %q, 8 shards, created now", c, id)
	}
	got, err := s.GetCounter(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != c.ID || got.Shards != c.Shards || !got.CreatedAt.Equal(c.CreatedAt) {
		t.Fatalf("GetCounter = %+v, want %+v", got, c)
	}
	if got, want := MustShards(t, s, id), make([]int64, 8); !equalShards(got, want) {
		t.Fatalf("shards of a new counter = %v, want %v", got, want)
	}
	r, err := s.ReadCounter(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.Value != 0 || r.Shards != 8 || r.Consistency != shardcounter.Strong || r.AsOf.IsZero() {
		t.Fatalf("ReadCounter of a new counter = %+v, want 0 over 8 shards, strong, with as_of", r)
	}

	t.Run("ErrExists", func(t *testing.T) {
		if err := s.Add(ctx, id, 3, 0); err != nil {
			t.Fatal(err)
		}
		_, err := s.CreateCounter(ctx, id, shardcounter.Spec{Shards: 4})
		wantCode(t, "second CreateCounter", err, shardcounter.EEXISTS)
		if !errors.Is(err, shardcounter.ErrExists) {
			t.Fatalf("errors.Is(%v, ErrExists) = false", err)
		}
		if got := MustRead(t, s, id); got != 3 {
			t.Fatalf("value after a refused create = %d, want 3", got)
		}
		if got := MustShards(t, s, id); len(got) != 8 {
			t.Fatalf("shards after a refused create = %d, want 8", len(got))
		}
	})
	t.Run("Unicode", func(t *testing.T) {
		for _, id := range []string{prefix(t) + "пост/42 ❤", prefix(t) + "a b%2F?#&=", prefix(t) + strings.Repeat("x", shardcounter.MaxIDLen-len(prefix(t)))} {
			MustCreate(t, s, id, 1)
			if err := s.Add(ctx, id, 1, 0); err != nil {
				t.Fatalf("Add(%q): %v", id, err)
			}
			if got := MustRead(t, s, id); got != 1 {
				t.Fatalf("ReadCounter(%q) = %d, want 1", id, got)
			}
		}
	})
}

func testNotFound(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "missing"
	_, err := s.GetCounter(ctx, id)
	wantCode(t, "GetCounter", err, shardcounter.ENOTFOUND)
	if !errors.Is(err, shardcounter.ErrNotFound) {
		t.Fatalf("errors.Is(%v, ErrNotFound) = false", err)
	}
	_, err = s.ReadCounter(ctx, id)
	wantCode(t, "ReadCounter", err, shardcounter.ENOTFOUND)
	_, _, err = s.ReadShards(ctx, id)
	wantCode(t, "ReadShards", err, shardcounter.ENOTFOUND)
	wantCode(t, "Add", s.Add(ctx, id, 1, 0), shardcounter.ENOTFOUND)
	_, err = s.ReshardCounter(ctx, id, 4)
	wantCode(t, "ReshardCounter", err, shardcounter.ENOTFOUND)
	wantCode(t, "DeleteCounter", s.DeleteCounter(ctx, id), shardcounter.ENOTFOUND)

	// In a batch, a missing counter fails its own item only.
	ok := prefix(t) + "present"
	MustCreate(t, s, ok, 2)
	out, err := s.Apply(ctx, []shardcounter.Increment{
		{Counter: ok, Delta: 5, Pick: 0},
		{Counter: id, Delta: 7, Pick: 0},
		{Counter: ok, Delta: 11, Pick: 1},
	})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if len(out) != 3 {
		t.Fatalf("Apply returned %d outcomes, want 3", len(out))
	}
	if out[0].Err != nil || out[2].Err != nil {
		t.Fatalf("Apply outcomes %+v: want items 0 and 2 applied", out)
	}
	wantCode(t, "Apply item on a missing counter", out[1].Err, shardcounter.ENOTFOUND)
	if got := MustRead(t, s, ok); got != 16 {
		t.Fatalf("value = %d, want 16", got)
	}
	if _, err := s.GetCounter(ctx, id); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		t.Fatalf("a failed item created its counter: GetCounter = %v", err)
	}
}

func testInvalid(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "c"
	for _, n := range []int{0, -1, shardcounter.MaxShards + 1} {
		_, err := s.CreateCounter(ctx, id, shardcounter.Spec{Shards: n})
		wantCode(t, fmt.Sprintf("CreateCounter with %d shards", n), err, shardcounter.EINVALID)
	}
	for _, bad := range []string{"", strings.Repeat("x", shardcounter.MaxIDLen+1), "a\x00b", "a\nb", "\xff\xfe"} {
		_, err := s.CreateCounter(ctx, bad, shardcounter.Spec{Shards: 1})
		wantCode(t, fmt.Sprintf("CreateCounter(%q)", bad), err, shardcounter.EINVALID)
	}
	if _, err := s.GetCounter(ctx, id); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		t.Fatalf("a refused create left a counter behind: %v", err)
	}

	MustCreate(t, s, id, 4)
	if err := s.Add(ctx, id, 9, 1); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "Add of 0", s.Add(ctx, id, 0, 0), shardcounter.EINVALID)
	for _, n := range []int{0, shardcounter.MaxShards + 1} {
		_, err := s.ReshardCounter(ctx, id, n)
		wantCode(t, fmt.Sprintf("ReshardCounter to %d", n), err, shardcounter.EINVALID)
	}
	out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 0}, {Counter: id, Delta: 1, RequestID: "a\x01"}})
	if err == nil {
		for i, o := range out {
			wantCode(t, fmt.Sprintf("Apply invalid item %d", i), o.Err, shardcounter.EINVALID)
		}
	} else {
		wantCode(t, "Apply of invalid items", err, shardcounter.EINVALID)
	}
	if got := MustShards(t, s, id); !equalShards(got, []int64{0, 9, 0, 0}) {
		t.Fatalf("shards after refused calls = %v, want [0 9 0 0]", got)
	}
}

func testDelete(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "c"
	MustCreate(t, s, id, 4)
	out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 5, RequestID: "r1"}})
	if err != nil || out[0].Err != nil {
		t.Fatalf("Apply: %v %+v", err, out)
	}
	if err := s.DeleteCounter(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetCounter(ctx, id)
	wantCode(t, "GetCounter after delete", err, shardcounter.ENOTFOUND)
	wantCode(t, "Add after delete", s.Add(ctx, id, 1, 0), shardcounter.ENOTFOUND)

	// A new counter under the same id starts from zero, with no memory of
	// the old one's request ids.
	MustCreate(t, s, id, 2)
	if got := MustShards(t, s, id); !equalShards(got, []int64{0, 0}) {
		t.Fatalf("shards of a re-created counter = %v, want [0 0]", got)
	}
	out, err = s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 5, RequestID: "r1"}})
	if err != nil || out[0].Err != nil || out[0].Duplicate {
		t.Fatalf("Apply on a re-created counter: %v %+v, want applied", err, out)
	}
	if got := MustRead(t, s, id); got != 5 {
		t.Fatalf("value = %d, want 5", got)
	}
}

func testList(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	p := prefix(t)
	names := []string{"a", "b", "b/1", "c", "d", "e"}
	for i := len(names) - 1; i >= 0; i-- { // created out of order
		MustCreate(t, s, p+names[i], i+1)
	}
	MustCreate(t, s, prefix(t)[:len(p)-1]+"-other", 1) // shares a shorter prefix only

	var got []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > len(names) {
			t.Fatalf("paging did not end: %v", got)
		}
		cs, err := s.ListCounters(ctx, p, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) > 2 {
			t.Fatalf("ListCounters returned %d counters, limit 2", len(cs))
		}
		if len(cs) == 0 {
			break
		}
		for _, c := range cs {
			got = append(got, strings.TrimPrefix(c.ID, p))
			if want := 1 + indexOf(names, strings.TrimPrefix(c.ID, p)); c.Shards != want {
				t.Fatalf("listed %q with %d shards, want %d", c.ID, c.Shards, want)
			}
		}
		after = cs[len(cs)-1].ID
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("listed %v, want %v", got, names)
	}
	cs, err := s.ListCounters(ctx, p+"b", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].ID != p+"b" || cs[1].ID != p+"b/1" {
		t.Fatalf("ListCounters(prefix %q) = %v, want b and b/1", p+"b", ids(cs))
	}
	// A prefix that holds LIKE or glob metacharacters matches literally.
	for _, meta := range []string{"%", "_", "*", "?", "[a]", "\\"} {
		MustCreate(t, s, p+"m"+meta+"x", 1)
		MustCreate(t, s, p+"mZ"+meta+"x", 1)
		cs, err := s.ListCounters(ctx, p+"m"+meta, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].ID != p+"m"+meta+"x" {
			t.Fatalf("ListCounters(prefix %q) = %v, want only %q", p+"m"+meta, ids(cs), p+"m"+meta+"x")
		}
	}
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if x == y {
			return i
		}
	}
	return -100
}

func ids(cs []*shardcounter.Counter) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

func testAddPlacement(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "c"
	MustCreate(t, s, id, 4)
	for _, step := range []struct {
		delta int64
		pick  uint64
	}{{5, 6}, {-2, 2}, {7, 0}, {1, math.MaxUint64}} {
		if err := s.Add(ctx, id, step.delta, step.pick); err != nil {
			t.Fatalf("Add(%d, pick %d): %v", step.delta, step.pick, err)
		}
	}
	if got, want := MustShards(t, s, id), []int64{7, 0, 3, 1}; !equalShards(got, want) {
		t.Fatalf("shards = %v, want %v (pick mod 4)", got, want)
	}
	if got := MustRead(t, s, id); got != 11 {
		t.Fatalf("value = %d, want 11", got)
	}
}

func testApply(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	a, b := prefix(t)+"a", prefix(t)+"b"
	MustCreate(t, s, a, 3)
	MustCreate(t, s, b, 1)
	out, err := s.Apply(ctx, []shardcounter.Increment{
		{Counter: a, Delta: 10, Pick: 0},
		{Counter: b, Delta: -4, Pick: 99},
		{Counter: a, Delta: 5, Pick: 4},
		{Counter: a, Delta: -1, Pick: 0},
		{Counter: b, Delta: 1, Pick: 0, RequestID: "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Err != nil || o.Duplicate {
			t.Fatalf("outcome %d = %+v, want applied", i, o)
		}
	}
	if got, want := MustShards(t, s, a), []int64{9, 5, 0}; !equalShards(got, want) {
		t.Fatalf("shards of a = %v, want %v", got, want)
	}
	if got := MustRead(t, s, b); got != -3 {
		t.Fatalf("b = %d, want -3", got)
	}
	out, err = s.Apply(ctx, nil)
	if err != nil || len(out) != 0 {
		t.Fatalf("Apply(nil) = %v, %v; want no outcomes, no error", out, err)
	}
}

func testApplyDuplicate(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	a, b := prefix(t)+"a", prefix(t)+"b"
	MustCreate(t, s, a, 4)
	MustCreate(t, s, b, 4)
	out, err := s.Apply(ctx, []shardcounter.Increment{
		{Counter: a, Delta: 5, Pick: 1, RequestID: "r1"},
		{Counter: a, Delta: 5, Pick: 2, RequestID: "r1"}, // repeat in the same batch
		{Counter: b, Delta: 5, Pick: 1, RequestID: "r1"}, // ids are scoped to a counter
		{Counter: a, Delta: 1, Pick: 3, RequestID: "r2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{false, true, false, false}
	for i, o := range out {
		if o.Err != nil || o.Duplicate != want[i] {
			t.Fatalf("outcome %d = %+v, want duplicate=%v", i, o, want[i])
		}
	}
	out, err = s.Apply(ctx, []shardcounter.Increment{
		{Counter: a, Delta: 5, Pick: 1, RequestID: "r1"}, // a retry in a later batch
		{Counter: a, Delta: 100, Pick: 0},                // no id: always applies
	})
	if err != nil {
		t.Fatal(err)
	}
	if !out[0].Duplicate || out[0].Err != nil || out[1].Duplicate || out[1].Err != nil {
		t.Fatalf("outcomes = %+v, want [duplicate, applied]", out)
	}
	if got := MustRead(t, s, a); got != 106 {
		t.Fatalf("a = %d, want 106", got)
	}
	if got := MustRead(t, s, b); got != 5 {
		t.Fatalf("b = %d, want 5", got)
	}
	// A request id that failed (its counter missing) was not recorded.
	missing := prefix(t) + "missing"
	out, _ = s.Apply(ctx, []shardcounter.Increment{{Counter: missing, Delta: 1, RequestID: "r3"}})
	wantCode(t, "Apply on a missing counter", out[0].Err, shardcounter.ENOTFOUND)
	MustCreate(t, s, missing, 1)
	out, err = s.Apply(ctx, []shardcounter.Increment{{Counter: missing, Delta: 1, RequestID: "r3"}})
	if err != nil || out[0].Err != nil || out[0].Duplicate {
		t.Fatalf("retry after the counter was created: %v %+v, want applied", err, out)
	}
}

func testOutOfRange(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	one := prefix(t) + "one"
	MustCreate(t, s, one, 1)
	if err := s.Add(ctx, one, math.MaxInt64, 0); err != nil {
		t.Fatal(err)
	}
	err := s.Add(ctx, one, 1, 0)
	wantCode(t, "Add past MaxInt64", err, shardcounter.EOUTOFRANGE)
	if !errors.Is(err, shardcounter.ErrOutOfRange) {
		t.Fatalf("errors.Is(%v, ErrOutOfRange) = false", err)
	}
	other := prefix(t) + "other"
	MustCreate(t, s, other, 1)
	out, err := s.Apply(ctx, []shardcounter.Increment{
		{Counter: one, Delta: 1, RequestID: "over"},
		{Counter: other, Delta: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "Apply item past MaxInt64", out[0].Err, shardcounter.EOUTOFRANGE)
	if out[1].Err != nil {
		t.Fatalf("the in-range item of the batch failed: %v", out[1].Err)
	}
	if got := MustRead(t, s, one); got != math.MaxInt64 {
		t.Fatalf("value after refused writes = %d, want MaxInt64", got)
	}
	// The refused write's request id was not recorded: once it fits, it applies.
	if err := s.Add(ctx, one, -1, 0); err != nil {
		t.Fatal(err)
	}
	out, err = s.Apply(ctx, []shardcounter.Increment{{Counter: one, Delta: 1, RequestID: "over"}})
	if err != nil || out[0].Err != nil || out[0].Duplicate {
		t.Fatalf("retry of a refused write once it fits: %v %+v, want applied", err, out)
	}

	neg := prefix(t) + "neg"
	MustCreate(t, s, neg, 1)
	if err := s.Add(ctx, neg, math.MinInt64, 0); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "Add past MinInt64", s.Add(ctx, neg, -1, 0), shardcounter.EOUTOFRANGE)
}

func testReshard(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "c"
	MustCreate(t, s, id, 4)
	for i, v := range []int64{1, 2, 3, 4} {
		if err := s.Add(ctx, id, v, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.ReshardCounter(ctx, id, 8)
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != id || c.Shards != 8 {
		t.Fatalf("ReshardCounter up = %+v, want 8 shards", c)
	}
	if got, want := MustShards(t, s, id), []int64{1, 2, 3, 4, 0, 0, 0, 0}; !equalShards(got, want) {
		t.Fatalf("shards after growing = %v, want %v", got, want)
	}
	for i := 4; i < 8; i++ {
		if err := s.Add(ctx, id, int64(10*i), uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	// 8 → 3: shard i folds into shard i mod 3.
	if c, err = s.ReshardCounter(ctx, id, 3); err != nil {
		t.Fatal(err)
	}
	if c.Shards != 3 {
		t.Fatalf("ReshardCounter down = %+v, want 3 shards", c)
	}
	want := []int64{1 + 4 + 60, 2 + 40 + 70, 3 + 50}
	if got := MustShards(t, s, id); !equalShards(got, want) {
		t.Fatalf("shards after shrinking = %v, want %v", got, want)
	}
	if got := MustRead(t, s, id); got != 230 {
		t.Fatalf("value after resharding = %d, want 230", got)
	}
	// Growing again starts the new shards from zero, not from old values.
	if _, err = s.ReshardCounter(ctx, id, 5); err != nil {
		t.Fatal(err)
	}
	if got, want := MustShards(t, s, id), append(want, 0, 0); !equalShards(got, want) {
		t.Fatalf("shards after growing again = %v, want %v", got, want)
	}
	if c, err = s.ReshardCounter(ctx, id, 5); err != nil || c.Shards != 5 {
		t.Fatalf("ReshardCounter to the same count = %+v, %v", c, err)
	}
	if c, err = s.ReshardCounter(ctx, id, 1); err != nil || c.Shards != 1 {
		t.Fatalf("ReshardCounter to 1 = %+v, %v", c, err)
	}
	if got := MustShards(t, s, id); !equalShards(got, []int64{230}) {
		t.Fatalf("shards after shrinking to 1 = %v, want [230]", got)
	}
	if c, err = s.GetCounter(ctx, id); err != nil || c.Shards != 1 {
		t.Fatalf("GetCounter after reshard = %+v, %v", c, err)
	}
}

// load runs writers goroutines, each doing n writes of random amounts (both
// signs) through Add and Apply, and returns the sum of the acknowledged
// writes per counter. Any error fails the test: with no faults injected,
// every write must be acknowledged.
func load(t *testing.T, s shardcounter.CounterStore, counters []string, writers, n int, during func()) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	sums := make(map[string]int64)
	var wg sync.WaitGroup
	var failed atomic.Bool
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			local := make(map[string]int64)
			for i := 0; i < n && !failed.Load(); i++ {
				id := counters[rng.IntN(len(counters))]
				amount := rng.Int64N(2001) - 1000
				if amount == 0 {
					amount = 1
				}
				if rng.IntN(2) == 0 {
					if err := s.Add(ctx, id, amount, rng.Uint64()); err != nil {
						failed.Store(true)
						t.Errorf("Add(%q, %d): %v", id, amount, err)
						return
					}
					local[id] += amount
					continue
				}
				batch := make([]shardcounter.Increment, 1+rng.IntN(8))
				for j := range batch {
					batch[j] = shardcounter.Increment{Counter: counters[rng.IntN(len(counters))], Delta: rng.Int64N(201) - 100, Pick: rng.Uint64()}
					if batch[j].Delta == 0 {
						batch[j].Delta = -7
					}
				}
				out, err := s.Apply(ctx, batch)
				if err != nil {
					failed.Store(true)
					t.Errorf("Apply: %v", err)
					return
				}
				for j, o := range out {
					if o.Err != nil || o.Duplicate {
						failed.Store(true)
						t.Errorf("Apply item %+v: %+v", batch[j], o)
						return
					}
					local[batch[j].Counter] += batch[j].Delta
				}
			}
			mu.Lock()
			for id, v := range local {
				sums[id] += v
			}
			mu.Unlock()
		})
	}
	done := make(chan struct{})
	if during != nil {
		go func() { defer close(done); during() }()
	} else {
		close(done)
	}
	wg.Wait()
	<-done
	return sums
}

func scale(short, long int) int {
	if testing.Short() {
		return short
	}
	return long
}

func testExactness(t *testing.T, s shardcounter.CounterStore, opts Options) {
	ids := []string{prefix(t) + "hot", prefix(t) + "warm", prefix(t) + "one"}
	MustCreate(t, s, ids[0], 16)
	MustCreate(t, s, ids[1], 3)
	MustCreate(t, s, ids[2], 1)
	stop := make(chan struct{})
	var reads sync.WaitGroup
	reads.Go(func() { // reads during the load must never fail
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.ReadCounter(context.Background(), ids[0]); err != nil {
				t.Errorf("ReadCounter during writes: %v", err)
				return
			}
		}
	})
	sums := load(t, s, ids, 16, opts.scaled(scale(30, 200)), nil)
	close(stop)
	reads.Wait()
	for _, id := range ids {
		if got := MustRead(t, s, id); got != sums[id] {
			t.Errorf("%s = %d, want %d (the sum of the acknowledged writes)", id, got, sums[id])
		}
	}
}

func testConcurrentDuplicates(t *testing.T, s shardcounter.CounterStore) {
	id := prefix(t) + "c"
	MustCreate(t, s, id, 8)
	var applied atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for r := range scale(5, 20) {
				rid := fmt.Sprintf("req-%d", r)
				out, err := s.Apply(context.Background(), []shardcounter.Increment{
					{Counter: id, Delta: 1, Pick: uint64(w), RequestID: rid},
				})
				if err != nil || out[0].Err != nil {
					t.Errorf("Apply: %v %+v", err, out)
					return
				}
				if !out[0].Duplicate {
					applied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	want := int64(scale(5, 20))
	if got := applied.Load(); got != want {
		t.Errorf("%d writes reported applied, want %d (one per request id)", got, want)
	}
	if got := MustRead(t, s, id); got != want {
		t.Errorf("value = %d, want %d", got, want)
	}
}

func testReshardUnderWrites(t *testing.T, s shardcounter.CounterStore, opts Options) {
	ids := []string{prefix(t) + "a", prefix(t) + "b"}
	MustCreate(t, s, ids[0], 4)
	MustCreate(t, s, ids[1], 1)
	var reshards int
	sums := load(t, s, ids, 8, opts.scaled(scale(30, 150)), func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for range scale(10, 40) {
			n := 1 + rng.IntN(32)
			if _, err := s.ReshardCounter(context.Background(), ids[rng.IntN(2)], n); err != nil {
				t.Errorf("ReshardCounter(%d): %v", n, err)
				return
			}
			reshards++
		}
	})
	for _, id := range ids {
		if got := MustRead(t, s, id); got != sums[id] {
			t.Errorf("%s = %d after %d reshards under writes, want %d", id, got, reshards, sums[id])
		}
	}
}
