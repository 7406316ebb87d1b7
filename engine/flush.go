package engine

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/expiry"
)

// changeSet is the deadline changes of a batch, with their calls.
type changeSet struct {
	calls []*call
	chs   []expiry.Change
}

// withLinked splits cs, for a paced commit of due, into the changes that
// go with it and those that wait for a later one: those l links to a
// counter of rest (a transaction's, whose increments wait) and to none of
// due. Either is nil when it holds no change.
func (cs *changeSet) withLinked(due, rest []*group, l links) (now, later *changeSet) {
	if cs == nil {
		return nil, nil
	}
	if len(l) == 0 || len(rest) == 0 {
		return cs, nil
	}
	waiting := make(map[string]bool)
	for _, g := range rest {
		waiting[l.root(g.inc.Counter)] = true
	}
	for _, g := range due {
		delete(waiting, l.root(g.inc.Counter))
	}
	now, later = &changeSet{}, &changeSet{}
	for i, c := range cs.calls {
		to := now
		if waiting[l.root(c.w.Counter)] {
			to = later
		}
		to.calls, to.chs = append(to.calls, c), append(to.chs, cs.chs[i])
	}
	if len(now.calls) == 0 {
		now = nil
	}
	if len(later.calls) == 0 {
		later = nil
	}
	return now, later
}

// flush applies a batch and gives every call its result, within one
// deadline, FlushTimeout, for all the store calls it makes: the writers of
// a slow store hear the store's own answer for an expired context
// (unavailable, or outcome unknown) rather than that of their own
// deadline, whatever the flush had to retry.
//
// An item refused because its counter is missing, although it asked the
// store to create it, comes from a store that does not create on write: the
// counter is created once for the flush and the item retried. A folded
// item refused as out of range is retried one write at a time, in the
// order the writes came, so that only the writes that do not fit are
// refused; so is a single write refused as out of range when a later item
// of the same commit moved its counter (a decrease under a ceiling).
//
// It returns the number of increments its first commit sent: how broad
// the batch was, after folding.
func (e *Engine) flush(b *batch) int {
	incsOf := e.txnIncrements(b.calls)
	if e.txns && !e.txnScripts {
		markChangeTxns(b.calls)
	}
	calls, changes, chs := splitChanges(b)
	changes, chs, later := deferTxnChanges(incsOf, changes, chs)
	groups := increasesFirst(foldSums(fold(calls, e.create, e.txns), b.sums, e.create))
	var cs *changeSet
	if len(chs) > 0 {
		cs = &changeSet{calls: changes, chs: chs}
	}
	items := len(groups) + len(chs)
	ctx := context.Background()
	var bt *batchTrace
	if e.cfg.Tracer != nil {
		ctx, bt = e.traceBatch(ctx, b)
	}
	if e.pacer == nil {
		e.commit(ctx, groups, cs)
	} else {
		items = e.commitPaced(ctx, groups, cs, txnLinks(b.calls))
	}
	if later != nil {
		e.commitDeferred(ctx, later)
	}
	if bt != nil {
		bt.end(items)
	}
	b.values.note(b.calls)
	return items
}

// commitPaced commits groups as the pacer lets them: those whose counter
// has a shard due now at once, the others when one is (see pacer), a
// transaction's whole (the counters l links) when all of them are; the
// deadline changes cs go with the first commit, but a transaction's go
// with its increments. It returns the increments of its first commit.
func (e *Engine) commitPaced(ctx context.Context, groups []*group, cs *changeSet, l links) int {
	items := -1
	if cs != nil && len(groups) == 0 {
		e.commit(ctx, nil, cs)
		return len(cs.chs)
	}
	for len(groups) > 0 {
		tctx, cancel := context.WithTimeout(ctx, e.cfg.FlushTimeout)
		due, rest, wait := e.pacer.take(tctx, groups, l)
		cancel()
		var now *changeSet
		now, cs = cs.withLinked(due, rest, l)
		if len(due) > 0 || now != nil {
			if items < 0 {
				items = len(due)
			}
			e.commit(ctx, due, now)
			e.pacer.committed(due)
		}
		groups = rest
		if len(groups) > 0 && wait > 0 {
			e.stats.PaceWaitNanos.Add(int64(wait))
			time.Sleep(wait)
		}
	}
	return max(items, 0)
}

// commit applies groups with the store, retrying what a store that does
// not create on write, or a folded write out of range, needs retried, and
// gives every call its result, all within one FlushTimeout. The deadline
// changes cs, when not nil, go in its first store call. ctx holds the
// batch's span, when traced, and no deadline.
func (e *Engine) commit(ctx context.Context, groups []*group, cs *changeSet) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.FlushTimeout)
	defer cancel()
	for len(groups) > 0 || cs != nil {
		out := e.apply(ctx, groups, cs)
		cs = nil
		moved := make(map[string]int) // counter → index of its last applied item
		for i, o := range out {
			if o.Err == nil && !o.Duplicate {
				moved[groups[i].inc.Counter] = i
			}
		}
		var retry []*group
		var singles []*group
		var missing []*group // one per counter to create
		seen := make(map[string]bool)
		for i, g := range groups {
			o := out[i]
			switch {
			case o.Err == nil:
				e.finish(g, o, nil)
			case g.inc.Create != nil && !g.created && errors.Is(o.Err, shardcounter.ErrNotFound):
				if !seen[g.inc.Counter] {
					seen[g.inc.Counter] = true
					missing = append(missing, g)
				}
				g.created = true
				retry = append(retry, g)
			case !g.single && g.inc.Txn == 0 && len(g.calls) > 0 && errors.Is(o.Err, shardcounter.ErrOutOfRange) &&
				(len(g.calls) > 1 || moved[g.inc.Counter] > i):
				for _, c := range g.calls {
					singles = append(singles, &group{inc: e.create.increment(c.w), calls: []*call{c}, created: g.created, single: true})
				}
			default:
				e.finish(g, o, o.Err)
			}
		}
		failed := e.createMissing(ctx, missing)
		groups = groups[:0]
		for _, g := range retry {
			if err := failed[g.inc.Counter]; err != nil {
				e.finish(g, shardcounter.Outcome{}, err)
			} else {
				groups = append(groups, g)
			}
		}
		slices.SortFunc(singles, func(a, b *group) int { return a.calls[0].seq - b.calls[0].seq })
		groups = append(groups, singles...)
	}
}

// apply sends groups' increments to the store in one store.Apply, with
// the deadline changes cs in the same commit when not nil (giving their
// calls their results), and returns one outcome per group: the store's,
// or the error of the whole call. The call is a commit the engine's
// observers hear of (observe), before any of its writers is answered.
func (e *Engine) apply(ctx context.Context, groups []*group, cs *changeSet) []shardcounter.Outcome {
	incs := make([]shardcounter.Increment, len(groups))
	writes := 0
	for i, g := range groups {
		incs[i] = g.inc
		writes += len(g.calls) + int(g.writes)
	}
	if cs != nil {
		writes += len(cs.calls)
		setConds(groups, cs)
	}
	c := &shardcounter.Commit{Op: shardcounter.CommitBatch, Incs: incs, Writes: writes}
	e.observe(ctx, c, func(ctx context.Context) error {
		start := time.Now()
		var out []shardcounter.Outcome
		var err error
		if cs != nil {
			var res []expiry.ChangeResult
			out, res, err = e.store.ApplyChanges(ctx, incs, cs.chs)
			e.finishChanges(cs.calls, res, err)
		} else {
			out, err = e.store.Apply(ctx, incs)
		}
		took := time.Since(start)
		e.stats.FlushNanos.Add(int64(took))
		e.stats.Flushes.Add(1)
		e.stats.Items.Add(int64(len(incs)))
		c.Outcomes, err = outcomes(incs, out, err)
		if e.cfg.OnFlush != nil {
			e.cfg.OnFlush(FlushEvent{Writes: writes, Items: len(incs), Duration: took, Err: err})
		}
		return err
	})
	return c.Outcomes
}

// setConds makes each deadline change of cs that goes with a bounded
// write (call.cond) conditional on that write's increment among groups
// (expiry.Change.If), so that the store makes it only if the increment
// is not skipped. A bounded write is a group of its own (fold). One that
// is not among groups (a store call that does not carry it) leaves its
// change unconditional: only a store that decides bounds carries a
// condition, and those commit a batch's increments in one call.
func setConds(groups []*group, cs *changeSet) {
	var at map[*call]int
	for k, c := range cs.calls {
		if c.cond == nil {
			continue
		}
		if at == nil {
			at = make(map[*call]int)
			for i, g := range groups {
				if g.inc.Bound != nil && len(g.calls) == 1 {
					at[g.calls[0]] = i + 1
				}
			}
		}
		cs.chs[k].If = at[c.cond]
	}
}

// outcomes returns the outcomes of an Apply of incs that returned out and
// err: out, or the error of the whole call on each item, and that error
// (one of its own when the store answered with the wrong number).
func outcomes(incs []shardcounter.Increment, out []shardcounter.Outcome, err error) ([]shardcounter.Outcome, error) {
	if err == nil && len(out) != len(incs) {
		err = shardcounter.Errorf(shardcounter.EINTERNAL, "store returned %d outcomes for %d increments", len(out), len(incs))
	}
	if err != nil {
		out = make([]shardcounter.Outcome, len(incs))
		for i := range out {
			out[i].Err = err
		}
	}
	return out, err
}

// observe makes the store call call, which c describes, a commit the
// engine's observers (Config.Observers, then the rankings) hear of, with
// the engine's clock around it, and returns its error. It is the one
// place the write paths tell anyone of what they changed.
func (e *Engine) observe(ctx context.Context, c *shardcounter.Commit, call func(context.Context) error) error {
	return shardcounter.Observe(ctx, e.obs, e.cfg.Now, c, call)
}

// createMissing creates, with the spec its increment asked for, the
// counter of each group, for a store that did not create it on write. It
// returns the error of each counter it could not create.
func (e *Engine) createMissing(ctx context.Context, missing []*group) map[string]error {
	var failed map[string]error
	for _, g := range missing {
		err := e.observe(ctx, &shardcounter.Commit{Op: shardcounter.CommitCreate, Counter: g.inc.Counter}, func(ctx context.Context) error {
			_, err := e.store.CreateCounter(ctx, g.inc.Counter, *g.inc.Create)
			return err
		})
		if err != nil && !errors.Is(err, shardcounter.ErrExists) {
			if failed == nil {
				failed = make(map[string]error)
			}
			failed[g.inc.Counter] = err
		}
	}
	return failed
}

// finish gives each of g's calls its result and counts g's writes in
// Stats. It is called once per group.
func (e *Engine) finish(g *group, o shardcounter.Outcome, err error) {
	for _, c := range g.calls {
		c.res = shardcounter.WriteResult{Counter: c.w.Counter, Applied: err == nil && !o.Duplicate, Duplicate: err == nil && o.Duplicate}
		if c.w.Present != nil {
			c.res.Member = c.w.Member
			if c.res.Applied {
				changed := !o.Unchanged
				c.res.Changed = &changed
			}
		}
		if err == nil {
			c.res.Limit, c.res.AppliedDelta = o.Limit, o.Applied
			c.res.Removed = g.inc.Take != nil && g.inc.Take.Remove && !o.Skipped
		}
		if (c.w.WantValue || c.w.Bound != nil) && err == nil && o.Total != nil {
			v := *o.Total
			c.res.Value = &v
		}
		c.err = err
		switch {
		case err != nil:
			e.stats.failed(err, 1)
		case o.Duplicate:
			e.stats.Duplicates.Add(1)
		default:
			e.stats.Writes.Add(1)
		}
	}
	if err == nil && g.inc.Take != nil {
		e.noteTake(g, o)
	}
	switch {
	case g.writes == 0:
	case err != nil:
		e.stats.failed(err, g.writes)
	default:
		e.stats.Writes.Add(g.writes)
	}
	if err != nil && e.cfg.Durability == Async {
		e.lost(int64(len(g.calls))+g.writes, g.inc.Counter, err)
	}
}

// asyncLogEvery bounds how often lost async writes are logged, so that a
// store outage under load gives a line a second, not one per flush.
const asyncLogEvery = time.Second

// lost records async writes whose commit failed after they were answered:
// nobody is waiting for their error, so it goes to Stats and the log. Only
// the flusher calls it.
func (e *Engine) lost(n int64, counter string, err error) {
	e.stats.AsyncLost.Add(n)
	e.suppressed += n
	now := time.Now()
	if now.Sub(e.lastLog) < asyncLogEvery {
		return
	}
	e.cfg.Logger.Error("async writes failed to commit after they were acknowledged",
		"writes", e.suppressed, "counter", counter, "error", err,
		"outcome_unknown", shardcounter.IsOutcomeUnknown(err))
	e.lastLog, e.suppressed = now, 0
}
