package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
)

// Totals (Increment.Total, INCR's reply).
//
// After a batch's scripts, in the same pipeline, shardsScript reads every
// shard of each counter whose items asked for their total, in one atomic
// step: the read a strong ReadCounter makes, without its own round trip.
// It runs after the writes (a server runs a connection's commands in
// order) and before Apply returns, so the sum is a value the counter held
// within the call, as Outcome.Total requires; a counter a reshard changed
// in between (a shard off the writer's epoch) gets no total, and the
// engine reads it. A new counter's shards are read before the script that
// publishes it, but nothing else can write to them until then: the sum
// is the value it has once published.
//
// On one server one script reads every counter asked about. On a cluster
// a script reads keys of one slot, and a counter's shards are spread over
// slots, on several masters that no one step reads (read.go): only a
// counter of one shard gets its total there, from a script of its own on
// its shard's master. An approx counter's value is an estimate computed
// from its sketches, which no script computes: it gets no total here.

// totals is the totals of one Apply, across its attempts. An item's
// total is its counter's after the batch (package decide's rule): after
// the last attempt that wrote the counter, whose read gives it, or none
// when that attempt could not read it.
type totals struct {
	asked map[string]bool  // counters an item asks the total of
	sums  map[string]int64 // their totals after the attempts so far, where known
	reads []totalsRead     // the attempt's reads
}

// totalsRead is one shardsScript call.
type totalsRead struct {
	run *nodeRun
	at  int       // the read is run.cmds[at]
	ls  []*layout // the counters read, in the order of their shards' keys
}

func newTotals(incs []shardcounter.Increment) totals {
	var t totals
	for _, inc := range incs {
		if inc.Total {
			if t.asked == nil {
				t.asked, t.sums = make(map[string]bool), make(map[string]int64)
			}
			t.asked[inc.Counter] = true
		}
	}
	return t
}

// queue queues on the attempt's pipelines, after what is queued there,
// the reads of the counters asked for that the attempt writes. A counter
// it cannot read in one step (see above) has no total from then on.
func (t *totals) queue(ctx context.Context, a *attempt) {
	t.reads = nil
	if t.asked == nil {
		return
	}
	var read []*layout
	seen := make(map[*layout]bool)
	for _, it := range a.items {
		l := it.l
		if !t.asked[l.id] || seen[l] {
			continue
		}
		seen[l] = true
		delete(t.sums, l.id) // until this attempt's read gives it
		if !l.approx() && (a.s.cluster == nil || l.n == 1) {
			read = append(read, l)
		}
	}
	if len(read) == 0 {
		return
	}
	groups := [][]*layout{read} // one server: one read
	if a.s.cluster != nil {
		groups = make([][]*layout, len(read)) // a read per counter, in its slot
		for i, l := range read {
			groups[i] = []*layout{l}
		}
	}
	for _, g := range groups {
		var keys []string
		for _, l := range g {
			keys = append(keys, l.keys.shards(l.n)...)
		}
		run, at := a.nr.add(ctx, keys[0], func(p goredis.Pipeliner) *goredis.Cmd {
			return shardsScript.EvalSha(ctx, p, keys)
		})
		if run != nil {
			t.reads = append(t.reads, totalsRead{run: run, at: at, ls: g})
		}
	}
}

// take keeps the totals the attempt's reads found.
func (t *totals) take() {
	for _, rd := range t.reads {
		rd.sums(t.sums)
	}
	t.reads = nil
}

// give sets Outcome.Total on each item that asked for it and did not
// fail, where its counter's total is known: not on a conditional item
// that was skipped, which decide gives none.
func (t *totals) give(incs []shardcounter.Increment, out []shardcounter.Outcome) {
	for i, inc := range incs {
		if sum, ok := t.sums[inc.Counter]; ok && inc.Total && out[i].Err == nil && (inc.If == 0 || !out[i].Skipped) {
			out[i].Total = &sum
		}
	}
}

// sums adds to sums the total of each counter of the read whose shards
// were all at its layout's epoch and sum within int64.
func (rd totalsRead) sums(sums map[string]int64) {
	r, err := rd.run.cmds[rd.at].Slice()
	if err != nil {
		return
	}
	off := 0
	for _, l := range rd.ls {
		if len(r) < 2*(off+l.n) {
			return // not the script's reply: no totals
		}
		ep := l.ep()
		vals := make([]int64, l.n)
		ok := true
		for k := range l.n {
			at := 2 * (off + k)
			if vals[k], err = shardValue(l, ep, k, r[at:at+2]); err != nil {
				ok = false
				break
			}
		}
		off += l.n
		if sum, fits := overflow.Sum(vals); ok && fits {
			sums[l.id] = sum
		}
	}
}
