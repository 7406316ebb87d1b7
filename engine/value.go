package engine

import (
	"context"
	"slices"
	"sync"

	"github.com/shardcounter/shardcounter"
)

// values are the values of the counters a batch's writes asked for
// (Write.WantValue) and the store did not return with the commit
// (Outcome.Total), read once after the batch committed: one store read per
// batch, however many writes asked.
type values struct {
	ids  []string // the counters to read, set by the flusher before the batch is done
	once sync.Once
	done chan struct{} // closed once byID is set
	byID map[string]int64
}

// note lists, once calls have their results, the counters of the applied
// calls that asked for their value and did not get it from the commit.
// The flusher calls it before the batch is done, so that readValues does
// not read a call's result while the call's own goroutine sets it.
func (v *values) note(calls []*call) {
	var seen map[string]bool
	for _, c := range calls {
		if !c.w.WantValue || c.err != nil || c.res.Value != nil || seen[c.w.Counter] {
			continue
		}
		if seen == nil {
			seen = make(map[string]bool)
		}
		seen[c.w.Counter] = true
		v.ids = append(v.ids, c.w.Counter)
	}
}

// valueAfter returns the value of counter read after b committed, or nil
// when that read failed or ctx ended first (the write was applied all the
// same). The first caller of a batch starts the read, off the flusher and
// on a goroutine of its own, so that one caller giving up does not fail
// the others.
func (e *Engine) valueAfter(ctx context.Context, b *batch, counter string) *int64 {
	v := &b.values
	v.once.Do(func() {
		v.done = make(chan struct{})
		go e.readValues(b)
	})
	select {
	case <-v.done:
	case <-ctx.Done():
		return nil
	}
	n, ok := v.byID[counter]
	if !ok {
		return nil
	}
	return &n
}

// readValues reads the counters values.note listed, bounded by
// FlushTimeout: strong reads of MaxReadBatch counters at a time (a batch
// holds up to MaxBatch), begun after the commit and gathered with other
// strong reads (strongReads), which keep the rollups too. A chunk whose
// read fails leaves its counters without a value; the others keep theirs.
func (e *Engine) readValues(b *batch) {
	defer close(b.values.done)
	ids := b.values.ids
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.FlushTimeout)
	defer cancel()
	byID := make(map[string]int64, len(ids))
	for chunk := range slices.Chunk(ids, shardcounter.MaxReadBatch) {
		rs, err := e.strong.read(ctx, chunk)
		if err != nil {
			e.cfg.Logger.Warn("reading the values of committed writes failed; they were answered without one", "counters", len(chunk), "error", err)
			continue
		}
		for i, r := range rs {
			if r != nil {
				byID[chunk[i]] = r.Value
			}
		}
	}
	b.values.byID = byID
}
