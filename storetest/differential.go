package storetest

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	storemodel "github.com/shardcounter/shardcounter/internal/model"
	"github.com/shardcounter/shardcounter/internal/shard"
	"github.com/shardcounter/shardcounter/sketch"
)

// DiffSeedEnv names the environment variable that sets the differential
// test's seed, to replay a failure; unset, the seed is the time.
const DiffSeedEnv = "SHARDCOUNTER_DIFF_SEED"

// diffRuns counts the runs of each seed in this process.
var diffRuns sync.Map // uint64 -> *atomic.Int64

// diffItems is how many random items the differential test sends a store.
const diffItems = 10000

// testDifferential runs random batches through the store and through the
// model of the contract (internal/model), both on one test clock, and
// compares every outcome (error code, Duplicate, Unchanged, Total when
// both give one) and, after each batch, every value, shard count, member
// list, distinct shard, window bucket in retention and approx shard
// estimate. The batches mix sum, bounded (near int64's ends too),
// windowed, distinct and approx counters; request ids and their retries
// in the same and later batches, across the dedupe window; members added
// twice and absent members removed; items with Kind set, right and wrong;
// create on write with matching and mismatching specs; Total; Txn; invalid
// items; missing counters; and, between batches, reshards up and down,
// deletes and the clock moving on. Whatever the contract leaves to a store
// (the shard a full shard's delta goes to) is not compared. The first
// divergence fails the test with its seed, batch and item.
func testDifferential(t *testing.T, opts Options) {
	if opts.OpenWithClock == nil {
		t.Fatal("storetest.Options.OpenWithClock is nil: the differential test runs the store on a clock the test sets")
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(DiffSeedEnv); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: give a decimal seed", DiffSeedEnv, v)
		}
	}
	t.Logf("seed %d (%s=%d replays it)", seed, DiffSeedEnv, seed)
	rng := rand.New(rand.NewPCG(seed, 34))
	clk := NewClock(day0.Add(time.Duration(rng.IntN(24*3600)) * time.Second))
	// The ids depend on the seed alone (where a shard lands depends on
	// its counter's id), so that a seed replays the same run on a fresh
	// database; a seed run again in one process gets ids of its own.
	p := fmt.Sprintf("diff%d/", seed)
	if n, _ := diffRuns.LoadOrStore(seed, new(atomic.Int64)); n.(*atomic.Int64).Add(1) > 1 {
		p = fmt.Sprintf("diff%d.%d/", seed, n.(*atomic.Int64).Load())
	}
	d := &diff{t: t, seed: seed, rng: rng, crng: rand.New(rand.NewPCG(seed, 35)), clk: clk, p: p, totals: opts.Totals, split: opts.SplitBatches, bucketParts: opts.BucketPartsPerShard, oneSlot: opts.BoundsOneSlot, tally: map[string]int{},
		store: opts.OpenWithClock(t, clk.Now), model: storemodel.New(storemodel.Options{Now: clk.Now})}
	window := 2 * time.Hour
	if opts.RequestIDsOnServerClock {
		window = 30 * 24 * time.Hour // longer than the test's clock moves: never crossed
	}
	x, ok := d.store.(shardcounter.RequestIDExpirer)
	if !ok {
		t.Fatalf("%T is not a shardcounter.RequestIDExpirer", d.store)
	}
	x.SetDedupeWindow(window)
	d.model.(shardcounter.RequestIDExpirer).SetDedupeWindow(window)

	// Items a batch on average, and how often the reads are compared: on
	// a slow store (LoadScale below 1: an emulator), fewer and larger
	// batches, compared every few.
	avg, every := 80, 1
	if opts.LoadScale > 0 && opts.LoadScale < 1 {
		avg, every = int(50/opts.LoadScale), 3
	}
	start := time.Now()
	d.setup()
	for d.items < diffItems {
		d.between()
		d.apply(d.batch(1 + rng.IntN(2*avg)))
		if d.batches%every == 0 {
			d.check(d.batches%(8*every) == 0)
		}
	}
	d.check(true)
	d.checkList()
	t.Logf("%d items in %d batches, %d reshards, in %v; outcomes %v", d.items, d.batches, d.reshards, time.Since(start).Round(time.Millisecond), d.tally)
}

// diff is one run of the differential test.
type diff struct {
	t            *testing.T
	seed         uint64
	rng          *rand.Rand // the run's items
	crng         *rand.Rand // the checks' choices, apart so that checking does not change the items
	clk          *Clock
	p            string
	store, model shardcounter.CounterStore
	totals       bool // the store gives every total asked for (Options.Totals)
	split        bool // a batch may be several atomic steps (Options.SplitBatches)
	bucketParts  bool // window buckets judged by shard part (Options.BucketPartsPerShard)

	roles    map[string]role // every counter id the run writes, by what it is for
	ids      []string        // the same, in order
	fresh    map[string]shardcounter.Spec
	history  []shardcounter.Increment // items with request ids sent so far
	rids     int
	sketches [][]byte // encoded sketches to merge, the last one dense
	dense    string   // the approx counter that takes dense sketches
	batches  int
	items    int
	reshards int
	tally    map[string]int // outcomes by kind
	last     batchRun       // the last batch sent

	limits   map[string]shardcounter.LimitPolicy // the rate limit keys' state counters, and their policies
	keys     []string                            // the same, in order
	noLimits bool                                // the store refuses takes
	noBounds bool                                // the store refuses bounded items
	oneSlot  bool                                // it takes them on counters with Min and Max only (Options.BoundsOneSlot)
	noIf     bool                                // the store refuses conditional items (Increment.If)
}

// role is what a counter of the run is for, which decides its items.
type role int

const (
	roleSum  role = iota
	roleNear      // unbounded, with deltas that reach int64's ends
	roleBounded
	roleWindow
	roleDistinct
	roleApprox
	roleTxn     // unbounded, 32 shards or more: a Redis Cluster has one on every master
	roleFresh   // created on write
	roleMissing // never created
)

var ctx = context.Background()

// setup creates the run's counters through both stores.
func (d *diff) setup() {
	d.roles, d.fresh = map[string]role{}, map[string]shardcounter.Spec{}
	create := func(name string, r role, spec shardcounter.Spec) {
		id := d.p + name
		d.roles[id] = r
		d.ids = append(d.ids, id)
		if r == roleFresh {
			d.fresh[id] = spec
			return
		}
		if r == roleMissing {
			return
		}
		_, merr := d.model.CreateCounter(ctx, id, spec)
		_, serr := d.store.CreateCounter(ctx, id, spec)
		if merr != nil || serr != nil {
			d.t.Fatalf("CreateCounter(%s, %s): model %v, store %v", id, specString(spec), merr, serr)
		}
	}
	n := func(k int) int { return 1 + d.rng.IntN(k) }
	win := func(b, r time.Duration) *shardcounter.Window { return window(b, r) }
	for i := range 3 {
		create(fmt.Sprintf("sum%d", i), roleSum, shardcounter.Spec{Shards: n(8)})
	}
	for i := range 2 {
		create(fmt.Sprintf("near%d", i), roleNear, shardcounter.Spec{Shards: n(3)})
	}
	for i, spec := range []shardcounter.Spec{
		{Min: ptr(0)}, {Min: ptr(-50), Max: ptr(50)}, {Max: ptr(0)},
		{Min: ptr(-math.MaxInt64), Max: ptr(math.MaxInt64)}, {Min: ptr(math.MinInt64 + 7), Max: ptr(math.MaxInt64 - 7)},
	} {
		spec.Shards = n(4)
		create(fmt.Sprintf("bounded%d", i), roleBounded, spec)
	}
	for i, spec := range []shardcounter.Spec{
		{Window: win(time.Minute, time.Hour)},
		{Window: win(time.Hour, 24*time.Hour), Min: ptr(0)},
		{Window: win(24*time.Hour, 7*24*time.Hour)},
	} {
		spec.Shards = n(4)
		create(fmt.Sprintf("window%d", i), roleWindow, spec)
	}
	for i := range 2 {
		create(fmt.Sprintf("distinct%d", i), roleDistinct, shardcounter.Spec{Shards: n(8), Kind: shardcounter.KindDistinct})
	}
	for i := range 2 {
		create(fmt.Sprintf("approx%d", i), roleApprox, shardcounter.Spec{Shards: n(4), Kind: shardcounter.KindApprox})
	}
	d.dense = d.p + "approx1"

	for i := range 2 {
		create(fmt.Sprintf("txn%d", i), roleTxn, shardcounter.Spec{Shards: 32})
	}
	for i, spec := range []shardcounter.Spec{
		{Kind: shardcounter.KindSum}, {Kind: shardcounter.KindSum, Min: ptr(0)},
		{Kind: shardcounter.KindSum, Window: win(time.Hour, 24*time.Hour)},
		{Kind: shardcounter.KindDistinct}, {Kind: shardcounter.KindDistinct},
		{Kind: shardcounter.KindApprox}, {Kind: shardcounter.KindSum, Max: ptr(10)},
	} {
		spec.Shards = n(4)
		create(fmt.Sprintf("fresh%d", i), roleFresh, spec)
	}
	for i := range 2 {
		create(fmt.Sprintf("missing%d", i), roleMissing, shardcounter.Spec{})
	}
	for _, size := range []int{0, 3, 300, 20000} { // empty, sparse, dense
		s := sketch.New()
		for i := range size {
			s.Add(fmt.Sprintf("v%d", i*7))
		}
		d.sketches = append(d.sketches, s.Encode())
	}
	d.setupLimits()
	d.setupBounds()
}

// idOf returns a random id of the role.
func (d *diff) idOf(r role) string {
	var ids []string
	for _, id := range d.ids {
		if d.roles[id] == r {
			ids = append(ids, id)
		}
	}
	return ids[d.rng.IntN(len(ids))]
}

// between changes what lies between two batches: the clock moves on
// (seconds, minutes, now and then hours: buckets fill, pass retention, and
// request ids pass the dedupe window), a counter may be resharded up or
// down, or one created on write deleted.
func (d *diff) between() {
	switch x := d.rng.IntN(100); {
	case x < 70:
		d.clk.Advance(time.Duration(d.rng.IntN(90)) * time.Second)
	case x < 95:
		d.clk.Advance(time.Duration(1+d.rng.IntN(30)) * time.Minute)
	default:
		d.clk.Advance(time.Duration(60+d.rng.IntN(240)) * time.Minute)
	}
	if d.rng.IntN(4) == 0 {
		id := d.ids[d.rng.IntN(len(d.ids))]
		n := 1 + d.rng.IntN(10)
		switch {
		case d.roles[id] == roleTxn:
			n = 32 + d.rng.IntN(9)
		case d.rng.IntN(20) == 0:
			n = 0 // refused
		}
		d.reshards++
		sc, serr := d.store.ReshardCounter(ctx, id, n)
		if shardcounter.ErrorCode(serr) == shardcounter.EOUTOFRANGE && d.foldOverflows(id, n) {
			return // a store may refuse a fold its own shards cannot hold
		}
		mc, merr := d.model.ReshardCounter(ctx, id, n)
		if shardcounter.ErrorCode(merr) != shardcounter.ErrorCode(serr) || (merr == nil && sc.Shards != mc.Shards) {
			d.fail("before batch %d: ReshardCounter(%s, %d): model %s, store %s", d.batches, d.short(id), n, counterString(mc, merr), counterString(sc, serr))
		}
	}
	d.resetKey()
	if d.rng.IntN(4) == 0 { // so that counters are created on write all along
		id := d.idOf(roleFresh)
		merr, serr := d.model.DeleteCounter(ctx, id), d.store.DeleteCounter(ctx, id)
		if shardcounter.ErrorCode(merr) != shardcounter.ErrorCode(serr) {
			d.fail("before batch %d: DeleteCounter(%s): model %v, store %v", d.batches, id, merr, serr)
		}
	}
}

// foldOverflows reports whether shrinking the store's sum counter id to n
// shards would take one of them out of int64, folding its shards as they
// are: the contract fixes the total, not where a store keeps it, so such
// a reshard is the store's to refuse (or to level its shards for).
func (d *diff) foldOverflows(id string, n int) bool {
	c, vals, err := d.store.ReadShards(ctx, id)
	if err != nil || c.Kind != shardcounter.KindSum || n >= len(vals) {
		return false
	}
	sums := make([]*big.Int, n)
	for i, v := range vals {
		if sums[i%n] == nil {
			sums[i%n] = new(big.Int)
		}
		sums[i%n].Add(sums[i%n], big.NewInt(v))
	}
	for _, s := range sums {
		if !s.IsInt64() {
			return true
		}
	}
	return false
}

func counterString(c *shardcounter.Counter, err error) string {
	if err != nil {
		return "error " + shardcounter.ErrorCode(err) + ": " + err.Error()
	}
	return fmt.Sprintf("%d shards", c.Shards)
}

// batch returns n random items (a transaction's may make it longer).
func (d *diff) batch(n int) []shardcounter.Increment {
	var incs []shardcounter.Increment
	txns := uint64(0)
	for len(incs) < n {
		if d.rng.IntN(25) == 0 {
			txns++
			incs = append(incs, d.txn(txns)...)
			continue
		}
		var inc shardcounter.Increment
		switch x := d.rng.IntN(100); {
		case x < 15 && len(d.history) > 0: // a retry, in this batch or a later one
			inc = d.history[d.rng.IntN(len(d.history))]
			inc.Txn, inc.If = 0, 0
		case x < 18:
			inc = d.invalid()
		case x < 26 && !d.noLimits:
			inc = d.take()
		case x < 27 && !d.noLimits:
			inc = d.invalidTake()
		case x < 30 && !d.noLimits:
			inc = d.removal()
		default:
			inc = d.item(d.ids[d.rng.IntN(len(d.ids))])
		}
		if inc.RequestID != "" && inc.Txn == 0 {
			d.history = append(d.history, inc)
		}
		incs = append(incs, inc)
		if inc.Bound != nil && !d.noIf && d.rng.IntN(2) == 0 {
			// An item conditional on the bounded one (Increment.If, as
			// INCREX's deadline records are): skipped with it.
			c := d.item(d.ids[d.rng.IntN(len(d.ids))])
			c.If, c.Total = len(incs), false // a skipped one's total is no store's to give
			incs = append(incs, c)
		}
	}
	return incs
}

// txn returns the items of one transaction: deltas on counters with a
// shard on every Redis Cluster master, and at most one item pinned to
// its shard (a request id's, a member's), so that every store can apply it.
func (d *diff) txn(id uint64) []shardcounter.Increment {
	var incs []shardcounter.Increment
	for range 1 + d.rng.IntN(4) {
		incs = append(incs, shardcounter.Increment{Counter: d.idOf(roleTxn), Delta: d.small(10), Pick: d.rng.Uint64(), Total: d.rng.IntN(4) == 0, Txn: id})
	}
	switch d.rng.IntN(3) {
	case 0:
		incs = append(incs, d.withID(shardcounter.Increment{Counter: d.idOf(roleTxn), Delta: d.small(10), Txn: id}))
	case 1:
		incs = append(incs, shardcounter.Increment{Counter: d.idOf(roleDistinct), Member: d.member(), Delta: d.sign(), Txn: id})
	}
	d.rng.Shuffle(len(incs), func(i, j int) { incs[i], incs[j] = incs[j], incs[i] })
	return incs
}

// item returns a random item on counter id, of the shape its role takes
// (mostly), with a request id, Kind and Total now and then.
func (d *diff) item(id string) shardcounter.Increment {
	inc := shardcounter.Increment{Counter: id, Pick: d.rng.Uint64(), Total: d.rng.IntN(4) == 0}
	k := shardcounter.KindSum
	switch d.roles[id] {
	case roleSum, roleTxn:
		inc.Delta = d.small(10)
	case roleWindow:
		inc.Delta = d.small(100)
		if !d.bucketParts && d.rng.IntN(4) == 0 { // buckets near int64's ends while the total is not
			c, _ := d.model.GetCounter(ctx, id)
			inc.Delta = d.near(id, c.Min, c.Max)
		}
	case roleNear:
		inc.Delta = d.near(id, nil, nil)
	case roleBounded:
		c, _ := d.model.GetCounter(ctx, id)
		inc.Delta = d.near(id, c.Min, c.Max)
	case roleDistinct:
		k = shardcounter.KindDistinct
		inc.Member, inc.Delta = d.member(), d.sign()
	case roleApprox:
		k = shardcounter.KindApprox
		d.approx(&inc)
	case roleMissing:
		inc.Delta = d.small(5)
	case roleFresh:
		k = d.fresh[id].Kind
		d.create(&inc)
	}
	// A delta on a fresh counter may be bounded too: one skipped creates
	// nothing.
	r := d.roles[id]
	deltaOn := r == roleSum || r == roleWindow || r == roleFresh && inc.Member == "" && inc.Sketch == nil
	if !d.noBounds && (r == roleBounded || !d.oneSlot && deltaOn) && d.rng.IntN(4) == 0 {
		d.bound(&inc)
	}
	switch x := d.rng.IntN(100); { // an item of another shape: refused
	case x < 2:
		inc.Member, inc.Delta, inc.Sketch = d.member(), d.sign(), nil
	case x < 4:
		inc.Member, inc.Delta, inc.Sketch = "", d.small(5), nil
	case x < 5:
		inc.Member, inc.Delta, inc.Sketch = "", 0, d.sketches[1]
	}
	switch x := d.rng.IntN(100); {
	case x < 10:
		inc.Kind = k
	case x < 15:
		inc.Kind = []shardcounter.Kind{shardcounter.KindSum, shardcounter.KindDistinct, shardcounter.KindApprox}[d.rng.IntN(3)]
	}
	if d.rng.IntN(3) == 0 {
		inc = d.withID(inc)
	}
	return inc
}

// withID gives inc a new request id, and the pick that goes with it.
func (d *diff) withID(inc shardcounter.Increment) shardcounter.Increment {
	d.rids++
	inc.RequestID = fmt.Sprintf("r%d", d.rids)
	inc.Pick = shard.PickFor(inc.Counter, inc.RequestID)
	return inc
}

// create makes inc an item on a counter created on write: mostly of the
// counter's own spec and shape, sometimes with another spec (which the
// first applied item's wins), or with no Create at all.
func (d *diff) create(inc *shardcounter.Increment) {
	spec := d.fresh[inc.Counter]
	fails := false
	switch x := d.rng.IntN(10); {
	case x < 6:
	case x < 8: // another spec: shards, or kind
		spec.Shards = 1 + d.rng.IntN(6)
		if d.rng.IntN(2) == 0 {
			spec = shardcounter.Spec{Shards: spec.Shards, Kind: []shardcounter.Kind{shardcounter.KindSum, shardcounter.KindDistinct, shardcounter.KindApprox}[d.rng.IntN(3)]}
		}
	case x < 9: // another spec, whose item fails: it creates nothing
		spec, fails = shardcounter.Spec{Shards: 1 + d.rng.IntN(6), Min: ptr(0)}, true
	default:
		spec.Shards = 0
	}
	if spec.Shards > 0 {
		inc.Create = &spec
	}
	switch {
	case fails:
		inc.Delta = -1 - d.rng.Int64N(5)
	case spec.Kind == shardcounter.KindDistinct:
		inc.Member, inc.Delta = d.member(), d.sign()
	case spec.Kind == shardcounter.KindApprox:
		d.approx(inc)
	default:
		inc.Delta = d.small(12) // below a floor of 0, above a max of 10, now and then
	}
}

// approx makes inc a member add, or now and then a sketch to merge.
func (d *diff) approx(inc *shardcounter.Increment) {
	if d.rng.IntN(10) > 0 {
		inc.Member, inc.Delta = fmt.Sprintf("v%d", d.rng.IntN(3000)), 1
		return
	}
	// Only one counter takes dense sketches, whose estimates cost a pass
	// over 16,384 registers: the others stay sparse, and cheap to check.
	dense := inc.Counter == d.dense
	b := d.sketches[d.rng.IntN(len(d.sketches)-1)]
	if dense {
		b = d.sketches[d.rng.IntN(len(d.sketches))]
	}
	if d.rng.IntN(2) == 0 { // a shard of an approx counter, as PFMERGE reads it
		src := d.p + "approx0"
		if dense {
			src = d.idOf(roleApprox)
		}
		if _, shards, err := d.model.(shardcounter.SketchStore).ReadSketches(ctx, src); err == nil {
			if sb := shards[d.rng.IntN(len(shards))]; sb != nil {
				b = sb
			}
		}
	}
	inc.Sketch = b
}

// invalid returns an item that no counter takes.
func (d *diff) invalid() shardcounter.Increment {
	sum, dist, appr := d.idOf(roleSum), d.idOf(roleDistinct), d.idOf(roleApprox)
	return []shardcounter.Increment{
		{Counter: sum, Delta: 0},
		{Counter: dist, Member: "m1", Delta: 2},
		{Counter: dist, Member: "bad\x00member", Delta: 1},
		{Counter: sum, Delta: 1, RequestID: "bad\x01id"},
		{Counter: "", Delta: 1},
		{Counter: d.idOf(roleFresh), Delta: 1, Create: &shardcounter.Spec{Shards: 0}},
		{Counter: d.idOf(roleFresh), Member: "m1", Delta: 1, Create: &shardcounter.Spec{Shards: 1, Kind: shardcounter.KindDistinct, Min: ptr(0)}},
		{Counter: appr, Sketch: []byte{1, 2, 3}},
		{Counter: appr, Sketch: d.sketches[1], Member: "m1", Delta: 1},
		{Counter: sum, Delta: 1, Kind: "other"},
	}[d.rng.IntN(10)]
}

// small returns a non-zero delta in [-k, k].
func (d *diff) small(k int64) int64 {
	if v := d.rng.Int64N(2*k+1) - k; v != 0 {
		return v
	}
	return k
}

func (d *diff) sign() int64 {
	if d.rng.IntN(5) < 3 {
		return 1
	}
	return -1
}

// member returns a member of a small pool, so adds meet present members
// and removals absent ones.
func (d *diff) member() string { return poolMember(d.rng) }

func poolMember(rng *rand.Rand) string {
	pool := []string{"alice", "bob", "carol", "dave", "erin", "пост", "a b", "😀", "z/1", "~"}
	if i := rng.IntN(40); i < len(pool) {
		return pool[i]
	}
	return fmt.Sprintf("m%d", rng.IntN(30))
}

// near returns a delta for a counter whose total reaches int64's ends or
// its bounds: a small one, a huge one, or one that takes the total (as the
// model holds it before the batch) exactly to a limit or one past it.
func (d *diff) near(id string, lo, hi *int64) int64 {
	if d.rng.IntN(3) == 0 {
		return d.small(3)
	}
	if d.rng.IntN(4) == 0 {
		return []int64{math.MaxInt64, math.MinInt64, math.MaxInt64/2 + d.rng.Int64N(1000), -math.MaxInt64/2 - d.rng.Int64N(1000)}[d.rng.IntN(4)]
	}
	r, err := d.model.ReadCounter(ctx, id)
	if err != nil {
		d.t.Fatal(err)
	}
	type limit struct{ v, out int64 } // a limit, and the way past it
	limits := []limit{{math.MaxInt64, 1}, {math.MinInt64, -1}}
	if lo != nil {
		limits = append(limits, limit{*lo, -1})
	}
	if hi != nil {
		limits = append(limits, limit{*hi, 1})
	}
	l := limits[d.rng.IntN(len(limits))]
	delta := new(big.Int).Sub(big.NewInt(l.v), big.NewInt(r.Value))
	if d.rng.IntN(2) == 0 {
		delta.Add(delta, big.NewInt(l.out))
	}
	if delta.IsInt64() && delta.Int64() != 0 {
		return delta.Int64()
	}
	return d.small(3)
}
