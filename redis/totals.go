package redis

import (
	"context"
	"slices"

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

// batchTotals is the totals read of one attempt of Apply.
type batchTotals struct {
	reads []totalsRead
}

// totalsRead is one shardsScript call.
type totalsRead struct {
	run *nodeRun
	at  int       // the read is run.cmds[at]
	ls  []*layout // the counters read, in the order of their shards' keys
}

// queueTotals queues on nr, after what is queued there, the reads of the
// counters of the items of todo that ask for their total, with the
// layouts in ls. It returns nil when there is nothing to read.
func (s *CounterStore) queueTotals(ctx context.Context, nr *nodeRuns, incs []shardcounter.Increment, todo []int, ls map[string]*layout) *batchTotals {
	var asked []*layout
	seen := make(map[*layout]bool)
	for _, i := range todo {
		l := ls[incs[i].Counter]
		if !incs[i].Total || l == nil || seen[l] || s.cluster != nil && l.n != 1 || l.approx() {
			continue
		}
		seen[l] = true
		asked = append(asked, l)
	}
	if len(asked) == 0 {
		return nil
	}
	groups := [][]*layout{asked} // one server: one read
	if s.cluster != nil {
		groups = make([][]*layout, len(asked)) // a read per counter, in its slot
		for i, l := range asked {
			groups[i] = []*layout{l}
		}
	}
	t := &batchTotals{}
	for _, g := range groups {
		var keys []string
		for _, l := range g {
			keys = append(keys, l.keys.shards(l.n)...)
		}
		run, at := nr.add(ctx, keys[0], func(p goredis.Pipeliner) *goredis.Cmd {
			return shardsScript.EvalSha(ctx, p, keys)
		})
		if run != nil {
			t.reads = append(t.reads, totalsRead{run: run, at: at, ls: g})
		}
	}
	return t
}

// give sets Outcome.Total on each item of todo that asked for it and was
// decided on this attempt: applied or a duplicate, not failed, not in
// retry (sorted). An item whose counter's read failed or was stale gets
// none.
func (t *batchTotals) give(incs []shardcounter.Increment, out []shardcounter.Outcome, todo, retry []int) {
	if t == nil {
		return
	}
	sums := make(map[string]int64)
	for _, rd := range t.reads {
		rd.sums(sums)
	}
	for _, i := range todo {
		if !incs[i].Total || out[i].Err != nil {
			continue
		}
		if _, retried := slices.BinarySearch(retry, i); retried {
			continue
		}
		if sum, ok := sums[incs[i].Counter]; ok {
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
