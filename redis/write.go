package redis

import (
	"context"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// Add is the seed algorithm: one EVALSHA of addScript on shard pick mod n,
// which adds delta when the shard's epoch is the one of the cached layout.
// With the layout cached (every write but a process's first to a counter)
// it is one round trip.
func (s *CounterStore) Add(ctx context.Context, id string, delta int64, pick uint64) error {
	out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: delta, Pick: pick}})
	if err != nil {
		return err
	}
	return out[0].Err
}

var _ shardcounter.HotCommitPipeliner = (*CounterStore)(nil)

// CommitsInFlight is 2: the engine sends the next batch while the one
// before waits for its reply (the round trip, the script, the master's
// fsync of its append-only file), so that a master gets the next script
// while it runs or syncs the last, and syncs them together when they
// reach it in one pass of its event loop.
func (s *CounterStore) CommitsInFlight() int { return 2 }

// PipelinesHotCommits reports that commits of one counter overlap too
// (shardcounter.HotCommitPipeliner): nothing is locked from one round trip
// to the next, each script is atomic on its master, and the scripts of
// two Apply calls on one key run one after the other there in whichever
// order they come, as those of two processes sharing the store do. What
// must follow an earlier commit stays safe: a request id is checked and
// recorded in the script that applies it, a take reads its key's state in
// the script that decides it, an approx shard is set only at the version
// it was read at, and each call's lost replies are settled by its own
// markers.
func (s *CounterStore) PipelinesHotCommits() bool { return true }

// pending is an increment of a batch not yet decided.
type pending struct {
	i     int // position in the batch
	l     *layout
	shard int
	g     groupKey // the script call it goes in
	res   string   // an unbounded sum's reservation (see order), "" for none
	hx    string   // its request id's expiry under an earlier layout (see history), "" for none
	need  int64    // a bounded item short of room: the delta its bound let apply
	cond  int      // 1 + the batch index of the item of the same call it is conditional on, 0 for none (cond.go)
}

// Apply applies a batch. Items are grouped by the slot of their shard
// (on one server all items form one group); each group is one EVALSHA of
// addScript, atomic on its node, and all groups go out in one pipeline, so
// a batch costs one round trip per master. On one server the whole batch
// is therefore atomic; on a cluster each slot group is, and each item gets
// its own outcome. An item whose shard refuses the cached epoch (a reshard
// happened) is retried after reloading the layout; nothing was applied.
//
// An item with a RequestID goes to shard PickFor(Counter, RequestID) mod
// n whatever its Pick, so the id is always checked and recorded in the one
// place a retry will look (plus the places of earlier shard counts still
// inside the dedupe window; see the package doc).
func (s *CounterStore) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	out := make([]shardcounter.Outcome, len(incs))
	todo := make([]int, 0, len(incs))
	b := &batch{totals: newTotals(incs)}
	for i, inc := range incs {
		if out[i].Err = condBefore(i, inc); out[i].Err == nil {
			if err := s.validate(inc); err != nil && inc.If != 0 {
				b.refuse(i, err) // once its condition is met (cond.go)
			} else {
				out[i].Err = err
			}
		}
		if out[i].Err == nil {
			todo = append(todo, i)
		}
	}
	fail := func(err error) {
		for _, i := range todo {
			out[i] = shardcounter.Outcome{Err: err}
		}
	}
	for attempt := 0; len(todo) > 0; attempt++ {
		if attempt == maxAttempts {
			for _, i := range todo {
				out[i] = shardcounter.Outcome{Err: shardcounter.Errorf(shardcounter.EUNAVAILABLE, "redis: counter %q: its layout, its slots or (approx) its shards' sketches kept changing; nothing was applied, try again", incs[i].Counter)}
			}
			break
		}
		if attempt > 0 {
			if err := sleep(ctx, attempt); err != nil {
				fail(storeErr("apply", err, false))
				break
			}
		}
		retry, err := s.applyOnce(ctx, incs, out, todo, b)
		if err != nil {
			fail(err)
			break
		}
		todo = retry
	}
	b.finish(incs, out)
	decided := false // some item applied or was found a duplicate
	for _, o := range out {
		decided = decided || o.Err == nil
	}
	if !decided {
		// When every item failed for want of the store, say so for the
		// whole batch, as the contract asks.
		var first error
		for _, o := range out {
			if o.Err == nil {
				continue
			}
			if shardcounter.IsOutcomeUnknown(o.Err) {
				return nil, o.Err
			}
			if shardcounter.ErrorCode(o.Err) != shardcounter.EUNAVAILABLE {
				return out, nil
			}
			if first == nil {
				first = o.Err
			}
		}
		if first != nil {
			return nil, first
		}
	}
	return out, nil
}

// sleep backs off before retry attempt n (1, 2, ...): none for the first
// retries, which follow a reshard, then growing to 100ms, for a cluster
// that is moving slots or electing a master.
func sleep(ctx context.Context, n int) error {
	if n < 3 {
		return ctx.Err()
	}
	t := time.NewTimer(time.Duration(min(n*n, 100)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// applyOnce makes one attempt at the items todo and returns those to try
// again. An error fails every item of todo.
//
// It runs the phases of a write in order, each below in the order it
// runs: plan the batch (layouts, the items' shards, counters to create,
// the order of each counter's items across script calls, request ids
// recorded under earlier layouts), compute approx shards' sketches, group
// the items by slot into addScript calls (the script decides each item
// atomically with its write), send the calls in one pipeline per master,
// and resolve the results (resolve.go).
//
// A missing counter with Increment.Create is created by its first write:
// the attempt gives it a new incarnation, creates its shards (on each
// master, in the pipeline before the writes) and applies the writes to
// them; then, when one of its items applied, it publishes the counter:
// one script writes its metadata and index entry unless the id was taken
// meanwhile. Until then the new keys are unreachable, so the writes count
// from the moment the counter exists; a writer that lost the race to
// another's create tries its items again on the winner's counter.
func (s *CounterStore) applyOnce(ctx context.Context, incs []shardcounter.Increment, out []shardcounter.Outcome, todo []int, b *batch) ([]int, error) {
	a := &attempt{s: s, incs: incs, out: out, todo: todo, b: b}
	if err := a.plan(ctx); err != nil {
		return nil, err
	}
	defer a.releaseSketches()
	if err := a.prepareSketches(ctx); err != nil {
		return nil, err
	}
	a.group()
	if err := a.send(ctx); err != nil {
		return nil, err
	}
	a.resolve(ctx)
	return a.retry, nil
}

// batch is what one Apply keeps across its attempts, for the rules that
// package decide applies to a whole batch, which Redis may apply in
// several attempts: the totals asked for, the counters' after the batch
// (totals.go), and the approx shards written, whose items are Unchanged
// together when the batch left the shard's sketch as it was.
type batch struct {
	totals
	sketched map[string]*sketched // by shard key
	invalid  map[int]error        // conditional items refused once their condition is met (cond.go)
	touched  map[string]bool      // counters of items other than removals (remove.go)
}

// finish gives the items their totals and approx items their shard's
// Unchanged.
func (b *batch) finish(incs []shardcounter.Increment, out []shardcounter.Outcome) {
	b.give(incs, out)
	for _, sh := range b.sketched {
		for _, i := range sh.items {
			if out[i].Err == nil {
				out[i].Unchanged = !sh.changed
			}
		}
	}
}

// attempt is one try at the items todo of a batch. Each phase of
// applyOnce leaves in it what the next one needs, so the phases are
// functions of a screen each rather than one long function.
type attempt struct {
	s    *CounterStore
	incs []shardcounter.Increment
	out  []shardcounter.Outcome // decided items get their outcome here
	todo []int
	b    *batch

	ls       map[string]*layout // plan: the layouts of the counters of todo
	fresh    []*layout          // plan: counters this attempt creates, in batch order
	items    []pending          // plan: the items to send
	waiting  map[string]bool    // plan: counters whose later items wait for the next attempt
	removing map[string]bool    // plan: counters with a removal sent (remove.go)

	groups []*slotGroup // group: one addScript call per slot, in batch order

	nr *nodeRuns // send: the pipelines, one per master

	sk      decide.Sketches // prepareSketches: the approx items by shard
	xs      []shardSketch   // prepareSketches: the same shards' compare-and-set
	stripes []int           // prepareSketches: the in-process locks held

	retry        []int                // resolve (and plan): items to try again
	applied      map[int]bool         // resolve: items applied (or found duplicates)
	cramped      map[string][]pending // resolve: items whose shard had no room, by counter
	crampedOrder []string             // resolve: the counters of cramped, in order met
	redirected   bool                 // resolve: a moved slot refreshed the cluster's slots
	dropped      []*layout            // resolve: limit states whose keys are removed: their metadata goes (remove.go)
}

// plan finds the layouts of the counters of todo, decides the items that
// cannot be written (missing counter, wrong kind: decide's rules) and
// gives each other item its shard; a missing counter with Create gets a
// new layout, to be created by this attempt. Then it places the
// transactions (txn.go), keeps each counter's items in order (order), and
// reads what request ids earlier layouts recorded (history).
func (a *attempt) plan(ctx context.Context) error {
	ids := make([]string, len(a.todo))
	for j, i := range a.todo {
		ids[j] = a.incs[i].Counter
	}
	ls, err := a.s.layoutsOf(ctx, ids)
	if err != nil {
		return err
	}
	a.ls = ls
	a.items = make([]pending, 0, len(a.todo))
	pend := make(map[int]bool, len(a.todo))
	for _, i := range a.todo {
		pend[i] = true
	}
	sent := make(map[int]groupKey) // the call of each item planned (cond.go)
	for _, i := range a.todo {
		planned, cond := a.condition(i, pend, sent)
		if !planned {
			continue
		}
		if l := a.layoutFor(i); l != nil {
			p := pending{i: i, l: l, shard: shard.Of(pickOf(a.incs[i]), l.n), cond: cond}
			if a.incs[i].Take != nil {
				p.shard, p.g.take = 0, true // a take reads every shard; its request ids are shard 0's
			}
			if a.sameCall(&p, sent) {
				a.items = append(a.items, p)
			}
		}
	}
	a.placeTxns(ctx)
	a.order()
	return a.history(ctx)
}

// layoutFor returns the layout item i writes to, new when the attempt
// creates its counter; or nil, with the item's outcome in out, or in
// retry when it waits for the next attempt.
//
// Create on write follows package decide: a missing counter is created by
// the first item on it that applies, with that item's Create spec, and
// until one applies each item is judged on its own Create; a bounded item
// skipped creates nothing. So the attempt that creates a counter sends
// the items on it that would create it alike (the same spec); the first
// that would not (another spec, or no Create: not found unless an earlier
// item applied) and those after it wait for the next attempt, which finds
// the counter created or not.
func (a *attempt) layoutFor(i int) *layout {
	inc := a.incs[i]
	l := a.ls[inc.Counter]
	switch {
	case a.waiting[inc.Counter]:
		a.retry = append(a.retry, i)
		return nil
	case inc.Take != nil && inc.Take.Remove && (l == nil || a.b.busy(a.incs, inc.Counter)):
		a.out[i] = shardcounter.Outcome{Skipped: true} // kept: missing, or busy (remove.go)
		return nil
	case l == nil && inc.Create == nil:
		a.out[i] = shardcounter.Outcome{Err: shardcounter.CounterNotFound(inc.Counter)}
		return nil
	case l == nil:
		if err := a.s.checkItem(inc, *inc.Create); err != nil {
			a.out[i] = shardcounter.Outcome{Err: err} // creates nothing
			return nil
		}
		l = a.s.newLayout(inc.Counter, *inc.Create)
		l.unborn = true
		a.ls[inc.Counter] = l
		a.fresh = append(a.fresh, l)
		if b := inc.Bound; b != nil && !b.Saturate {
			a.waitAfter(inc.Counter) // it may be skipped, creating nothing
		}
		return l
	case l.unborn && (inc.Create == nil || !inc.Create.Equal(l.counter().Spec)):
		a.wait(inc.Counter, i)
		return nil
	}
	if err := a.s.checkItem(inc, l.counter().Spec); err != nil {
		if a.removing[inc.Counter] {
			a.wait(inc.Counter, i) // after the removal, which may leave no counter (remove.go)
			return nil
		}
		a.out[i] = shardcounter.Outcome{Err: err}
		return nil
	}
	a.removal(inc)
	return l
}

// wait sends item i, on counter id, and the items after it on id, to the
// next attempt.
func (a *attempt) wait(id string, i int) {
	a.waitAfter(id)
	a.retry = append(a.retry, i)
}

// waitAfter sends the items after this one on counter id to the next
// attempt.
func (a *attempt) waitAfter(id string) {
	if a.waiting == nil {
		a.waiting = make(map[string]bool)
	}
	a.waiting[id] = true
}

// pickOf returns the pick that decides an item's shard: package decide's
// (decide.Pick: a member's hash, so a member is always on one shard, else
// the caller's), except that a delta with a request id follows the id
// (shard.PickFor), so that retries look where the first try recorded it.
func pickOf(inc shardcounter.Increment) uint64 {
	if inc.RequestID != "" && inc.Member == "" && inc.Sketch == nil {
		return shard.PickFor(inc.Counter, inc.RequestID)
	}
	return decide.Pick(inc)
}

// groupKey names the script call an item goes in: its shard's slot (0 on
// one server), or its transaction's.
type groupKey struct {
	slot int
	txn  uint64
	take bool // takes of rate limits: a takeScript call (limit.go)
}

// history reads, for the items with a request id on a counter resharded
// within the dedupe window, the id's expiry on its shard under each
// earlier shard count (PickFor mod that count), which the script compares
// with the server's clock as it does its own shard's: the duplicate is
// the script's to decide. Those layouts are closed (their shards were
// fenced before the current layout began), so the records no longer
// change and a plain read is exact. It costs one round trip, and only for
// such items.
func (a *attempt) history(ctx context.Context) error {
	type check struct {
		item int // index in a.items
		cmd  *goredis.FloatCmd
	}
	var checks []check
	for j, it := range a.items {
		if a.incs[it.i].RequestID == "" || len(it.l.hist) == 0 || it.g.take {
			continue
		}
		for _, p := range it.l.hist {
			if sh := shard.Of(pickOf(a.incs[it.i]), p.n); sh != it.shard {
				checks = append(checks, check{item: j, cmd: goredis.NewFloatCmd(ctx, "zscore", it.l.keys.ids(sh), a.incs[it.i].RequestID)})
			}
		}
	}
	if len(checks) == 0 {
		return nil
	}
	if _, err := a.s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, c := range checks {
			_ = p.Process(ctx, c.cmd)
		}
		return nil
	}); err != nil && err != goredis.Nil {
		return storeErr("check request ids", err, false)
	}
	latest := make(map[int]float64)
	for _, c := range checks {
		if exp, err := c.cmd.Result(); err == nil && exp > latest[c.item] {
			latest[c.item] = exp
			a.items[c.item].hx = strconv.FormatFloat(exp, 'f', 0, 64)
		}
	}
	return nil
}

// slotGroup is the items of one slot: one addScript call, atomic on its
// node, with keys and arguments for each item in batch order; or the
// items of one transaction (txn.go): one txnScript call on the master of
// slot, where all its shards are.
type slotGroup struct {
	slot     int
	txn      bool
	take     bool            // takes of rate limits (takeScript)
	script   *goredis.Script // addScript or txnScript
	items    []pending
	keys     []string
	args     []any
	hx       []any             // item numbers and expiries, after the items' arguments (see history)
	counters map[string]string // counter id -> its name in the script's arguments
	pos      map[int]int       // batch index -> the item's number in the call, from 1
	run      *nodeRun          // where it runs, as run.cmds[at]
	at       int
}

// group puts the planned items into slot groups, keeping batch order
// within a group; on one server every item is in slot 0, one group. The
// items of a transaction form a group of their own, in the slot of its
// first item's shard.
func (a *attempt) group() {
	byKey := make(map[groupKey]*slotGroup)
	ttl := strconv.FormatInt(time.Duration(a.s.ttl.Load()).Milliseconds(), 10)
	syncDup := "0"
	if a.s.waitReplicas > 0 {
		syncDup = "1"
	}
	now := a.s.now()
	for _, it := range a.items {
		if a.out[it.i].Err != nil {
			continue // its shard's sketch failed to decode
		}
		if it.cond != 0 && a.out[it.cond-1].Err != nil {
			a.out[it.i] = shardcounter.Outcome{Skipped: true} // its condition's sketch failed
			continue
		}
		g := byKey[it.g]
		if g == nil && it.g.take {
			g = &slotGroup{slot: it.g.slot, take: true, script: takeScript, args: []any{ttl, syncDup, a.s.limitClock()}, counters: make(map[string]string), pos: make(map[int]int)}
			byKey[it.g] = g
			a.groups = append(a.groups, g)
		}
		if it.g.take {
			g.addTake(it, a.incs[it.i])
			continue
		}
		if g == nil {
			g = &slotGroup{slot: it.g.slot, txn: it.g.txn != 0, script: addScript, args: []any{ttl, syncDup}, counters: make(map[string]string), pos: make(map[int]int)}
			if g.txn {
				g.script = txnScript
				if a.s.cluster != nil {
					g.slot = it.l.keys.slot(it.shard)
				}
			}
			byKey[it.g] = g
			a.groups = append(a.groups, g)
		}
		g.add(it, a.incs[it.i], now, a.sketchOf(it))
	}
}

// add appends an item's keys and arguments to g (see addScript). The mode
// tells the script what the item is, and aux the key its check reads: a
// delta on a sum counter, a member of a distinct one (aux its member
// set), a delta on a bounded one (aux its bounds key), a member or sketch
// of an approx one (x its shard's compare-and-set); a windowed counter
// also names its buckets and the bucket the write goes to.
func (g *slotGroup) add(it pending, inc shardcounter.Increment, now time.Time, x *shardSketch) {
	c, ok := g.counters[inc.Counter]
	if !ok {
		c = strconv.Itoa(len(g.counters))
		g.counters[inc.Counter] = c
	}
	g.items = append(g.items, it)
	g.pos[it.i] = len(g.items)
	k, sk := it.l.keys, it.l.keys.shard(it.shard)
	mode, aux, wb, wi, ws, cut := modeSum, sk, sk, sk, "", ""
	nd, arg := any(negate(inc.Delta)), any(it.res)
	switch {
	case it.l.distinct():
		mode, aux, arg = modeDistinct, k.members(it.shard, it.l.memberGen), inc.Member
	case it.l.approx():
		mode, nd, arg = modeApprox, x.ver, x.carry()
	case it.l.spec.Bounded():
		mode, aux = modeBounded, k.bounds()
	}
	if b := inc.Bound; b != nil {
		mode, arg = boundMode(mode, arg, *b, k.shards(it.l.n))
	}
	if w := it.l.spec.Window; w != nil {
		wb, wi = k.buckets(it.shard), k.bucketIndex(it.shard)
		ws, cut = unix(w.BucketOf(now)), unix(w.BucketOf(now.Add(-time.Duration(w.Retention))))
	}
	g.keys = append(g.keys, sk, k.ids(it.shard), aux, wb, wi)
	g.args = append(g.args, it.l.ep(), inc.Delta, nd, inc.RequestID, c, mode, arg, ws, cut)
	if it.hx != "" {
		g.hx = append(g.hx, len(g.items), it.hx)
	}
	if it.cond != 0 {
		g.hx = append(g.hx, -len(g.items), g.pos[it.cond-1]) // see addScript
	}
}

// unix returns t in Unix seconds, as the scripts take a bucket's start.
func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// send runs one pipeline per master (one on a single server), with a WAIT
// at its end when WaitReplicas is set (see wait.go). The shards of new
// counters are queued first, since a master runs its pipeline in order;
// then each group's script, its marker key last (see marker.go); then the
// totals asked for, read after the writes. A group whose node cannot be
// found fails here. An error (loading scripts) fails the attempt.
func (a *attempt) send(ctx context.Context) error {
	s := a.s
	a.nr = newNodeRuns(s)
	for _, l := range a.fresh {
		s.createShards(ctx, a.nr, l)
	}
	for _, g := range a.groups {
		g.args = append(g.args, g.hx...)
		// A transaction's script takes its marker as its one declared key.
		if g.txn || g.take || (!s.noMarkers && a.needsMarker(g)) {
			g.keys = append(g.keys, s.markerKey(g.slot))
		}
		if g.txn {
			g.keys, g.args = txnCall(g.keys, g.args)
		}
	}
	for _, g := range a.groups {
		g.run, g.at = a.nr.add(ctx, g.keys[0], func(p goredis.Pipeliner) *goredis.Cmd { return g.script.EvalSha(ctx, p, g.keys, g.args...) })
		if g.run == nil {
			err := storeErr("apply", a.nr.err, false)
			for _, it := range g.items {
				a.out[it.i] = shardcounter.Outcome{Err: err}
			}
		}
	}
	a.b.queue(ctx, a)
	s.runOnNodes(ctx, a.nr.runs)
	return a.nr.loadScripts(ctx)
}

// needsMarker reports whether a slot group needs a marker to be run
// again safely: whether it has an item without a request id. A group
// whose items all have request ids needs none: run again, the script
// finds each item it applied among its shard's request ids and answers
// it a duplicate, and applies the others then (see marker.go).
func (a *attempt) needsMarker(g *slotGroup) bool {
	for _, it := range g.items {
		if a.incs[it.i].RequestID == "" {
			return true
		}
	}
	return false
}
