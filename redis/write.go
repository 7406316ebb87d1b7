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
	decided := false // some item applied or was found a duplicate
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
		retry, err := s.applyOnce(ctx, incs, out, todo, &decided)
		if err != nil {
			for _, i := range todo {
				out[i].Err = err
			}
			break
		}
		todo = retry
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
func (s *CounterStore) applyOnce(ctx context.Context, incs []shardcounter.Increment, out []shardcounter.Outcome, todo []int, decided *bool) ([]int, error) {
	ids := make([]string, len(todo))
	for j, i := range todo {
		ids[j] = incs[i].Counter
	}
	ls, err := s.layoutsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	items := make([]pending, 0, len(todo))
	for _, i := range todo {
		inc := incs[i]
		l := ls[inc.Counter]
		if l == nil {
			out[i].Err = notFound(inc.Counter)
			continue
		}
		pick := inc.Pick
		if inc.RequestID != "" {
			pick = shard.PickFor(inc.Counter, inc.RequestID)
		}
		items = append(items, pending{i: i, l: l, shard: shard.Of(pick, l.n)})
	}
	if items, err = s.seenBefore(ctx, incs, out, items, decided); err != nil {
		return nil, err
	}

	// Group by slot, keeping batch order within a group.
	type group struct {
		items    []pending
		keys     []string
		args     []any
		cmd      *goredis.Cmd
		counters map[string]string // counter id -> its name in the script's arguments
	}
	var groups []*group
	bySlot := make(map[int]*group)
	ttl := strconv.FormatInt(time.Duration(s.ttl.Load()).Milliseconds(), 10)
	for _, it := range items {
		slot := 0
		if s.cluster != nil {
			slot = it.l.keys.slot(it.shard)
		}
		g := bySlot[slot]
		if g == nil {
			g = &group{args: []any{ttl}, counters: make(map[string]string)}
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
		g.keys = append(g.keys, it.l.keys.shard(it.shard), it.l.keys.ids(it.shard))
		g.args = append(g.args, it.l.ep(), inc.Delta, negate(inc.Delta), inc.RequestID, c)
	}
	if len(groups) == 1 {
		groups[0].cmd = s.runScript(ctx, addScript, groups[0].keys, groups[0].args...)
	} else if len(groups) > 1 {
		_, _ = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, g := range groups {
				g.cmd = addScript.EvalSha(ctx, p, g.keys, g.args...)
			}
			return nil
		})
	}

	var retry []int
	cramped := make(map[string][]pending) // items whose shard had no room, by counter
	var crampedOrder []string
	for _, g := range groups {
		res, err := g.cmd.Int64Slice()
		if err == nil && len(res) != len(g.items) {
			err = outcomeUnknown("apply", fmt.Errorf("the add script returned %d results for %d items", len(res), len(g.items)))
		}
		if err != nil {
			if retryable(err) {
				if goredis.HasErrorPrefix(err, "NOSCRIPT") {
					if err := s.loadScripts(ctx, g.keys[0]); err != nil {
						return nil, storeErr("load scripts", err, false)
					}
				}
				for _, it := range g.items {
					retry = append(retry, it.i)
				}
				continue
			}
			err = storeErr("apply", err, true)
			for _, it := range g.items {
				out[it.i].Err = err
			}
			continue
		}
		for j, it := range g.items {
			switch res[j] {
			case resApplied:
				*decided = true
			case resDuplicate:
				out[it.i].Duplicate = true
				*decided = true
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
			case resOverflow:
				out[it.i].Err = shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d to shard %d would leave the int64 range", it.l.id, incs[it.i].Delta, it.shard)
			default:
				out[it.i].Err = outcomeUnknown("apply", fmt.Errorf("the add script returned %d", res[j]))
			}
		}
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
			case vals != nil && !fits(vals, it.shard, d):
				out[it.i].Err = shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it outside the int64 range", id, d)
			default:
				retry = append(retry, it.i)
			}
		}
	}
	slices.Sort(retry) // in batch order, as items of one counter apply
	return retry, nil
}

// seenBefore decides the items whose request id was recorded under an
// earlier shard count of their counter, on the shard PickFor mod that count,
// and returns the others. Those layouts are closed (their shards were
// fenced before the current layout began), so their records no longer
// change and a plain read is exact. It costs one round trip, and only for
// items with a request id on counters resharded within the dedupe window.
func (s *CounterStore) seenBefore(ctx context.Context, incs []shardcounter.Increment, out []shardcounter.Outcome, items []pending, decided *bool) ([]pending, error) {
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
		pick := shard.PickFor(inc.Counter, inc.RequestID)
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
			*decided = true
			continue
		}
		keep = append(keep, it)
	}
	return keep, nil
}
