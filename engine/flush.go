package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/shardcounter/shardcounter"
)

// flush applies a batch and gives every call its result. Items that fail
// because their counter is missing are retried once after auto-create;
// folded items refused as out of range are retried one write at a time,
// so that only the writes that do not fit are refused.
func (e *Engine) flush(b *batch) {
	groups := foldSums(fold(b.calls), b.sums)
	created := false
	for round := 0; len(groups) > 0; round++ {
		incs := make([]shardcounter.Increment, len(groups))
		writes := 0
		for i, g := range groups {
			incs[i] = g.inc
			writes += len(g.calls) + int(g.writes)
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), e.cfg.FlushTimeout)
		out, err := e.store.Apply(ctx, incs)
		cancel()
		took := time.Since(start)
		e.stats.FlushNanos.Add(int64(took))
		e.stats.Flushes.Add(1)
		e.stats.Items.Add(int64(len(incs)))
		if err == nil && len(out) != len(incs) {
			err = shardcounter.Errorf(shardcounter.EINTERNAL, "store returned %d outcomes for %d increments", len(out), len(incs))
		}
		if e.cfg.OnFlush != nil {
			e.cfg.OnFlush(FlushEvent{Writes: writes, Items: len(incs), Duration: took, Err: err})
		}
		var retry []*group
		var missing []string
		for i, g := range groups {
			var o shardcounter.Outcome
			if err != nil {
				o.Err = err
			} else {
				o = out[i]
			}
			switch {
			case o.Err == nil:
				e.finish(g, o.Duplicate, nil)
			case round < 2 && !created && !e.cfg.NoAutoCreate && errors.Is(o.Err, shardcounter.ErrNotFound):
				missing = append(missing, g.inc.Counter)
				retry = append(retry, g)
			case round < 2 && len(g.calls) > 1 && errors.Is(o.Err, shardcounter.ErrOutOfRange):
				for _, c := range g.calls {
					retry = append(retry, &group{inc: shardcounter.Increment{Counter: c.w.Counter, Delta: c.w.Delta, Pick: rand.Uint64()}, calls: []*call{c}})
				}
			default:
				e.finish(g, false, o.Err)
			}
		}
		for _, id := range missing {
			ctx, cancel := context.WithTimeout(context.Background(), e.cfg.FlushTimeout)
			_, err := e.store.CreateCounter(ctx, id, shardcounter.Spec{Shards: e.cfg.DefaultShards})
			cancel()
			if err != nil && !errors.Is(err, shardcounter.ErrExists) {
				for _, g := range retry {
					if g.inc.Counter == id {
						g.inc.Delta = 0 // marks the group as failed below
						e.finish(g, false, err)
					}
				}
			}
		}
		created = created || len(missing) > 0
		groups = groups[:0]
		for _, g := range retry {
			if g.inc.Delta != 0 {
				groups = append(groups, g)
			}
		}
	}
}

// finish gives each of g's calls its result and counts g's writes in Stats.
func (e *Engine) finish(g *group, duplicate bool, err error) {
	for _, c := range g.calls {
		c.res = shardcounter.WriteResult{Counter: c.w.Counter, Applied: err == nil && !duplicate, Duplicate: duplicate}
		c.err = err
		switch {
		case err != nil:
			e.stats.Errors.Add(1)
		case duplicate:
			e.stats.Duplicates.Add(1)
		default:
			e.stats.Writes.Add(1)
		}
	}
	switch {
	case g.writes == 0:
	case err != nil:
		e.stats.Errors.Add(g.writes)
	default:
		e.stats.Writes.Add(g.writes)
	}
	if err != nil && e.cfg.Durability == Async {
		e.lost(int64(len(g.calls))+g.writes, g.inc.Counter, err)
	}
}

// asyncLogEvery bounds how often lost async writes are logged, so that a
// store outage under load gives a line a second, not one per flush.
const asyncLogEvery = time.Second

// lost records async writes whose commit failed after they were answered:
// nobody is waiting for their error, so it goes to Stats and the log. Only
// the flusher calls it.
func (e *Engine) lost(n int64, counter string, err error) {
	e.stats.AsyncLost.Add(n)
	e.suppressed += n
	now := time.Now()
	if now.Sub(e.lastLog) < asyncLogEvery {
		return
	}
	e.cfg.Logger.Error("async writes failed to commit after they were acknowledged",
		"writes", e.suppressed, "counter", counter, "error", err,
		"outcome_unknown", shardcounter.IsOutcomeUnknown(err))
	e.lastLog, e.suppressed = now, 0
}
