package engine

import (
	"context"
	"errors"
	"time"

	"github.com/shardcounter/shardcounter"
)

// ReadCounter returns the counter's value. A Strong reading comes from a
// store read that began after the call (gathered with the strong reads of
// other callers, see strongReads) and reflects every acknowledged write
// (in async mode: every committed one; a write answered as queued shows
// within FlushInterval).
// A Cached reading is served from the engine's rollup when it is younger
// than MaxStaleness, and refreshed from the store otherwise, so an idle
// server does no work and a hot counter costs one store read per
// MaxStaleness, however many readers miss at once.
func (e *Engine) ReadCounter(ctx context.Context, id string, c shardcounter.Consistency) (*shardcounter.Reading, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	switch c {
	case "", shardcounter.Strong:
		rs, err := e.readStrong(ctx, []string{id})
		if err != nil {
			return nil, err
		}
		if rs[0] == nil {
			return nil, shardcounter.CounterNotFound(id)
		}
		return rs[0], nil
	case shardcounter.Cached:
		res := e.readCached(ctx, []string{id})[0]
		if res.err != nil {
			return nil, res.err
		}
		return e.cachedReading(res.cr), nil
	default:
		return nil, badConsistency(c)
	}
}

func badConsistency(c shardcounter.Consistency) error {
	return shardcounter.Errorf(shardcounter.EINVALID, "consistency %q is unknown: use strong or cached", c)
}

// readCached returns the rollups of ids no older than MaxStaleness,
// refreshing the others with one store read.
func (e *Engine) readCached(ctx context.Context, ids []string) []cacheResult {
	if e.direct {
		return e.readDirect(ctx, ids)
	}
	return e.cache.read(ctx, ids, e.cfg.Now().Add(-e.cfg.MaxStaleness), e.cfg.Now, e.fetch)
}

// fetch reads ids from the store in one call: ReadCounter for one,
// ReadCounters for more.
func (e *Engine) fetch(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	if len(ids) > 1 {
		return e.store.ReadCounters(ctx, ids)
	}
	r, err := e.store.ReadCounter(ctx, ids[0])
	if errors.Is(err, shardcounter.ErrNotFound) {
		return []*shardcounter.Reading{nil}, nil
	}
	if err != nil {
		return nil, err
	}
	return []*shardcounter.Reading{r}, nil
}

// cachedReading is the reading a cached read answers with cr.
func (e *Engine) cachedReading(cr cachedReading) *shardcounter.Reading {
	r := cr.r
	r.Consistency = shardcounter.Cached
	r.AsOf = cr.taken.UTC()
	r.MaxStalenessMS = e.maxStaleness().Milliseconds()
	return &r
}

// maxStaleness is how far a cached reading may lag acknowledged writes: the
// rollup's age, and in async mode also the time an acknowledged write may
// wait in the queue.
func (e *Engine) maxStaleness() time.Duration {
	if e.cfg.Durability == Async {
		return e.cfg.MaxStaleness + e.cfg.FlushInterval
	}
	return e.cfg.MaxStaleness
}

// ReadCounters reads up to MaxReadBatch counters, one result per id in
// order. Strong readings come from one store.ReadCounters call, which may
// carry the strong reads of other callers too (strongReads): one
// consistent snapshot where the store has one. Cached readings are served
// from fresh rollups, and only the counters without one are read from the
// store, together with the misses of concurrent reads (readingCache).
func (e *Engine) ReadCounters(ctx context.Context, ids []string, c shardcounter.Consistency) ([]shardcounter.ReadResult, error) {
	if len(ids) == 0 {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "no counter ids: give 1 to %d", shardcounter.MaxReadBatch)
	}
	if err := shardcounter.CheckReadBatch(len(ids)); err != nil {
		return nil, err
	}
	for i, id := range ids {
		if err := shardcounter.ValidateID("counter id", id); err != nil {
			var se *shardcounter.Error
			errors.As(err, &se)
			return nil, shardcounter.Errorf(se.Code, "counter %d: %s", i, se.Message)
		}
	}
	res := make([]shardcounter.ReadResult, len(ids))
	switch c {
	case "", shardcounter.Strong:
		rs, err := e.readStrong(ctx, ids)
		if err != nil {
			return nil, err
		}
		for i, r := range rs {
			if r == nil {
				res[i].Err = shardcounter.CounterNotFound(ids[i])
				continue
			}
			res[i].Reading = r
		}
	case shardcounter.Cached:
		for i, cr := range e.readCached(ctx, ids) {
			if cr.err != nil {
				res[i].Err = cr.err
			} else {
				res[i].Reading = e.cachedReading(cr.cr)
			}
		}
	default:
		return nil, badConsistency(c)
	}
	return res, nil
}

// readStrong returns the strong readings of ids, nil for a counter that
// does not exist: gathered with other callers' (strongReads), or, from a
// store that reads from memory, straight from the store.
func (e *Engine) readStrong(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	if !e.direct {
		return e.strong.read(ctx, ids)
	}
	rs, err := e.store.ReadCounters(ctx, ids)
	if err == nil && len(rs) != len(ids) {
		err = shardcounter.Errorf(shardcounter.EINTERNAL, "store returned %d readings for %d counters", len(rs), len(ids))
	}
	return rs, err
}

// readDirect answers cached reads from a store that reads from memory
// with its strong readings, taken now: a reading as fresh as one can be
// is within any staleness bound.
func (e *Engine) readDirect(ctx context.Context, ids []string) []cacheResult {
	res := make([]cacheResult, len(ids))
	taken := e.cfg.Now()
	rs, err := e.readStrong(ctx, ids)
	for i, id := range ids {
		switch {
		case err != nil:
			res[i].err = err
		case rs[i] == nil:
			res[i].err = shardcounter.CounterNotFound(id)
		default:
			res[i].cr = cachedReading{r: *rs[i], taken: taken}
		}
	}
	return res
}
