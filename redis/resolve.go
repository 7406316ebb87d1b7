package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
	"github.com/shardcounter/shardcounter/internal/overflow"
)

// This file is the last phase of a write (see applyOnce in write.go):
// reading what each slot group's script answered, settling replies lost
// on the way back by the group's marker, deciding each item, publishing
// the counters the attempt created, and making room on shards that had
// none. Items not decided go back to Apply to try again.

// resolve decides the items of the groups sent, in batch order of the
// groups, then publishes the new counters and makes room for the cramped
// items, and last takes the totals read after the writes.
func (a *attempt) resolve(ctx context.Context) {
	a.applied = make(map[int]bool)
	a.cramped = make(map[string][]pending)
	for _, g := range a.groups {
		if g.run == nil {
			continue // no node: failed in send
		}
		res, waitErr, err := a.results(ctx, g)
		if err != nil {
			a.failGroup(ctx, g, err)
			continue
		}
		for j, it := range g.items {
			a.settle(it, res[j], waitErr)
		}
	}
	if len(a.fresh) > 0 {
		a.retry = append(a.retry, a.s.publish(ctx, a.fresh, a.items, a.applied, a.out)...)
	}
	a.s.dropStates(ctx, a.dropped)
	slices.Sort(a.retry) // in batch order, as items of one counter apply
	for _, id := range a.crampedOrder {
		a.makeRoom(ctx, id, a.cramped[id])
	}
	slices.Sort(a.retry)
	a.b.take()
}

// result is a script's answer for one item: its code (res*), and for
// resBounds the total the item would have made.
type result struct {
	code  int64
	total int64

	bound   bool  // a bounded item decided by its bound: applied and skipped are set
	applied int64 // bound: the delta the bound let apply (Outcome.Applied)
	skipped bool  // bound: the delta was skipped (Outcome.Skipped)

	limit    *shardcounter.LimitResult // resTake: the decision
	recorded bool                      // resTake: the take wrote (its counter is created)
}

// results returns a group's results, one per item, and the error of the
// WAIT that followed them. When the reply was lost after the script was
// sent, the script may or may not have run: its marker decides (see
// resolveGroup). The rerun is preceded by the commands that create the
// attempt's new counters' shards, which change nothing where the first
// send made them, so that the script finds them whichever way it went.
func (a *attempt) results(ctx context.Context, g *slotGroup) ([]result, error, error) {
	raw, err := g.run.cmds[g.at].Slice()
	waitErr := g.run.waitErr
	if err != nil && lostReply(err) {
		raw, waitErr, err = a.s.resolveGroup(ctx, g.script, g.keys, g.args, err, func(nr *nodeRuns) {
			for _, l := range a.fresh {
				a.s.createShards(ctx, nr, l)
			}
		})
	}
	if err != nil {
		return nil, nil, err
	}
	if len(raw) != len(g.items) {
		return nil, nil, outcomeUnknown("apply", fmt.Errorf("the add script returned %d results for %d items", len(raw), len(g.items)))
	}
	res := make([]result, len(raw))
	for j, v := range raw {
		switch v := v.(type) {
		case int64:
			res[j].code = v
		case string: // resBounds: "8:TOTAL"; resTake (limit.go)
			if strings.HasPrefix(v, "11:") {
				var ok bool
				if res[j], ok = parseTake(v); !ok {
					return nil, nil, outcomeUnknown("apply", fmt.Errorf("the take script returned %q", v))
				}
				continue
			}
			var ok bool
			if res[j], ok = parseResult(v); !ok {
				return nil, nil, outcomeUnknown("apply", fmt.Errorf("the add script returned %q", v))
			}
		}
	}
	return res, waitErr, nil
}

// parseResult reads a result the add script gave as text: resBounds's
// "8:TOTAL", and a bounded item's "CODE:TOTAL:APPLIED:SKIPPED" (TOTAL
// resBounds's, else 0; SKIPPED 1 or 0).
func parseResult(v string) (result, bool) {
	f := strings.Split(v, ":")
	if len(f) != 2 && len(f) != 4 {
		return result{}, false
	}
	var r result
	var err1, err2, err3 error
	r.code, err1 = strconv.ParseInt(f[0], 10, 64)
	r.total, err2 = strconv.ParseInt(f[1], 10, 64)
	if len(f) == 2 {
		return r, err1 == nil && err2 == nil && r.code == resBounds
	}
	r.bound, r.skipped = true, f[3] == "1"
	r.applied, err3 = strconv.ParseInt(f[2], 10, 64)
	return r, err1 == nil && err2 == nil && err3 == nil && (f[3] == "0" || r.skipped)
}

// failGroup handles a group whose script failed as a whole. A retryable
// error (a moved slot, NOSCRIPT, a failover) puts its items back to try
// again, refreshing the cluster's slots once per attempt, and so does a
// transaction's script that met a key its node does not serve. Any other fails
// them with the error of a write (storeErr): outcome unknown unless the
// error proves the script never ran.
func (a *attempt) failGroup(ctx context.Context, g *slotGroup, err error) {
	if retryable(err) || (g.txn && txnNotRun(err)) {
		if !goredis.HasErrorPrefix(err, "NOSCRIPT") && !a.redirected {
			a.redirected = true
			a.s.refresh(ctx, err) // the slot moved: learn where
		}
		for _, it := range g.items {
			a.retry = append(a.retry, it.i)
		}
		return
	}
	a.s.refresh(ctx, err)
	err = storeErr("apply", err, true)
	for _, it := range g.items {
		a.out[it.i] = shardcounter.Outcome{Err: err}
	}
}

// settle records the script's result r for one item. An item applied (or
// unchanged, or a duplicate) on a master whose WAIT fell short gets the
// WAIT's error: it is on the master, perhaps not on its replicas. A stale
// epoch (a reshard), a deferred item, or an approx item whose shard's
// sketch changed since it was read (approx.go) is tried again; an item whose
// shard had no room waits for makeRoom.
func (a *attempt) settle(it pending, r result, waitErr error) {
	x := a.sketchOf(it)
	switch r.code {
	case resStale:
		a.s.forget(it.l.id)
		a.retry = append(a.retry, it.i)
		return
	case resDeferred, resConflict:
		a.retry = append(a.retry, it.i)
		return
	case resNoRoom:
		if r.bound {
			it.need = r.applied // the room the bound's delta needs
		}
		if a.cramped[it.l.id] == nil {
			a.crampedOrder = append(a.crampedOrder, it.l.id)
		}
		a.cramped[it.l.id] = append(a.cramped[it.l.id], it)
		return
	case resGone:
		a.dropped = append(a.dropped, it.l)
		a.retry = append(a.retry, it.i)
		return
	case resRemoved:
		if waitErr != nil {
			a.out[it.i] = shardcounter.Outcome{Err: waitErr} // removed on the master, perhaps not on its replicas: its metadata stays
			return
		}
		a.dropped = append(a.dropped, it.l)
		a.out[it.i] = shardcounter.Outcome{}
		return
	case resTake:
		a.applied[it.i] = r.recorded // a take that writes nothing creates no counter
		if waitErr != nil {
			a.out[it.i] = shardcounter.Outcome{Err: waitErr} // decided on the master, perhaps not on its replicas
			return
		}
		a.out[it.i] = takeOutcome(r)
		return
	case resApplied, resUnchanged, resDuplicate:
		// A bounded item skipped creates no counter (package decide's
		// rule): publish leaves a new one unborn unless another applied.
		a.applied[it.i] = !(r.bound && r.skipped)
		if x != nil && r.code == resApplied {
			x.held = true
			a.b.sketch(x.key, it.i, x.changed)
		}
		if waitErr != nil {
			a.out[it.i] = shardcounter.Outcome{Err: waitErr} // on the master, perhaps not on its replicas
			return
		}
	}
	a.out[it.i] = outcome(r, a.incs[it.i], it.l.spec, x)
}

// outcome is the outcome of an item the script decided, by package
// decide's rules and in its words: the one place where the scripts'
// codes meet the core. An approx item's Unchanged is its shard's, x, as
// decide.SketchShard.Apply computed it.
func outcome(r result, inc shardcounter.Increment, spec shardcounter.Spec, x *shardSketch) shardcounter.Outcome {
	delta := inc.Delta
	if r.bound {
		delta = r.applied
	}
	switch r.code {
	case resApplied:
		if r.bound {
			return shardcounter.Outcome{Applied: &r.applied, Skipped: r.skipped}
		}
		return shardcounter.Outcome{Unchanged: x != nil && !x.changed}
	case resUnchanged:
		return shardcounter.Outcome{Unchanged: true}
	case resDuplicate:
		return shardcounter.Outcome{Duplicate: true}
	case resSkipped:
		return shardcounter.Outcome{Skipped: true}
	case resInt64:
		return shardcounter.Outcome{Err: decide.ErrInt64(inc.Counter, delta)}
	case resBucket:
		return shardcounter.Outcome{Err: decide.ErrBucketInt64(inc.Counter, delta)}
	case resBounds:
		if err := decide.CheckBounds(inc.Counter, spec, delta, r.total); err != nil {
			return shardcounter.Outcome{Err: err}
		}
	}
	return shardcounter.Outcome{Err: outcomeUnknown("apply", fmt.Errorf("the add script returned %d (total %d) for an item on counter %q", r.code, r.total, inc.Counter))}
}

// publish creates the counters of fresh whose first writes applied (see
// applyOnce in write.go): their metadata and index entries, one script each, in one
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
		l            *layout
		run          *nodeRun
		at           int
		meta, bucket string
		args         []any
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
		creates = append(creates, create{l, run, at, meta, bucket, args})
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
		waitErr := c.run.waitErr
		if err != nil && lostReply(err) {
			ok, waitErr, err = s.settleCreate(ctx, c.meta, c.bucket, c.args, c.l.keys.incarnation, err)
		}
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
		case waitErr != nil:
			fail(waitErr)
		default:
			c.l.unborn = false
			s.remember(c.l)
		}
	}
	return retry
}

// makeRoom rebalances the allowances of counter id (see allowance.go),
// whose shards had no room for the items its: one freeze, sized for the
// first of them in batch order. That one, when every item of its counter
// before it is decided, is then decided on the frozen shard values by
// package decide (frozen): the total alone decides. Every other item, and
// that one when it fits, is tried again, unless the counter is gone or the
// freeze failed.
func (a *attempt) makeRoom(ctx context.Context, id string, its []pending) {
	slices.SortFunc(its, func(p, q pending) int { return p.i - q.i })
	first := its[0]
	a.s.stats.rebalances.Add(1)
	d := a.incs[first.i].Delta
	if a.incs[first.i].Bound != nil {
		d = first.need
	}
	vals, _, err := a.s.freeze(ctx, first.l, &need{shard: first.shard, delta: d})
	a.s.forget(id)
	for j, it := range its {
		switch {
		case shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND:
			a.out[it.i] = shardcounter.Outcome{Err: err}
		case err != nil:
			a.out[it.i] = shardcounter.Outcome{Err: shardcounter.Errorf(shardcounter.EUNAVAILABLE, "redis: counter %q: making room for a write of %d failed: %s; the write was not applied", id, a.incs[it.i].Delta, shardcounter.ErrorMessage(err))}
		case j == 0 && vals != nil && a.first(it):
			if o, _ := frozen(it.l, vals, a.incs[it.i]); o.Err != nil {
				a.out[it.i] = o
				continue
			}
			fallthrough
		default:
			a.retry = append(a.retry, it.i)
		}
	}
}

// first reports whether no item of its counter before it waits to be
// tried again.
func (a *attempt) first(it pending) bool {
	for _, i := range a.retry {
		if i < it.i && a.incs[i].Counter == it.l.id {
			return false
		}
	}
	return true
}

// frozen decides inc, as package decide does, on the shard values vals
// that a freeze of its counter took (see freeze): its outcome, and the
// shard write the core would make (on the item's shard, or another with
// room).
func frozen(l *layout, vals []int64, inc shardcounter.Increment) (shardcounter.Outcome, decide.Mutations) {
	var out [1]shardcounter.Outcome
	inc.If = 0 // met: the script found its condition applied (cond.go)
	m, err := decide.Decide(frozenView{l, vals}, decide.Batch{Incs: []shardcounter.Increment{inc}}, out[:])
	if err != nil {
		out[0].Err = err
	}
	return out[0], m
}

// frozenView is a counter's shard values, frozen, as package decide reads
// them. The item decided on it found no room in its script, so its request
// id, if any, was not recorded.
type frozenView struct {
	l    *layout
	vals []int64
}

func (f frozenView) Counter(string) (decide.Counter, error) {
	c := decide.Counter{Exists: true, Spec: f.l.counter().Spec}
	var ok bool
	if c.Total, ok = overflow.Sum(f.vals); !ok {
		c.Sum = decide.SumOverflows
	}
	return c, nil
}

func (f frozenView) Shard(_ string, k int) (int64, bool, error) { return f.vals[k], true, nil }

func (f frozenView) Request(string, string) (time.Time, bool, error) { return time.Time{}, false, nil }

func (f frozenView) Member(string, string) (bool, error) { return false, nil }

func (f frozenView) Bucket(string, time.Time) (int64, bool, error) { return 0, false, nil }

func (f frozenView) Sketch(string, int) ([]byte, error) { return nil, nil }
