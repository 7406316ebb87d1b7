package engine

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/shardcounter/shardcounter"
)

var _ shardcounter.LimitService = (*Engine)(nil)

// Rate limits are counters: a definition is an internal counter whose id
// holds the name and the policy (shardcounter.LimitDefinitionID), and a
// key's state another (shardcounter.LimitKeyID), whose takes go through
// the group commit like any write and are decided by the store with
// package decide. So every server sharing a store shares its limits, and
// a limit needs no record a store does not already keep.

// limitTTL is how long a server uses a definition it read before reading
// it again: a limit redefined or deleted on another server is seen here
// within it.
const limitTTL = time.Second

// limits caches definitions by name.
type limits struct {
	mu     sync.Mutex
	byName map[string]cachedLimit
	reads  singleflight.Group // by name: one store read of a definition at a time
}

type cachedLimit struct {
	l    *shardcounter.Limit // nil: none
	read time.Time
}

// CreateLimit defines limit name as p (see shardcounter.LimitService).
// A redefinition records the new definition, then removes the older ones
// and the state of their keys, so that of two concurrent definitions the
// later one stays.
func (e *Engine) CreateLimit(ctx context.Context, name string, p shardcounter.LimitPolicy) (*shardcounter.Limit, bool, error) {
	if err := shardcounter.ValidateLimitName(name); err != nil {
		return nil, false, err
	}
	if err := shardcounter.ValidateLimitPolicy(p); err != nil {
		return nil, false, err
	}
	p = p.WithDefaults()
	defs, err := e.limitDefs(ctx, name)
	if err != nil {
		return nil, false, err
	}
	if n := len(defs); n > 0 && defs[n-1].LimitPolicy == p {
		e.limits.put(name, defs[n-1])
		return defs[n-1], false, nil
	}
	c, err := e.store.CounterStore.CreateCounter(ctx, shardcounter.LimitDefinitionID(name, p), shardcounter.Spec{Shards: 1, Kind: shardcounter.KindSum})
	if shardcounter.ErrorCode(err) == shardcounter.EEXISTS {
		// Defined so by a concurrent call: the same definition.
		if defs, err = e.limitDefs(ctx, name); err != nil {
			return nil, false, err
		}
		for _, l := range defs {
			if l.LimitPolicy == p {
				e.limits.put(name, l)
				return l, false, nil
			}
		}
		return nil, false, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "limit %q was redefined while it was being defined: try again", name)
	}
	if err != nil {
		return nil, false, err
	}
	l := &shardcounter.Limit{Name: name, LimitPolicy: p, CreatedAt: c.CreatedAt}
	for _, old := range defs {
		if err := e.dropLimit(ctx, old); err != nil {
			return nil, false, err
		}
	}
	e.limits.put(name, l)
	return l, true, nil
}

// GetLimit returns limit name's definition, read from the store.
func (e *Engine) GetLimit(ctx context.Context, name string) (*shardcounter.Limit, error) {
	if err := shardcounter.ValidateLimitName(name); err != nil {
		return nil, err
	}
	defs, err := e.limitDefs(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(defs) == 0 {
		e.limits.put(name, nil)
		return nil, shardcounter.LimitNotFound(name)
	}
	e.limits.put(name, defs[len(defs)-1])
	return defs[len(defs)-1], nil
}

// ListLimits returns every limit, by name.
func (e *Engine) ListLimits(ctx context.Context) ([]*shardcounter.Limit, error) {
	byName := map[string]*shardcounter.Limit{}
	err := e.eachInternal(ctx, shardcounter.LimitDefinitionPrefix(""), func(c *shardcounter.Counter) error {
		if l := limitOf(c); l != nil && newer(l, byName[l.Name]) {
			byName[l.Name] = l
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]*shardcounter.Limit, 0, len(byName))
	for _, l := range byName {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b *shardcounter.Limit) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteLimit removes limit name's definitions and its keys' state.
func (e *Engine) DeleteLimit(ctx context.Context, name string) error {
	if err := shardcounter.ValidateLimitName(name); err != nil {
		return err
	}
	defs, err := e.limitDefs(ctx, name)
	if err != nil {
		return err
	}
	if len(defs) == 0 {
		return shardcounter.LimitNotFound(name)
	}
	for _, l := range defs {
		if err := e.dropLimit(ctx, l); err != nil {
			return err
		}
	}
	e.limits.put(name, nil)
	e.stats.limitTakes.byName.Delete(name)
	return nil
}

// Take takes cost from key in the group commit and answers once the
// decision is committed.
func (e *Engine) Take(ctx context.Context, name, key string, cost int64, requestID string) (*shardcounter.LimitResult, error) {
	if requestID != "" {
		if err := shardcounter.ValidateID("request id", requestID); err != nil {
			return nil, err
		}
	}
	return e.take(ctx, name, key, cost, requestID, false)
}

// Peek answers what a take of cost would, on the store's clock, taking
// nothing.
func (e *Engine) Peek(ctx context.Context, name, key string, cost int64) (*shardcounter.LimitResult, error) {
	return e.take(ctx, name, key, cost, "", true)
}

// ResetLimitKey empties key's state under the limit's policy.
func (e *Engine) ResetLimitKey(ctx context.Context, name, key string) error {
	l, err := e.limit(ctx, name, key)
	if err != nil {
		return err
	}
	return e.deleteInternal(ctx, shardcounter.LimitKeyID(name, l.LimitPolicy, key))
}

func (e *Engine) take(ctx context.Context, name, key string, cost int64, requestID string, peek bool) (*shardcounter.LimitResult, error) {
	if err := shardcounter.ValidateTake(cost); err != nil {
		return nil, err
	}
	l, err := e.limit(ctx, name, key)
	if err != nil {
		return nil, err
	}
	w := shardcounter.Write{
		Counter:   shardcounter.LimitKeyID(name, l.LimitPolicy, key),
		RequestID: requestID,
		Take:      &shardcounter.LimitTake{Policy: l.LimitPolicy, Cost: cost, Peek: peek},
	}
	c, _, err := e.commitOne(ctx, w)
	if err != nil {
		return nil, err
	}
	if c.res.Limit == nil {
		return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "the store applied a take of limit %q without deciding it", name)
	}
	r := *c.res.Limit
	r.Policy = l.LimitPolicy
	switch {
	case peek || r.Duplicate:
	case r.Allowed:
		e.stats.LimitAllowed.Add(1)
		e.stats.limitTakes.of(name)[0].Add(1)
	default:
		e.stats.LimitRefused.Add(1)
		e.stats.limitTakes.of(name)[1].Add(1)
	}
	return &r, nil
}

// limitTakes counts the takes decided by limit name: allowed, refused.
// A name is counted only once a take of it is decided, so only limits
// that exist, and a limit deleted through this engine is dropped: the
// names are as many as the limits.
type limitTakes struct {
	byName sync.Map // string -> *[2]atomic.Int64
}

func (lt *limitTakes) of(name string) *[2]atomic.Int64 {
	if c, ok := lt.byName.Load(name); ok {
		return c.(*[2]atomic.Int64)
	}
	c, _ := lt.byName.LoadOrStore(name, new([2]atomic.Int64))
	return c.(*[2]atomic.Int64)
}

// EachLimit calls fn with each limit's takes decided by this engine
// (peeks and retries of a request id not included), allowed and refused,
// in no order: the metric shardcounter_limit_takes_total.
func (s *Stats) EachLimit(fn func(name string, allowed, refused int64)) {
	s.limitTakes.byName.Range(func(k, v any) bool {
		c := v.(*[2]atomic.Int64)
		fn(k.(string), c[0].Load(), c[1].Load())
		return true
	})
}

// limit returns the definition of limit name, as read at most limitTTL
// ago, after checking the key.
func (e *Engine) limit(ctx context.Context, name, key string) (*shardcounter.Limit, error) {
	if err := shardcounter.ValidateName("limit key", key); err != nil {
		return nil, err
	}
	if err := shardcounter.ValidateLimitName(name); err != nil {
		return nil, err
	}
	e.limits.mu.Lock()
	cl, ok := e.limits.byName[name]
	e.limits.mu.Unlock()
	if !ok || time.Since(cl.read) > limitTTL {
		// The takes whose cached definition expired together wait for one
		// read of it, not one each: on a hot limit every client's cache
		// expires in the same second. The read is the first caller's,
		// bounded by FlushTimeout, and outlives it when it gives up.
		ch := e.limits.reads.DoChan(name, func() (any, error) {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.FlushTimeout)
			defer cancel()
			return e.GetLimit(ctx, name)
		})
		select {
		case r := <-ch:
			if r.Err != nil {
				return nil, r.Err
			}
			return r.Val.(*shardcounter.Limit), nil
		case <-ctx.Done():
			return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "reading limit %q: %v", name, ctx.Err())
		}
	}
	if cl.l == nil {
		return nil, shardcounter.LimitNotFound(name)
	}
	return cl.l, nil
}

func (ls *limits) put(name string, l *shardcounter.Limit) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.byName == nil {
		ls.byName = make(map[string]cachedLimit)
	}
	ls.byName[name] = cachedLimit{l, time.Now()}
}

// limitDefs returns the definitions recorded for name, oldest first: one,
// but for a moment while it is redefined.
func (e *Engine) limitDefs(ctx context.Context, name string) ([]*shardcounter.Limit, error) {
	var defs []*shardcounter.Limit
	err := e.eachInternal(ctx, shardcounter.LimitDefinitionPrefix(name), func(c *shardcounter.Counter) error {
		if l := limitOf(c); l != nil && l.Name == name {
			defs = append(defs, l)
		}
		return nil
	})
	slices.SortFunc(defs, func(a, b *shardcounter.Limit) int {
		if newer(a, b) {
			return 1
		}
		return -1
	})
	return defs, err
}

// dropLimit removes one definition of a limit and the state of its keys.
func (e *Engine) dropLimit(ctx context.Context, l *shardcounter.Limit) error {
	err := e.eachInternal(ctx, shardcounter.LimitKeyID(l.Name, l.LimitPolicy, ""), func(c *shardcounter.Counter) error {
		return e.deleteInternal(ctx, c.ID)
	})
	if err != nil {
		return err
	}
	return e.deleteInternal(ctx, shardcounter.LimitDefinitionID(l.Name, l.LimitPolicy))
}

// deleteInternal deletes an internal record from the store beneath the
// deadlines (which hold none for it); one that is gone already is fine.
func (e *Engine) deleteInternal(ctx context.Context, id string) error {
	err := e.store.CounterStore.DeleteCounter(ctx, id)
	if shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND {
		return nil
	}
	return err
}

// eachInternal calls fn with every counter whose id starts with the
// internal prefix, from the store beneath the deadlines (whose listings
// leave internal records out).
func (e *Engine) eachInternal(ctx context.Context, prefix string, fn func(*shardcounter.Counter) error) error {
	after := ""
	for {
		cs, err := e.store.CounterStore.ListCounters(ctx, prefix, after, shardcounter.MaxListLimit)
		if err != nil {
			return err
		}
		for _, c := range cs {
			if err := fn(c); err != nil {
				return err
			}
		}
		if len(cs) < shardcounter.MaxListLimit {
			return nil
		}
		after = cs[len(cs)-1].ID
	}
}

// limitOf reads a definition's counter; nil for another counter.
func limitOf(c *shardcounter.Counter) *shardcounter.Limit {
	name, p, ok := shardcounter.ParseLimitDefinitionID(c.ID)
	if !ok {
		return nil
	}
	return &shardcounter.Limit{Name: name, LimitPolicy: p, CreatedAt: c.CreatedAt}
}

// newer reports whether definition a was made after b (nil), by creation
// time and then by id, the order every server sees.
func newer(a, b *shardcounter.Limit) bool {
	if b == nil {
		return true
	}
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	return a.LimitPolicy.String() > b.LimitPolicy.String()
}
