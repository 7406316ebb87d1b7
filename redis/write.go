package redis

import (
	"context"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
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

// pending is an increment of a batch not yet decided.
type pending struct {
	i     int // position in the batch
	l     *layout
	shard int
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
	for i, inc := range incs {
		if err := shardcounter.ValidateIncrement(inc); err != nil {
			out[i].Err = err
			continue
		}
		todo = append(todo, i)
	}
	for attempt := 0; len(todo) > 0; attempt++ {
		if attempt == maxAttempts {
			for _, i := range todo {
				out[i].Err = shardcounter.Errorf(shardcounter.EUNAVAILABLE, "redis: counter %q: its layout, its slots or (approx) its shards' sketches kept changing; nothing was applied, try again", incs[i].Counter)
			}
			break
		}
		if attempt > 0 {
			if err := sleep(ctx, attempt); err != nil {
				for _, i := range todo {
					out[i].Err = storeErr("apply", err, false)
				}
				break
			}
		}
		retry, err := s.applyOnce(ctx, incs, out, todo)
		if err != nil {
			for _, i := range todo {
				out[i].Err = err
			}
			break
		}
		todo = retry
	}
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
// request ids seen before), group the items by slot into addScript calls
// (the script checks bounds and room atomically with the add), send the
// calls in one pipeline per master, and resolve the results (resolve.go).
//
// A missing counter with Increment.Create is created by its first write:
// the attempt gives it a new incarnation, creates its shards (on each
// master, in the pipeline before the writes) and applies the writes to
// them; then, when one of its items applied, it publishes the counter:
// one script writes its metadata and index entry unless the id was taken
// meanwhile. Until then the new keys are unreachable, so the writes count
// from the moment the counter exists; a writer that lost the race to
// another's create tries its items again on the winner's counter.
func (s *CounterStore) applyOnce(ctx context.Context, incs []shardcounter.Increment, out []shardcounter.Outcome, todo []int) ([]int, error) {
	a := &attempt{s: s, incs: incs, out: out, todo: todo}
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

// attempt is one try at the items todo of a batch. Each phase of
// applyOnce leaves in it what the next one needs, so the phases are
// functions of a screen each rather than one long function.
type attempt struct {
	s    *CounterStore
	incs []shardcounter.Increment
	out  []shardcounter.Outcome // decided items get their outcome here
	todo []int

	ls    map[string]*layout // plan: the layouts of the counters of todo
	fresh []*layout          // plan: counters this attempt creates, in batch order
	items []pending          // plan: the items to send

	groups []*slotGroup // group: one addScript call per slot, in batch order

	nr  *nodeRuns    // send: the pipelines, one per master
	tot *batchTotals // send: the totals read after the writes

	x       map[string]*shardSketch // prepareSketches: approx counters' shards, by shard key
	stripes []int                   // prepareSketches: the in-process locks held

	retry        []int                // resolve: items to try again
	applied      map[int]bool         // resolve: items applied (or found duplicates)
	cramped      map[string][]pending // resolve: items whose shard had no room, by counter
	crampedOrder []string             // resolve: the counters of cramped, in order met
	redirected   bool                 // resolve: a moved slot refreshed the cluster's slots
}

// plan finds the layouts of the counters of todo, decides the items that
// cannot be written (missing counter, wrong kind) and gives each other
// item its shard; a missing counter with Create gets a new layout, to be
// created by this attempt. Items whose request id was recorded under an
// earlier shard count are decided as duplicates here.
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
	for _, i := range a.todo {
		if l := a.layoutFor(i); l != nil {
			a.items = append(a.items, pending{i: i, l: l, shard: shard.Of(pickOf(a.incs[i]), l.n)})
		}
	}
	if a.items, err = a.s.seenBefore(ctx, a.incs, a.out, a.items); err != nil {
		return err
	}
	a.placeTxns(ctx)
	return nil
}

// layoutFor returns the layout item i writes to, new when the attempt
// creates its counter, or nil with the item's error in out.
func (a *attempt) layoutFor(i int) *layout {
	inc := a.incs[i]
	l := a.ls[inc.Counter]
	if l == nil {
		if inc.Create == nil {
			a.out[i].Err = notFound(inc.Counter)
			return nil
		}
		if err := kindMatches(inc, *inc.Create); err != nil {
			a.out[i].Err = err // creates nothing
			return nil
		}
		l = a.s.newLayout(inc.Counter, *inc.Create)
		a.ls[inc.Counter] = l
		a.fresh = append(a.fresh, l)
	}
	if err := kindMatches(inc, l.spec); err != nil {
		a.out[i].Err = err
		return nil
	}
	return l
}

// kindMatches refuses what the counter's kind cannot take: a member or a
// sketch on a sum counter, a delta on a distinct or approx one, a removal
// from an approx one.
func kindMatches(inc shardcounter.Increment, spec shardcounter.Spec) error {
	k := spec.Kind
	if k == "" {
		k = shardcounter.KindSum
	}
	return shardcounter.ValidateIncrementKind(inc, k)
}

// pickOf returns the pick that decides an item's shard: a member's hash
// on a distinct counter, so a member is always on one shard; the request
// id's pick, so retries look where the first try recorded it; else the
// caller's.
func pickOf(inc shardcounter.Increment) uint64 {
	switch {
	case inc.Sketch != nil: // merged into shard Pick mod n, request id or not
		return inc.Pick
	case inc.Member != "":
		return shard.ForMember(inc.Member)
	case inc.RequestID != "":
		return shard.PickFor(inc.Counter, inc.RequestID)
	}
	return inc.Pick
}

// seenBefore decides the items whose request id was recorded under an
// earlier shard count of their counter, on the shard PickFor mod that count,
// and returns the others. Those layouts are closed (their shards were
// fenced before the current layout began), so their records no longer
// change and a plain read is exact. It costs one round trip, and only for
// items with a request id on counters resharded within the dedupe window.
func (s *CounterStore) seenBefore(ctx context.Context, incs []shardcounter.Increment, out []shardcounter.Outcome, items []pending) ([]pending, error) {
	type check struct {
		item int // index in items
		cmd  *goredis.FloatCmd
	}
	var checks []check
	var cmds []func(goredis.Pipeliner)
	for j, it := range items {
		inc := incs[it.i]
		if inc.RequestID == "" || len(it.l.hist) == 0 {
			continue
		}
		pick := pickOf(inc)
		for _, p := range it.l.hist {
			if sh := shard.Of(pick, p.n); sh != it.shard {
				key := it.l.keys.ids(sh)
				k := len(checks)
				checks = append(checks, check{item: j})
				cmds = append(cmds, func(pl goredis.Pipeliner) { checks[k].cmd = pl.ZScore(ctx, key, inc.RequestID) })
			}
		}
	}
	if len(checks) == 0 {
		return items, nil
	}
	if _, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, f := range cmds {
			f(p)
		}
		return nil
	}); err != nil && err != goredis.Nil {
		return nil, storeErr("check request ids", err, false)
	}
	now := float64(time.Now().UnixMilli())
	dup := make(map[int]bool)
	for _, c := range checks {
		if exp, err := c.cmd.Result(); err == nil && exp > now {
			dup[c.item] = true
		}
	}
	keep := items[:0]
	for j, it := range items {
		if dup[j] {
			out[it.i].Duplicate = true
			continue
		}
		keep = append(keep, it)
	}
	return keep, nil
}

// slotGroup is the items of one slot: one addScript call, atomic on its
// node, with keys and arguments for each item in batch order; or the
// items of one transaction (txn.go): one txnScript call on the master of
// slot, where all its shards are.
type slotGroup struct {
	slot     int
	txn      bool
	script   *goredis.Script // addScript or txnScript
	items    []pending
	keys     []string
	args     []any
	counters map[string]string // counter id -> its name in the script's arguments
	run      *nodeRun          // where it runs, as run.cmds[at]
	at       int
}

// group puts the planned items into slot groups, keeping batch order
// within a group; on one server every item is in slot 0, one group. The
// items of a transaction form a group of their own, in the slot of its
// first item's shard.
func (a *attempt) group() {
	bySlot := make(map[int]*slotGroup)
	byTxn := make(map[uint64]*slotGroup)
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
		slot := 0
		if a.s.cluster != nil {
			slot = it.l.keys.slot(it.shard)
		}
		txn := a.incs[it.i].Txn
		g := bySlot[slot]
		if txn != 0 {
			g = byTxn[txn]
		}
		if g == nil {
			g = &slotGroup{slot: slot, txn: txn != 0, script: addScript, args: []any{ttl, syncDup}, counters: make(map[string]string)}
			if g.txn {
				g.script = txnScript
				byTxn[txn] = g
			} else {
				bySlot[slot] = g
			}
			a.groups = append(a.groups, g)
		}
		g.add(it, a.incs[it.i], now)
		if it.l.approx() {
			n := len(g.args)
			g.args[n-8], g.args[n-7], g.args[n-3] = a.approxArgs(it.l.keys.shard(it.shard))
		}
	}
}

// add appends an item's keys and arguments to g. The mode tells the
// script what the item is, and aux the key its check reads: a delta on a
// sum counter, a member of a distinct one (aux its member set), a delta
// on a bounded one (aux its bounds key); a windowed counter also names
// its buckets and the bucket the write goes to.
func (g *slotGroup) add(it pending, inc shardcounter.Increment, now time.Time) {
	c, ok := g.counters[inc.Counter]
	if !ok {
		c = strconv.Itoa(len(g.counters))
		g.counters[inc.Counter] = c
	}
	g.items = append(g.items, it)
	k, sk := it.l.keys, it.l.keys.shard(it.shard)
	mode, aux, wb, wi, ws, cut := modeSum, sk, sk, sk, "", ""
	switch {
	case it.l.distinct():
		mode, aux = modeDistinct, k.members(it.shard, it.l.memberGen)
	case it.l.approx():
		mode = modeApprox // its delta, negation and member are set by approxArgs
	case it.l.spec.Bounded():
		mode, aux = modeBounded, k.bounds()
	}
	if w := it.l.spec.Window; w != nil {
		wb, wi = k.buckets(it.shard), k.bucketIndex(it.shard)
		ws, cut = bucketStart(now, w.Bucket), bucketStart(now.Add(-time.Duration(w.Retention)), w.Bucket)
	}
	g.keys = append(g.keys, sk, k.ids(it.shard), aux, wb, wi)
	g.args = append(g.args, it.l.ep(), inc.Delta, negate(inc.Delta), inc.RequestID, c, mode, inc.Member, ws, cut)
}

// bucketStart returns the start, in Unix seconds, of the bucket of width w
// that holds t. Buckets are aligned to the Unix epoch, so day buckets
// start at midnight UTC.
func bucketStart(t time.Time, w shardcounter.Duration) string {
	sec := int64(time.Duration(w) / time.Second)
	u := t.Unix()
	return strconv.FormatInt(u-((u%sec)+sec)%sec, 10)
}

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
		// A transaction's script takes its marker as its one declared key.
		if g.txn || (!s.noMarkers && a.needsMarker(g)) {
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
				a.out[it.i].Err = err
			}
		}
	}
	a.tot = s.queueTotals(ctx, a.nr, a.incs, a.todo, a.ls)
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

// createShards queues on nr what makes the shards of a new counter (and a
// bounded counter's bounds key), each unless its key exists.
func (s *CounterStore) createShards(ctx context.Context, nr *nodeRuns, l *layout) {
	rooms := allowances(make([]int64, l.n), nil)
	for i := range l.n {
		key := l.keys.shard(i)
		nr.add(ctx, key, func(p goredis.Pipeliner) *goredis.Cmd {
			return newShardScript.EvalSha(ctx, p, []string{key}, l.ep(), rooms[i].up, rooms[i].dn)
		})
	}
	if l.spec.Bounded() {
		key, lo, hi := l.keys.bounds(), "", ""
		if l.spec.Min != nil {
			lo = strconv.FormatInt(*l.spec.Min, 10)
		}
		if l.spec.Max != nil {
			hi = strconv.FormatInt(*l.spec.Max, 10)
		}
		nr.add(ctx, key, func(p goredis.Pipeliner) *goredis.Cmd {
			return newBoundsScript.EvalSha(ctx, p, []string{key}, lo, hi)
		})
	}
}
