package redis

import "github.com/shardcounter/shardcounter"

// Conditional items (Increment.If, INCREX's deadline records): item i
// applies only if item If-1 of the batch applied and was not skipped
// (package decide's rule); otherwise it is Skipped and applies nothing.
//
// The script decides the condition when both items are in its call: it
// answers the condition's item first (the calls apply their items in
// batch order) and then, for the conditional one, resSkipped when that
// item failed or was skipped, resDeferred (with the later items of its
// counter) when that item is to be tried again, else it goes on as any
// item. So on one server, where every plain item of a batch is in one
// call, an INCREX that is skipped leaves its deadline as it was in the
// same atomic step. Go decides the condition itself when the item it is
// on was decided by an earlier attempt (the item is then sent as a plain
// one, or Skipped); in every other case (the two in different calls: on
// a cluster, in different slots; a take or a transaction's item) the
// conditional item waits for the next attempt, with the later items of
// its counter, which then finds its condition decided. It waits too when
// it is of a kind whose call computes something from it before the
// script runs (an approx item, whose shard's new sketch would hold its
// member), and when its counter would refuse it (missing, another kind):
// decide says Skipped before anything else, so its outcome waits for the
// condition's; so does an invalid conditional item's refusal
// (batch.refuse), which Go gives it once its condition is met.

// refuse keeps the refusal of conditional item i (invalid) for when its
// condition is met.
func (b *batch) refuse(i int, err error) {
	if b.invalid == nil {
		b.invalid = make(map[int]error)
	}
	b.invalid[i] = err
}

// validIf checks a conditional item's own part: not in a transaction,
// whose script reserves each item's delta before it applies any.
func validIf(inc shardcounter.Increment) error {
	if inc.Txn != 0 {
		return shardcounter.Errorf(shardcounter.EINVALID, "redis: an item conditional on another (counter %q) cannot be part of a transaction", inc.Counter)
	}
	return nil
}

// condBefore reports whether item i's condition names an item before it,
// as decide requires.
func condBefore(i int, inc shardcounter.Increment) error {
	if j := inc.If - 1; inc.If != 0 && (j < 0 || j >= i) {
		return shardcounter.Errorf(shardcounter.EINVALID, "item %d is conditional on item %d, which is not before it", i, j)
	}
	return nil
}

// condition decides, in plan, what item i's condition asks of the
// attempt (see above): it reports whether i is planned now, as a plain
// item (cond 0) or conditional on item cond-1 of the same call, where
// sent has the call of each item planned so far. When it is not, i's
// outcome is in out, or i waits for the next attempt.
func (a *attempt) condition(i int, pend map[int]bool, sent map[int]groupKey) (planned bool, cond int) {
	inc := a.incs[i]
	if inc.If == 0 {
		return true, 0
	}
	j := inc.If - 1
	if !pend[j] || a.out[j].Err != nil {
		// Decided: by an earlier attempt, or by this one's plan.
		switch err := a.b.invalid[i]; {
		case a.out[j].Err != nil || a.out[j].Skipped:
			a.out[i] = shardcounter.Outcome{Skipped: true}
		case err != nil:
			a.out[i] = shardcounter.Outcome{Err: err}
		default:
			return true, 0
		}
		return false, 0
	}
	if a.b.invalid[i] != nil {
		a.retry = append(a.retry, i) // refused, or skipped: after its condition
		return false, 0
	}
	gj, in := sent[j]
	if !in || gj.take || gj.txn != 0 || inc.Take != nil || a.waiting[inc.Counter] {
		a.wait(inc.Counter, i)
		return false, 0
	}
	var spec shardcounter.Spec
	switch l := a.ls[inc.Counter]; {
	case l != nil:
		spec = l.counter().Spec
	case inc.Create != nil:
		spec = *inc.Create
	default:
		a.wait(inc.Counter, i) // not found, unless its condition fails
		return false, 0
	}
	if spec.Kind == shardcounter.KindApprox || a.s.checkItem(inc, spec) != nil {
		a.wait(inc.Counter, i)
		return false, 0
	}
	return true, inc.If
}

// sameCall keeps a conditional item planned (p, its condition in the
// same call as it) only when its condition's call is its own: else it
// waits. It reports whether p stays.
func (a *attempt) sameCall(p *pending, sent map[int]groupKey) bool {
	g := a.groupOf(*p)
	if p.cond != 0 && sent[p.cond-1] != g {
		p.cond = 0
		a.wait(a.incs[p.i].Counter, p.i)
		return false
	}
	sent[p.i] = g
	return true
}

// groupOf returns the call a planned item goes in: its transaction's, or
// on a cluster its shard's slot's.
func (a *attempt) groupOf(p pending) groupKey {
	g := p.g
	g.txn = a.incs[p.i].Txn
	if a.s.cluster != nil && g.txn == 0 {
		g.slot = p.l.keys.slot(p.shard)
	}
	return g
}
