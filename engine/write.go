package engine

import (
	"context"
	"errors"
	"slices"

	"github.com/shardcounter/shardcounter"
)

// WriteCounter queues the write and answers once it has committed, or in
// async mode once it is queued (Applied true: accepted). A write with
// WantValue is always answered after its commit, with the counter's value
// as the store returned it with the commit (Outcome.Total) or, from a
// store that does not, read after it.
func (e *Engine) WriteCounter(ctx context.Context, w shardcounter.Write) (*shardcounter.WriteResult, error) {
	if err := shardcounter.ValidateWrite(w); err != nil {
		return nil, err
	}
	if e.cfg.Durability == Async && !w.WantValue && w.Expire == nil {
		var c *call // nobody waits for the result: let the batch sum it
		if w.RequestID != "" || w.Present != nil {
			c = &call{w: w} // its outcome is decided on its own
			e.setSpan(ctx, c)
		}
		if _, err := e.queue.add(ctx, w, c); err != nil {
			return nil, err
		}
		return accepted(w), nil
	}
	c, b, err := e.commitOne(ctx, w)
	if err != nil {
		return nil, err
	}
	if w.WantValue && c.res.Value == nil {
		// The store did not return the value with the commit. The flusher
		// is done with c: its result is this goroutine's now.
		c.res.Value = e.valueAfter(ctx, b, w.Counter)
	}
	return &c.res, nil
}

// commitOne queues w and waits for its commit: its call, with its result,
// and its batch.
func (e *Engine) commitOne(ctx context.Context, w shardcounter.Write) (*call, *batch, error) {
	c := &call{w: w}
	e.setSpan(ctx, c)
	b, err := e.queue.add(ctx, w, c)
	if err != nil {
		return nil, nil, err
	}
	if err := wait(ctx, b); err != nil {
		return nil, nil, err
	}
	return c, b, c.err
}

// accepted is the answer to an async write once queued.
func accepted(w shardcounter.Write) *shardcounter.WriteResult {
	return &shardcounter.WriteResult{Counter: w.Counter, Applied: true, Member: w.Member}
}

// WriteBatch validates every write, queues them all and answers once they
// have committed (in async mode, once queued, unless a write asks for its
// value). The writes of one call join one batch, unless they fill it
// (MaxBatch) or wait for room in the queue (MaxQueued), and then
// consecutive flushes; a run of writes joined by Write.JoinNext is never
// cut (queue.addAll). A failure of one write does not fail the others.
func (e *Engine) WriteBatch(ctx context.Context, ws []shardcounter.Write) ([]shardcounter.WriteResult, error) {
	for i, w := range ws {
		if err := shardcounter.ValidateWrite(w); err != nil {
			var se *shardcounter.Error
			errors.As(err, &se)
			return nil, shardcounter.Errorf(se.Code, "write %d: %s", i, se.Message)
		}
	}
	// The calls are one allocation, not one a write: the serving loops
	// hand a batch of many connections' commands in one call, and each
	// call lives as long as its batch's wait.
	calls := make([]*call, len(ws))
	slab := make([]call, len(ws))
	for i, w := range ws {
		slab[i].w = w
		calls[i] = &slab[i]
	}
	e.setSpans(ctx, calls)
	batches := make([]*batch, len(ws)) // the batch of each queued write
	queued, err := e.queue.addAll(ctx, ws, calls, batches)
	if err != nil {
		if queued == 0 {
			return nil, err
		}
		// Earlier writes are queued and will apply; say so per item.
		for j := queued; j < len(ws); j++ {
			calls[j].res = shardcounter.WriteResult{Counter: ws[j].Counter}
			calls[j].err = err
		}
	}
	res := make([]shardcounter.WriteResult, len(ws))
	// A deadline change's result (whether it was made) and a take's
	// decision are known only after their commit: a batch with one
	// waits, as one wanting a value.
	wantValue := slices.ContainsFunc(ws, func(w shardcounter.Write) bool {
		return w.WantValue || w.Expire != nil || w.Take != nil || w.Bound != nil
	})
	if e.cfg.Durability == Async && !wantValue {
		// The flusher owns the queued calls now: read only what this
		// goroutine wrote.
		for i, w := range ws {
			if i < queued {
				res[i] = *accepted(w)
			} else {
				res[i] = shardcounter.WriteResult{Counter: w.Counter, Error: asError(calls[i].err)}
			}
		}
		return res, nil
	}
	for i, b := range batches[:queued] {
		if i == 0 || b != batches[i-1] {
			if err := wait(ctx, b); err != nil {
				return nil, err
			}
		}
	}
	for i, c := range calls {
		res[i] = c.res
		switch {
		case c.err != nil:
			res[i] = shardcounter.WriteResult{Counter: c.w.Counter, Member: c.w.Member, Error: asError(c.err)}
		case (c.w.WantValue || c.w.Bound != nil) && c.res.Value == nil:
			res[i].Value = e.valueAfter(ctx, batches[i], c.w.Counter)
		case c.w.Take != nil:
			e.countTake(c.w.Take, c.res.Limit)
		}
	}
	return res, nil
}

// wait waits for b's flush. A caller that stops waiting cannot know
// whether its write was applied.
func wait(ctx context.Context, b *batch) error {
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		return shardcounter.OutcomeUnknownf("gave up waiting for the commit (%v)", ctx.Err())
	}
}

func asError(err error) *shardcounter.Error {
	var se *shardcounter.Error
	if errors.As(err, &se) {
		return se
	}
	return &shardcounter.Error{Code: shardcounter.EINTERNAL, Message: "internal error"}
}
