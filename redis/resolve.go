package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
)

// This file is the last phase of a write (see applyOnce in write.go):
// reading what each slot group's script answered, settling replies lost
// on the way back by the group's marker, deciding each item, publishing
// the counters the attempt created, and making room on shards that had
// none. Items not decided go back to Apply to try again.

// resolve decides the items of the groups sent, in batch order of the
// groups, then publishes the new counters and makes room for the cramped
// items, and last gives the totals asked for to the decided items.
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
			a.decide(it, res[j], waitErr)
		}
	}
	if len(a.fresh) > 0 {
		a.retry = append(a.retry, a.s.publish(ctx, a.fresh, a.items, a.applied, a.out)...)
	}
	for _, id := range a.crampedOrder {
		a.makeRoom(ctx, id, a.cramped[id])
	}
	slices.Sort(a.retry) // in batch order, as items of one counter apply
	a.tot.give(a.incs, a.out, a.todo, a.retry)
}

// results returns a group's results, one per item, and the error of the
// WAIT that followed them. When the reply was lost after the script was
// sent, the script may or may not have run: its marker decides (see
// resolveGroup). The rerun is preceded by the commands that create the
// attempt's new counters' shards, which change nothing where the first
// send made them, so that the script finds them whichever way it went.
func (a *attempt) results(ctx context.Context, g *slotGroup) ([]int64, error, error) {
	res, err := g.run.cmds[g.at].Int64Slice()
	waitErr := g.run.waitErr
	if err != nil && lostReply(err) {
		res, waitErr, err = a.s.resolveGroup(ctx, g.script, g.keys, g.args, err, func(nr *nodeRuns) {
			for _, l := range a.fresh {
				a.s.createShards(ctx, nr, l)
			}
		})
	}
	if err == nil && len(res) != len(g.items) {
		err = outcomeUnknown("apply", fmt.Errorf("the add script returned %d results for %d items", len(res), len(g.items)))
	}
	return res, waitErr, err
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
		a.out[it.i].Err = err
	}
}

// decide records the script's result r for one item. An item applied (or
// unchanged, or a duplicate) on a master whose WAIT fell short gets the
// WAIT's error: it is on the master, perhaps not on its replicas. A stale
// epoch (a reshard), a deferred item, or an approx item whose shard's
// sketch changed since it was read (approx.go) is tried again; an item whose
// shard had no room waits for makeRoom.
func (a *attempt) decide(it pending, r int64, waitErr error) {
	out, delta := &a.out[it.i], a.incs[it.i].Delta
	switch r {
	case resApplied, resDuplicate:
		if waitErr != nil {
			out.Err = waitErr // on the master, perhaps not on its replicas
			return
		}
		out.Duplicate = r == resDuplicate
		a.applied[it.i] = true
	case resStale:
		a.s.forget(it.l.id)
		a.retry = append(a.retry, it.i)
	case resDeferred, resConflict:
		a.retry = append(a.retry, it.i)
	case resNoRoom:
		if a.cramped[it.l.id] == nil {
			a.crampedOrder = append(a.crampedOrder, it.l.id)
		}
		a.cramped[it.l.id] = append(a.cramped[it.l.id], it)
	case resUnchanged:
		if waitErr != nil {
			out.Err = waitErr
			return
		}
		out.Unchanged = true
		a.applied[it.i] = true
	case resOverflow:
		out.Err = shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it outside the int64 range", it.l.id, delta)
	case resBounds:
		out.Err = shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it outside its bounds %s", it.l.id, delta, boundsString(it.l.spec))
	default:
		out.Err = outcomeUnknown("apply", fmt.Errorf("the add script returned %d", r))
	}
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
			s.remember(c.l)
		}
	}
	return retry
}

// makeRoom rebalances the allowances of counter id (see allowance.go),
// whose shards had no room for the items its: one freeze, sized for the
// first of them. Each item is then tried again, unless the counter is
// gone, the freeze failed, or the total alone shows the item overflows.
func (a *attempt) makeRoom(ctx context.Context, id string, its []pending) {
	first := its[0]
	a.s.stats.rebalances.Add(1)
	vals, _, err := a.s.freeze(ctx, first.l, &need{shard: first.shard, delta: a.incs[first.i].Delta})
	a.s.forget(id)
	for _, it := range its {
		d := a.incs[it.i].Delta
		switch {
		case shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND:
			a.out[it.i].Err = err
		case err != nil:
			a.out[it.i].Err = shardcounter.Errorf(shardcounter.EUNAVAILABLE, "redis: counter %q: making room for a write of %d failed: %s; the write was not applied", id, d, shardcounter.ErrorMessage(err))
		case vals != nil && !fitsTotal(vals, d): // the total alone decides (see level)
			a.out[it.i].Err = shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it outside the int64 range", id, d)
		default:
			a.retry = append(a.retry, it.i)
		}
	}
}
