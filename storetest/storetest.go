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
	"fmt"
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

	// SplitBatches is set by a store that may apply the items of one
	// batch on one counter in more than one atomic step (Redis: the items
	// after one that waits for a rebalance). A total it gives an item
	// (Outcome.Total) is then checked to be a value the counter held
	// from that item's application to the batch's end, rather than the
	// value after the batch.
	SplitBatches bool

	// RequestIDsOnServerClock is set by a store whose request ids age by
	// its server's clock rather than OpenWithClock's (Redis): the
	// differential test then sets a dedupe window its test clock never
	// crosses, since only real time would expire them.
	RequestIDsOnServerClock bool

	// BucketPartsPerShard is set by a store that judges a window
	// bucket's int64 limit on each shard's part of it rather than on
	// its sum (Redis: docs/DESIGN.md, Windows): the differential test
	// then keeps windowed counters' deltas small, and the window cases
	// skip the bucket at int64's end, since there such a store is known
	// to differ from the contract.
	BucketPartsPerShard bool

	// BoundsOneSlot is set by a store that decides bounded items
	// (Increment.Bound) only on counters whose shards it can read in one
	// atomic step, a counter with Min or Max among them (Redis Cluster:
	// one slot), and refuses the others (ErrBoundsUnsupported): the
	// differential test then bounds the items of its counters with Min
	// and Max only.
	BoundsOneSlot bool

	// NoDifferential skips the differential test, for a second run of the
	// suite over a store whose first run has it (the same code with a
	// shared store, say), so that it is not paid for twice.
	NoDifferential bool
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
	t.Run("Txn", func(t *testing.T) { testTxn(t, open(t)) })
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
	t.Run("ExpiryChanges", func(t *testing.T) { testExpiryChanges(t, open(t)) })
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
	t.Run("Approx", func(t *testing.T) { testApprox(t, open(t)) })
	t.Run("Bounds", func(t *testing.T) { testBounds(t, open(t)) })
	t.Run("BoundsConcurrent", func(t *testing.T) { testBoundsConcurrent(t, open(t), false) })
	t.Run("BoundsReshard", func(t *testing.T) { testBoundsConcurrent(t, open(t), true) })
	t.Run("BoundCreate", func(t *testing.T) { testBoundCreate(t, open(t)) })
	t.Run("Window", func(t *testing.T) { testWindow(t, opts) })
	t.Run("WindowRetention", func(t *testing.T) { testWindowRetention(t, opts) })
	t.Run("WindowUnderWrites", func(t *testing.T) { testWindowUnderWrites(t, opts) })
	t.Run("LimitSweep", func(t *testing.T) { testLimitSweep(t, opts) })
	if !opts.NoDifferential {
		t.Run("Differential", func(t *testing.T) { testDifferential(t, opts) })
	}
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
