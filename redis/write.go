package redis

import (
	"context"
	"fmt"
	"slices"
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
				out[i].Err = shardcounter.Errorf(shardcounter.EUNAVAILABLE, "redis: counter %q: its layout or slots kept changing; nothing was applied, try again", incs[i].Counter)
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
// A missing counter with Increment.Create is created by its first write:
// the attempt gives it a new incarnation, creates its shards (on each
// master, in the pipeline before the writes) and applies the writes to
// them; then, when one of its items applied, it publishes the counter:
// one script writes its metadata and index entry unless the id was taken
// meanwhile. Until then the new keys are unreachable, so the writes count
// from the moment the counter exists; a writer that lost the race to
// another's create tries its items again on the winner's counter.
func (s *CounterStore) applyOnce(ctx context.Context, incs []shardcounter.Increment, out []shardcounter.Outcome, todo []int) ([]int, error) {
	ids := make([]string, len(todo))
	for j, i := range todo {
		ids[j] = incs[i].Counter
	}
	ls, err := s.layoutsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	var fresh []*layout // counters this attempt creates, in batch order
	items := make([]pending, 0, len(todo))
	for _, i := range todo {
		inc := incs[i]
		l := ls[inc.Counter]
		if l == nil {
			if inc.Create == nil {
				out[i].Err = notFound(inc.Counter)
				continue
			}
			if err := kindMatches(inc, *inc.Create); err != nil {
				out[i].Err = err // creates nothing
				continue
			}
			l = s.newLayout(inc.Counter, *inc.Create)
			ls[inc.Counter] = l
			fresh = append(fresh, l)
		}
		if err := kindMatches(inc, l.spec); err != nil {
			out[i].Err = err
			continue
		}
		items = append(items, pending{i: i, l: l, shard: shard.Of(pickOf(inc), l.n)})
	}
	if items, err = s.seenBefore(ctx, incs, out, items); err != nil {
		return nil, err
	}

	// Group by slot, keeping batch order within a group.
	type group struct {
		items    []pending
		keys     []string
		args     []any
		counters map[string]string // counter id -> its name in the script's arguments
		run      *nodeRun          // where it runs, as run.cmds[at]
		at       int
	}
	var groups []*group
	bySlot := make(map[int]*group)
	ttl := strconv.FormatInt(time.Duration(s.ttl.Load()).Milliseconds(), 10)
	syncDup := "0"
	if s.waitReplicas > 0 {
		syncDup = "1"
	}
	now := s.now()
	for _, it := range items {
		slot := 0
		if s.cluster != nil {
			slot = it.l.keys.slot(it.shard)
		}
		g := bySlot[slot]
		if g == nil {
			g = &group{args: []any{ttl, syncDup}, counters: make(map[string]string)}
			bySlot[slot] = g
			groups = append(groups, g)
		}
		inc := incs[it.i]
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

	// One pipeline per master (one on a single server), with a WAIT at
	// its end when WaitReplicas is set (see wait.go). The shards of new
	// counters are created first: a master runs its pipeline in order.
	nr := newNodeRuns(s)
	for _, l := range fresh {
		s.createShards(ctx, nr, l)
	}
	for slot, g := range bySlot {
		g.keys = append(g.keys, s.markerKey(slot))
	}
	for _, g := range groups {
		g.run, g.at = nr.add(ctx, g.keys[0], func(p goredis.Pipeliner) *goredis.Cmd { return addScript.EvalSha(ctx, p, g.keys, g.args...) })
		if g.run == nil {
			err := storeErr("apply", nr.err, false)
			for _, it := range g.items {
				out[it.i].Err = err
			}
		}
	}
	tot := s.queueTotals(ctx, nr, incs, todo, ls)
	s.runOnNodes(ctx, nr.runs)
	if err := nr.loadScripts(ctx); err != nil {
		return nil, err
	}

	var retry []int
	applied := make(map[int]bool)         // items applied (or found duplicates) on this attempt
	cramped := make(map[string][]pending) // items whose shard had no room, by counter
	var crampedOrder []string
	redirected := false
	for _, g := range groups {
		if g.run == nil {
			continue // no node: failed above
		}
		res, err := g.run.cmds[g.at].Int64Slice()
		waitErr := g.run.waitErr
		if err != nil && len(fresh) == 0 && lostReply(err) {
			// The script may or may not have run: its marker decides.
			res, waitErr, err = s.resolveGroup(ctx, g.keys, g.args, err)
		}
		if err == nil && len(res) != len(g.items) {
			err = outcomeUnknown("apply", fmt.Errorf("the add script returned %d results for %d items", len(res), len(g.items)))
		}
		if err != nil {
			if retryable(err) {
				if !goredis.HasErrorPrefix(err, "NOSCRIPT") && !redirected {
					redirected = true
					s.refresh(ctx, err) // the slot moved: learn where
				}
				for _, it := range g.items {
					retry = append(retry, it.i)
				}
				continue
			}
			s.refresh(ctx, err)
			err = storeErr("apply", err, true)
			for _, it := range g.items {
				out[it.i].Err = err
			}
			continue
		}
		for j, it := range g.items {
			switch res[j] {
			case resApplied, resDuplicate:
				if waitErr != nil {
					out[it.i].Err = waitErr // on the master, perhaps not on its replicas
					continue
				}
				out[it.i].Duplicate = res[j] == resDuplicate
				applied[it.i] = true
			case resStale:
				s.forget(it.l.id)
				retry = append(retry, it.i)
			case resDeferred:
				retry = append(retry, it.i)
			case resNoRoom:
				if cramped[it.l.id] == nil {
					crampedOrder = append(crampedOrder, it.l.id)
				}
				cramped[it.l.id] = append(cramped[it.l.id], it)
			case resUnchanged:
				if waitErr != nil {
					out[it.i].Err = waitErr
					continue
				}
				out[it.i].Unchanged = true
				applied[it.i] = true
			case resOverflow:
				out[it.i].Err = shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it outside the int64 range", it.l.id, incs[it.i].Delta)
			case resBounds:
				out[it.i].Err = shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it outside its bounds %s", it.l.id, incs[it.i].Delta, boundsString(it.l.spec))
			default:
				out[it.i].Err = outcomeUnknown("apply", fmt.Errorf("the add script returned %d", res[j]))
			}
		}
	}
	if len(fresh) > 0 {
		retry = append(retry, s.publish(ctx, fresh, items, applied, out)...)
	}
	for _, id := range crampedOrder {
		its := cramped[id]
		first := its[0]
		s.stats.rebalances.Add(1)
		vals, err := s.freeze(ctx, first.l, &need{shard: first.shard, delta: incs[first.i].Delta})
		s.forget(id)
		for _, it := range its {
			d := incs[it.i].Delta
			switch {
			case shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND:
				out[it.i].Err = err
			case err != nil:
				out[it.i].Err = shardcounter.Errorf(shardcounter.EUNAVAILABLE, "redis: counter %q: making room for a write of %d failed: %s; the write was not applied", id, d, shardcounter.ErrorMessage(err))
			case vals != nil && !fitsTotal(vals, d): // the total alone decides (see level)
				out[it.i].Err = shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it outside the int64 range", id, d)
			default:
				retry = append(retry, it.i)
			}
		}
	}
	slices.Sort(retry) // in batch order, as items of one counter apply
	tot.give(incs, out, todo, retry)
	return retry, nil
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

// kindMatches refuses a member item on a sum counter and a delta item on
// a distinct one.
func kindMatches(inc shardcounter.Increment, spec shardcounter.Spec) error {
	switch distinct := spec.Kind == shardcounter.KindDistinct; {
	case distinct && inc.Member == "":
		return shardcounter.Errorf(shardcounter.EINVALID, "counter %q counts distinct members: add or remove a member, not a delta", inc.Counter)
	case !distinct && inc.Member != "":
		return shardcounter.Errorf(shardcounter.EINVALID, "counter %q is a sum counter: write a delta, not a member", inc.Counter)
	}
	return nil
}

// pickOf returns the pick that decides an item's shard: a member's hash
// on a distinct counter, so a member is always on one shard; the request
// id's pick, so retries look where the first try recorded it; else the
// caller's.
func pickOf(inc shardcounter.Increment) uint64 {
	switch {
	case inc.Member != "":
		return shard.ForMember(inc.Member)
	case inc.RequestID != "":
		return shard.PickFor(inc.Counter, inc.RequestID)
	}
	return inc.Pick
}

// bucketStart returns the start, in Unix seconds, of the bucket of width w
// that holds t. Buckets are aligned to the Unix epoch, so day buckets
// start at midnight UTC.
func bucketStart(t time.Time, w shardcounter.Duration) string {
	sec := int64(time.Duration(w) / time.Second)
	u := t.Unix()
	return strconv.FormatInt(u-((u%sec)+sec)%sec, 10)
}

func boundsString(spec shardcounter.Spec) string {
	lo, hi := "-inf", "+inf"
	if spec.Min != nil {
		lo = strconv.FormatInt(*spec.Min, 10)
	}
	if spec.Max != nil {
		hi = strconv.FormatInt(*spec.Max, 10)
	}
	return "[" + lo + ", " + hi + "]"
}

// publish creates the counters of fresh whose first writes applied (see
// applyOnce): their metadata and index entries, one script each, in one
// pipeline per master. It returns the items to try again: those of a
// counter whose id another writer took first. A counter none of whose
// items applied is not created; its shard keys are deleted.
func (s *CounterStore) publish(ctx context.Context, fresh []*layout, items []pending, applied map[int]bool, out []shardcounter.Outcome) []int {
	byCounter := make(map[*layout][]int) // applied items of each new counter
	for _, it := range items {
		if applied[it.i] {
			byCounter[it.l] = append(byCounter[it.l], it.i)
		}
	}
	nr := newNodeRuns(s)
	type create struct {
		l   *layout
		run *nodeRun
		at  int
	}
	var creates []create
	for _, l := range fresh {
		if len(byCounter[l]) == 0 {
			s.deleteKeys(ctx, l, l.n) // unreachable: best effort
			continue
		}
		meta, bucket := metaKey(s.prefix, l.id), bucketKey(s.prefix, bucketOf(l.id))
		args := s.metaFields(l)
		run, at := nr.add(ctx, meta, func(p goredis.Pipeliner) *goredis.Cmd {
			return createCounterScript.EvalSha(ctx, p, []string{meta, bucket}, args...)
		})
		creates = append(creates, create{l, run, at})
	}
	s.runOnNodes(ctx, nr.runs)
	_ = nr.loadScripts(ctx)
	var retry []int
	for _, c := range creates {
		fail := func(err error) {
			for _, i := range byCounter[c.l] {
				out[i] = shardcounter.Outcome{Err: err}
			}
		}
		if c.run == nil {
			fail(storeErr("create counter", nr.err, false)) // never sent: the writes are unreachable
			continue
		}
		ok, err := c.run.cmds[c.at].Int()
		switch {
		case err != nil && retryable(err):
			retry = append(retry, byCounter[c.l]...) // not run: the writes are unreachable
			for _, i := range byCounter[c.l] {
				out[i] = shardcounter.Outcome{}
			}
		case err != nil:
			fail(storeErr("create counter", err, true))
		case ok == 0: // another writer created it first: write there
			s.deleteKeys(ctx, c.l, c.l.n)
			retry = append(retry, byCounter[c.l]...)
			for _, i := range byCounter[c.l] {
				out[i] = shardcounter.Outcome{}
			}
		case c.run.waitErr != nil:
			fail(c.run.waitErr)
		default:
			s.remember(c.l)
		}
	}
	return retry
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
