package engine

import (
	"go.opentelemetry.io/otel/trace"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
)

// call is one queued write and, after its flush, its result.
type call struct {
	w   shardcounter.Write
	seq int // its place in its batch's calls: the order the writes came in
	res shardcounter.WriteResult
	err error
	// span is the span of the write's request, with Config.Tracer.
	span trace.Span
	// cond, on a deadline change made only if a bounded write is not
	// skipped (ExpireChange.AfterBound), is that write's call.
	cond *call
	// txn, on each write of a transaction that holds a deadline change
	// whose records join its commit, is the transaction's Increment.Txn
	// (markChangeTxns); 0 otherwise.
	txn uint64
}

// batch is the writes one flush applies. done is closed once every call
// has its result.
//
// In async mode a write without a request id has nobody waiting for its
// result, so it is not kept as a call: it is added to sums at once, and
// the batch holds one running delta per counter and sign however many
// writes it takes. That makes an async write an add under a lock, with no
// allocation, and the flush's work proportional to the counters written,
// not the writes.
type batch struct {
	calls  []*call
	sums   map[sumKey]*sum
	writes int // len(calls) plus the writes in sums
	done   chan struct{}
	values values // read after the commit, for writes with WantValue
}

type sumKey struct {
	counter string
	neg     bool
}

type sum struct {
	delta, writes int64
}

func newBatch() *batch { return &batch{done: make(chan struct{})} }

// size is the number of increments the batch will send the store, at
// most: what MaxBatch bounds.
func (b *batch) size() int { return len(b.calls) + len(b.sums) }

// add adds write w with its call c; a nil c is an async write without a
// request id, which joins the batch's sums.
func (b *batch) add(w shardcounter.Write, c *call) {
	b.writes++
	if c != nil {
		c.seq = len(b.calls)
		b.calls = append(b.calls, c)
		return
	}
	k := sumKey{w.Counter, w.Delta < 0}
	sm := b.sums[k]
	if sm == nil {
		if b.sums == nil {
			b.sums = make(map[sumKey]*sum)
		}
		sm = new(sum)
		b.sums[k] = sm
	}
	if d, ok := overflow.Add(sm.delta, w.Delta); ok {
		sm.delta = d
		sm.writes++
		return
	}
	// The running sum would leave int64: keep this write on its own. (A
	// sum the store refuses as out of range is lost whole, and logged: its
	// writes were answered when queued.)
	b.calls = append(b.calls, &call{w: w, seq: len(b.calls)})
}
