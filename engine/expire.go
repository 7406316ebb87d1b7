package engine

import (
	"context"
	"slices"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/expiry"
)

var _ shardcounter.Expirer = (*Engine)(nil)

// ExpireCounter gives name a deadline (shardcounter.Expirer) as a write
// of the group commit (Write.Expire). A cached read may show an expired
// counter for up to its staleness bound; strong reads never do.
func (e *Engine) ExpireCounter(ctx context.Context, name string, at time.Time) (bool, error) {
	return e.change(ctx, name, shardcounter.ExpireChange{At: max(at.UnixMilli(), 1)})
}

// PersistCounter removes name's deadline (shardcounter.Expirer), as a
// write of the group commit.
func (e *Engine) PersistCounter(ctx context.Context, name string) (bool, error) {
	return e.change(ctx, name, shardcounter.ExpireChange{Cond: "xx"})
}

func (e *Engine) change(ctx context.Context, name string, x shardcounter.ExpireChange) (bool, error) {
	res, err := e.WriteCounter(ctx, shardcounter.Write{Counter: name, Expire: &x})
	if err != nil {
		return false, err
	}
	return res.Applied, nil
}

// CounterTTL reports name's deadline (shardcounter.Expirer).
func (e *Engine) CounterTTL(ctx context.Context, name string) (*shardcounter.TTL, error) {
	return e.store.CounterTTL(ctx, name)
}

// splitChanges takes the deadline changes (Write.Expire) out of a batch's
// calls: they are not increments to fold, but items the expiry store adds
// to the commit (expiry.Store.ApplyChanges). Each is Known when a write
// before it in the batch (or an async sum) writes its name.
func splitChanges(b *batch) ([]*call, []*call, []expiry.Change) {
	var n int
	for _, c := range b.calls {
		if c.w.Expire != nil {
			n++
		}
	}
	if n == 0 {
		return b.calls, nil, nil
	}
	calls := make([]*call, 0, len(b.calls)-n)
	changes := make([]*call, 0, n)
	chs := make([]expiry.Change, 0, n)
	written := make(map[string]bool)
	for k := range b.sums {
		written[shardcounter.NameOf(k.counter)] = true
	}
	var last *call // the last increment kept
	for i, c := range b.calls {
		if c.w.Expire == nil {
			calls = append(calls, c)
			last = c
			written[shardcounter.NameOf(c.w.Counter)] = true
			continue
		}
		if c.w.Expire.AfterBound && i > 0 {
			// INCREX's deadline: made only if its bounded write, the call
			// before it in its joined run, is not skipped.
			if p := b.calls[i-1]; p.w.Bound != nil && p.w.JoinNext && p.w.Counter == c.w.Counter {
				c.cond = p
			}
		}
		// A transaction that ends with a change ends, among the
		// increments, at its last one: fold reads a transaction's
		// extent from JoinNext, and must not run it on into the next
		// writer's increments.
		if !c.w.JoinNext && last != nil && last.w.JoinNext {
			last.w.JoinNext = false
		}
		changes = append(changes, c)
		chs = append(chs, expiry.Change{Name: c.w.Counter, At: c.w.Expire.At, Cond: c.w.Expire.Cond, Known: written[c.w.Counter], Txn: c.txn})
	}
	return calls, changes, chs
}

// markChangeTxns marks each write of a transaction (a run of calls
// joined by JoinNext) that holds a deadline change with the transaction's
// Txn, its first call's place in the batch plus one: fold gives it to the
// transaction's increments and splitChanges to its changes, whose records
// the expiry store then writes with it. A store that applies a
// transaction in one step and takes the deadline changes in it (a
// shardcounter.TxnApplier that is no TxnScripter: Firestore, Datastore,
// which split a batch too large for one commit) keeps them in the
// transaction's step, or refuses them with it; unmarked, a split could
// commit them in another part, or one transaction's changes in several.
// INCREX's deadline alone with its bounded write is no such transaction:
// the change is conditional on the write (Increment.If), which keeps
// them together.
func markChangeTxns(calls []*call) {
	for lo := 0; lo < len(calls); {
		hi := lo + 1 // the run is calls[lo:hi]
		for hi < len(calls) && calls[hi-1].w.JoinNext {
			hi++
		}
		run := calls[lo:hi]
		hasChange := slices.ContainsFunc(run, func(c *call) bool { return c.w.Expire != nil })
		increx := len(run) == 2 && run[0].w.Bound != nil && run[1].w.Expire != nil && run[1].w.Expire.AfterBound
		if len(run) > 1 && hasChange && !increx {
			for _, c := range run {
				c.txn = uint64(run[0].seq) + 1
			}
		}
		lo = hi
	}
}

// finishChanges gives each deadline change's call its result.
func (e *Engine) finishChanges(changes []*call, res []expiry.ChangeResult, err error) {
	for i, c := range changes {
		c.res = shardcounter.WriteResult{Counter: c.w.Counter}
		switch {
		case err != nil:
			c.err = err
		case res[i].Err != nil:
			c.err = res[i].Err
		default:
			c.res.Applied = res[i].Set
		}
		if c.err != nil {
			e.stats.failed(c.err, 1)
		} else {
			e.stats.Writes.Add(1)
		}
	}
}

// deferredChange is a deadline change of a transaction that also writes
// increments, on a store that applies a transaction in one step of its own
// (shardcounter.TxnScripter: a Redis Cluster store). The change's records
// live in other slots than the transaction's counters, so they cannot
// join its one script; they are committed after it, and only if every
// increment of the transaction applied.
type deferredChange struct {
	c     *call
	ch    expiry.Change
	chain []*call // the transaction's increments
}

// txnIncrements maps each deadline change of a transaction that also
// writes increments to those increments, when the store applies a
// transaction by a script of its own (shardcounter.TxnScripter); nil
// otherwise. INCREX's deadline
// alone with its bounded write (Expire.AfterBound) is no such
// transaction: its increment is not a transaction's (splitChanges ends
// the run before the change), and the change joins the first commit,
// conditional on it (setConds), which the store decides with it.
func (e *Engine) txnIncrements(all []*call) map[*call][]*call {
	if !e.txnScripts {
		return nil
	}
	var incsOf map[*call][]*call
	var chain []*call
	for i, c := range all {
		chain = append(chain, c)
		if c.w.JoinNext && i < len(all)-1 {
			continue
		}
		var incs []*call
		for _, m := range chain {
			if m.w.Expire == nil {
				incs = append(incs, m)
			}
		}
		for _, m := range chain {
			if m.w.Expire != nil && len(incs) > 0 && !(m.w.Expire.AfterBound && len(incs) == 1 && incs[0].w.Bound != nil) {
				if incsOf == nil {
					incsOf = make(map[*call][]*call)
				}
				incsOf[m] = incs
			}
		}
		chain = nil
	}
	return incsOf
}

// deferTxnChanges takes out of changes (and chs) those incsOf names, to
// commit after their transactions; the others stay for the first commit.
func deferTxnChanges(incsOf map[*call][]*call, changes []*call, chs []expiry.Change) ([]*call, []expiry.Change, []deferredChange) {
	if len(incsOf) == 0 {
		return changes, chs, nil
	}
	var keep []*call
	var keepChs []expiry.Change
	var later []deferredChange
	for i, c := range changes {
		if incs, ok := incsOf[c]; ok {
			later = append(later, deferredChange{c: c, ch: chs[i], chain: incs})
			continue
		}
		keep, keepChs = append(keep, c), append(keepChs, chs[i])
	}
	return keep, keepChs, later
}

// commitDeferred commits the deferred changes whose transaction applied
// whole, and gives the others the error of the transaction's first
// refused increment (a CROSSSLOT refusal, say): nothing of it applied.
func (e *Engine) commitDeferred(ctx context.Context, later []deferredChange) {
	cs := &changeSet{}
	for _, d := range later {
		var err error
		for _, m := range d.chain {
			if m.err != nil {
				err = m.err
				break
			}
		}
		if err != nil {
			d.c.res, d.c.err = shardcounter.WriteResult{Counter: d.c.w.Counter}, err
			continue
		}
		cs.calls, cs.chs = append(cs.calls, d.c), append(cs.chs, d.ch)
	}
	if len(cs.calls) > 0 {
		e.commit(ctx, nil, cs)
	}
}
