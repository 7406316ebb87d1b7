package expiry

import (
	"context"
	"slices"

	"github.com/shardcounter/shardcounter"
)

// Change is a change of a name's deadline made in the commit of a batch
// of increments (ApplyChanges): Redis's EXPIRE, or PERSIST, joining the
// group commit of the writes around it.
type Change struct {
	Name string
	// At is the new deadline in Unix ms, 0 to remove it. A deadline not
	// after now deletes the name once the batch has committed; one of a
	// transaction (Txn) is written in the commit first, past, and the
	// name deleted only if it landed (deletion).
	At int64
	// Cond is "", "nx", "xx", "gt" or "lt" (shardcounter.ExpireConditionMet),
	// checked against the deadline as this Store sees it: exact for the
	// changes made through it, and another process's within Refresh.
	Cond string
	// Known says that the name holds something once the batch commits: an
	// increment of the batch before the change writes it. Otherwise the
	// store is asked, and a change to a name that holds nothing is not
	// made.
	Known bool
	// If, when not 0, makes the change conditional on increment If-1 of
	// the batch: it is made only if that increment applied and was not
	// skipped (shardcounter.Increment.If, which its items carry, decided
	// in the commit). INCREX's deadline, which a skipped increment leaves
	// as it was. Only a store deciding through package decide takes it.
	If int
	// Txn, when not 0, is the transaction the change belongs to
	// (shardcounter.Increment.Txn), which its items carry: a store that
	// applies a transaction in one step of its own keeps them in it, or
	// refuses them with it (a batch split past a commit's size).
	Txn uint64
}

// ChangeResult is the result of one Change: Set when the deadline
// changed (or the name was deleted), Err when it failed on its own.
type ChangeResult struct {
	Set bool
	Err error
}

// ApplyChanges applies incs as Apply does and, in the same store commit,
// the deadline changes: each is two or three items of the batch (the new
// member of the name's record, the removal of the member it replaces, an
// index entry), so a change costs no commit of its own. A non-nil error
// means the whole batch failed, as for Apply.
func (s *Store) ApplyChanges(ctx context.Context, incs []shardcounter.Increment, chs []Change) ([]shardcounter.Outcome, []ChangeResult, error) {
	ids := make([]string, 0, len(incs)+len(chs))
	for i, inc := range incs {
		if inc.Take != nil && shardcounter.IsLimitKeyID(inc.Counter) {
			continue // a rate limit key's state (the engine's), which has no deadline
		}
		if inc.Create != nil && inc.Create.TTL != 0 {
			c := *inc.Create
			c.TTL = 0
			incs[i].Create = &c
		}
		ids = append(ids, inc.Counter)
	}
	if err := refuse(ids...); err != nil {
		return nil, nil, err
	}
	for _, ch := range chs {
		if err := shardcounter.ValidateName("name", ch.Name); err != nil {
			return nil, nil, err
		}
		ids = append(ids, ch.Name)
	}
	if _, err := s.live(ctx, ids, true); err != nil {
		return nil, nil, err
	}
	release := s.holdShared(ids)
	out, res, err := s.commitChanges(ctx, incs, chs)
	release()
	s.afterWrite()
	return out, res, err
}

// plan is the items of the changes of one batch.
type plan struct {
	items   []shardcounter.Increment
	adds    []int            // per change, its member item in items, or -1
	deletes []deletion       // changes whose deadline is past: their names go after the commit
	conds   []cond           // the items of conditional changes (Change.If)
	final   map[string]entry // each changed name's record after the commit
}

// deletion is a change whose deadline is past: the change (its place in
// the batch) deletes its name once the commit has landed. One of a
// transaction (Change.Txn) also writes its deadline, past, in the
// commit, with the transaction, as a change that does not delete does;
// item is that member's item in the plan's items, -1 for none. Its
// outcome is the transaction's: when the store refuses the transaction
// (a document store's batch split past its commit limit keeps a
// transaction in one part, or refuses it whole) the member's item
// carries the refusal, and the name is not deleted: the change answers
// the refusal as the transaction's other writes do. Once the member
// has landed the name reads as expired, should its deletion fail.
type deletion struct{ change, item int }

// cond is an item of a conditional change: its place in the plan's items
// and the change's in the batch's.
type cond struct{ item, change int }

// commitChanges makes the changes with incs in one Apply. It plans them
// holding the changes' name locks and puts what they will leave in the
// cache before it lets go, so that this Store's next change of a name,
// in a flush committing at the same time, replaces this one's member:
// the flushes of one engine commit side by side while their changes
// stay in the order they were planned in (the later member is the
// newer, and counts, whichever commit lands first). A change that fails
// drops its name from the cache, which reads the record again.
func (s *Store) commitChanges(ctx context.Context, incs []shardcounter.Increment, chs []Change) ([]shardcounter.Outcome, []ChangeResult, error) {
	names := make([]string, len(chs))
	for i, ch := range chs {
		names[i] = ch.Name
	}
	res := make([]ChangeResult, len(chs))
	unlock := s.lockNames(names)
	p, err := s.plan(ctx, chs, res)
	unlock()
	if err != nil {
		return nil, nil, err
	}
	all := incs
	if len(p.items) > 0 {
		all = append(slices.Clip(incs), p.items...)
		err = s.mark(ctx)
	}
	for _, it := range p.conds {
		all[len(incs)+it.item].If = chs[it.change].If
	}
	var out []shardcounter.Outcome
	if err == nil && len(all) > 0 {
		out, err = s.CounterStore.Apply(ctx, all)
	}
	if err != nil {
		for n := range p.final {
			s.cache.drop(n) // the outcome may be unknown
		}
		return nil, nil, err
	}
	unlock = s.lockNames(names)
	defer unlock()
	for i, k := range p.adds {
		if k < 0 {
			continue
		}
		o := out[len(incs)+k]
		switch {
		case o.Err != nil:
			res[i] = ChangeResult{Err: o.Err}
		case o.Skipped:
			res[i] = ChangeResult{} // its increment was skipped: not made
		default:
			continue
		}
		delete(p.final, chs[i].Name)
		s.cache.drop(chs[i].Name)
	}
	for n, e := range p.final {
		s.cache.settle(n, e)
		if e.deadline != 0 {
			s.dueBy(bucket(e.deadline))
		}
	}
	for _, d := range p.deletes {
		i := d.change
		if d.item >= 0 {
			switch o := out[len(incs)+d.item]; {
			case o.Err != nil:
				res[i] = ChangeResult{Err: o.Err} // its transaction was refused, or its part failed: not made
				continue
			case o.Skipped:
				res[i] = ChangeResult{} // its increment was skipped: not made
				continue
			}
		} else if j := chs[i].If - 1; j >= 0 && (j >= len(incs) || out[j].Err != nil || out[j].Skipped) {
			res[i] = ChangeResult{} // its increment was skipped: not made
			continue
		}
		if err := s.deleteName(ctx, chs[i].Name); err != nil {
			res[i] = ChangeResult{Err: err}
			continue
		}
		if err := s.dropRecord(ctx, chs[i].Name); err != nil {
			res[i] = ChangeResult{Err: err}
		}
	}
	return out[:len(incs):len(incs)], res, nil
}

// plan decides, in order, which changes are made and the items that make
// them, from the records as this Store knows them and, for names not
// Known, whether they hold anything.
func (s *Store) plan(ctx context.Context, chs []Change, res []ChangeResult) (*plan, error) {
	names := make([]string, len(chs))
	for i, ch := range chs {
		names[i] = ch.Name
	}
	cur, err := s.states(ctx, names)
	if err != nil {
		return nil, err
	}
	exists, err := s.existAll(ctx, chs)
	if err != nil {
		return nil, err
	}
	now := s.nowMS()
	p := &plan{adds: make([]int, len(chs)), final: make(map[string]entry)}
	gone := make(map[string]bool) // deleted by an earlier change of the batch
	for i, ch := range chs {
		p.adds[i] = -1
		e, ok := p.final[ch.Name]
		if !ok {
			e = cur[i]
		}
		if !exists[i] || gone[ch.Name] || !shardcounter.ExpireConditionMet(ch.Cond, e.deadline, ch.At) {
			continue
		}
		res[i].Set = true
		rec := RecordID(ch.Name)
		past := ch.At != 0 && ch.At <= now
		if past {
			gone[ch.Name] = true
			delete(p.final, ch.Name)
			if ch.Txn == 0 {
				p.deletes = append(p.deletes, deletion{change: i, item: -1})
				continue
			}
		}
		first := len(p.items)
		if e.member != "" {
			p.items = append(p.items, shardcounter.Increment{Counter: rec, Member: e.member, Delta: -1, Txn: ch.Txn})
		}
		m := member(s.stamp(), ch.At)
		if past {
			p.deletes = append(p.deletes, deletion{change: i, item: len(p.items)})
		} else {
			p.adds[i] = len(p.items)
		}
		p.items = append(p.items, shardcounter.Increment{Counter: rec, Member: m, Delta: 1, Create: recordSpec, Txn: ch.Txn})
		next := entry{deadline: ch.At, member: m}
		if ch.At != 0 {
			// An entry this Store added to for the name in the same second
			// is still there: the sweep deletes only entries that are due,
			// and this one is not (a past one's may be gone: it is added
			// again, for the sweep, should the deletion fail).
			next.indexed = bucket(ch.At)
			if next.indexed != e.indexed || past {
				p.items = append(p.items, shardcounter.Increment{Counter: IndexID(next.indexed, ch.Name), Delta: 1, Create: indexSpec, Txn: ch.Txn})
			}
		}
		if !past {
			p.final[ch.Name] = next
		}
		if ch.If != 0 {
			for k := first; k < len(p.items); k++ {
				p.conds = append(p.conds, cond{item: k, change: i})
			}
		}
	}
	for n, e := range p.final {
		// Until the commit lands, the cache keeps the index entry it knew
		// was written: a change planned meanwhile adds to the entry again
		// rather than count on one that may fail (settle).
		prev, _ := s.cache.get(n)
		e.indexed = prev.indexed
		s.cache.put(n, e)
	}
	for _, d := range p.deletes {
		s.cache.drop(chs[d.change].Name)
	}
	return p, nil
}

// existAll reports whether each change's name holds something: true for
// a Known one, else asked of the store, the plain counters in one batch
// read and a hash's fields by name.
func (s *Store) existAll(ctx context.Context, chs []Change) ([]bool, error) {
	out := make([]bool, len(chs))
	var ask []int
	for i, ch := range chs {
		out[i] = ch.Known
		if !ch.Known {
			ask = append(ask, i)
		}
	}
	for lo := 0; lo < len(ask); lo += shardcounter.MaxReadBatch {
		part := ask[lo:min(lo+shardcounter.MaxReadBatch, len(ask))]
		ids := make([]string, len(part))
		for j, i := range part {
			ids[j] = chs[i].Name
		}
		rs, err := s.CounterStore.ReadCounters(ctx, ids)
		if err != nil {
			return nil, err
		}
		for j, i := range part {
			if rs[j] != nil {
				out[i] = true
				continue
			}
			if out[i], err = s.hashExists(ctx, chs[i].Name); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// hashExists reports whether name is a hash with a field.
func (s *Store) hashExists(ctx context.Context, name string) (bool, error) {
	cs, err := s.CounterStore.ListCounters(ctx, shardcounter.HashFieldPrefix(name), "", 2)
	if err != nil {
		return false, err
	}
	for _, c := range cs {
		if _, field, _ := shardcounter.SplitHashID(c.ID); field != "" {
			return true, nil
		}
	}
	return false, nil
}

// lockNames takes the name locks of names, each stripe once and in
// order, and returns their release.
func (s *Store) lockNames(names []string) func() {
	if len(names) == 0 {
		return func() {}
	}
	ks := make([]int, len(names))
	for i, n := range names {
		ks[i] = s.lockIndex(n)
	}
	slices.Sort(ks)
	ks = slices.Compact(ks)
	for _, k := range ks {
		s.locks[k].Lock()
	}
	return func() {
		for _, k := range ks {
			s.locks[k].Unlock()
		}
	}
}

// change makes one change on its own: one commit.
func (s *Store) change(ctx context.Context, ch Change) (bool, error) {
	_, res, err := s.ApplyChanges(ctx, nil, []Change{ch})
	if err != nil {
		return false, err
	}
	return res[0].Set, res[0].Err
}
