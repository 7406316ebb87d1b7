package redis

import (
	"math"
	"math/bits"
	"strconv"

	"github.com/shardcounter/shardcounter"
)

// order keeps each counter's items in batch order across the attempt's
// script calls. The items of one call apply in order, but calls on
// different masters run at once, and a transaction's call apart from the
// others, so an item must not apply before an earlier item of its counter
// in another call whose outcome it could change: one of a bounded
// counter, of the same member, request id, or approx shard (whose sketch
// one call sets). Such an item waits for the next attempt, with the later
// items of its counter. An unbounded sum's items do not wait, which would
// cost a round trip a shard: each reserves room for the earlier items of
// its counter in other calls, so that the script applies it only when its
// shard's allowance (allowance.go) also covers them. Then every order in
// which the calls run keeps the total in range, and an earlier item that
// finds no room is decided, after the rebalance, as batch order decides
// it. In one call, an approx item with the request id of an earlier one
// waits too: its shard's sketch is computed before the script tells a
// duplicate.
func (a *attempt) order() {
	one := true // every item in one call, the first's: nothing to order
	for j := range a.items {
		it := &a.items[j]
		it.g = a.groupOf(*it)
		one = one && it.g == a.items[0].g && !(it.l.approx() && a.incs[it.i].RequestID != "")
	}
	for _, i := range a.retry {
		one = one && a.incs[i].Txn == 0
	}
	if one {
		return
	}
	held := make(map[uint64]bool) // transactions that wait: all their items do
	for _, i := range a.retry {
		held[a.incs[i].Txn] = true
	}
	for {
		keep, wait, more := a.orderOnce(held)
		if !more {
			a.items, a.retry = keep, append(a.retry, wait...)
			return
		}
	}
}

// orderOnce is one pass of order. It reports more when it found a
// transaction to wait that held did not list: its items wait, and so do
// the later items of their counters, so the pass runs again.
func (a *attempt) orderOnce(held map[uint64]bool) (keep []pending, wait []int, more bool) {
	sent := make(map[*layout][]int) // each counter's items kept, as indexes into keep
	blocked := make(map[*layout]bool)
	waited := make(map[int]bool) // by batch index: a conditional item waits with its condition
	keep = make([]pending, 0, len(a.items))
	for _, it := range a.items {
		t := it.g.txn
		if t != 0 && held[t] || blocked[it.l] || it.cond != 0 && waited[it.cond-1] || a.waits(&it, keep, sent[it.l]) {
			blocked[it.l] = true
			waited[it.i] = true
			wait = append(wait, it.i)
			if t != 0 && !held[t] {
				held[t], more = true, true
			}
			continue
		}
		sent[it.l] = append(sent[it.l], len(keep))
		keep = append(keep, it)
	}
	return keep, wait, more
}

// waits reports whether item it waits for an earlier item of its counter,
// prior (indexes into items); when it does not, it sets it.res.
func (a *attempt) waits(it *pending, items []pending, prior []int) bool {
	inc := a.incs[it.i]
	if inc.Take != nil || shardcounter.IsLimitKeyID(it.l.id) {
		// A take reads every shard of its key's state: after the earlier
		// items of its counter in other calls, then.
		for _, k := range prior {
			if items[k].g != it.g {
				return true
			}
		}
		return false
	}
	var up, down uint64 // the room the earlier items elsewhere may take
	for _, k := range prior {
		p := &items[k]
		pinc := a.incs[p.i]
		sameID := inc.RequestID != "" && pinc.RequestID == inc.RequestID
		if p.g == it.g {
			if sameID && it.l.approx() {
				return true
			}
			continue
		}
		switch {
		case sameID, it.l.spec.Bounded(), it.l.distinct() && pinc.Member == inc.Member, it.l.approx() && p.shard == it.shard:
			return true
		case pinc.Delta > 0:
			up = addSat(up, uint64(pinc.Delta))
		case pinc.Delta < 0:
			down = addSat(down, uint64(-pinc.Delta)) // -MinInt64 wraps to itself: 2^63 as a uint64
		}
	}
	if up == 0 && down == 0 || !it.l.rooms() {
		return false
	}
	if up > math.MaxInt64 || down-1 > math.MaxInt64 && down > 0 {
		return true // no allowance covers them: after them, then
	}
	dn := int64(-1) // dn is stored one less than the room down
	if down > 0 {
		dn = int64(down - 1)
	}
	it.res = strconv.FormatUint(up, 10) + " " + strconv.FormatInt(dn, 10)
	return false
}

// addSat returns a+b, or MaxUint64 when that overflows.
func addSat(a, b uint64) uint64 {
	if s, c := bits.Add64(a, b, 0); c == 0 {
		return s
	}
	return math.MaxUint64
}
