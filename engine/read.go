package engine

import (
	"context"
	"time"

	"github.com/shardcounter/shardcounter"
)

// cachedReading is the engine's rollup of one counter: a strong reading
// and when it was taken.
type cachedReading struct {
	r     shardcounter.Reading
	taken time.Time
}

// ReadCounter returns the counter's value. A Strong reading comes from the
// store and reflects every acknowledged write (in async mode: every
// committed one; a write answered as queued shows within FlushInterval).
// A Cached reading is served from the engine's rollup when it is younger than MaxStaleness, and
// refreshed from the store otherwise, so an idle server does no work and a
// hot counter costs one store read per MaxStaleness.
func (e *Engine) ReadCounter(ctx context.Context, id string, c shardcounter.Consistency) (*shardcounter.Reading, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	switch c {
	case "", shardcounter.Strong:
		r, err := e.store.ReadCounter(ctx, id)
		if err != nil {
			return nil, err
		}
		e.remember(*r)
		return r, nil
	case shardcounter.Cached:
		now := e.cfg.Now()
		e.cacheMu.Lock()
		cr, ok := e.cache[id]
		e.cacheMu.Unlock()
		if !ok || now.Sub(cr.taken) >= e.cfg.MaxStaleness {
			r, err := e.store.ReadCounter(ctx, id)
			if err != nil {
				return nil, err
			}
			cr = e.remember(*r)
		}
		r := cr.r
		r.Consistency = shardcounter.Cached
		r.AsOf = cr.taken.UTC()
		r.MaxStalenessMS = e.maxStaleness().Milliseconds()
		return &r, nil
	default:
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "consistency %q is unknown: use strong or cached", c)
	}
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

func (e *Engine) remember(r shardcounter.Reading) cachedReading {
	cr := cachedReading{r: r, taken: e.cfg.Now()}
	e.cacheMu.Lock()
	e.cache[r.ID] = cr
	e.cacheMu.Unlock()
	return cr
}

func (e *Engine) forget(id string) {
	e.cacheMu.Lock()
	delete(e.cache, id)
	e.cacheMu.Unlock()
}
