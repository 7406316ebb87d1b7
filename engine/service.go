package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/shardcounter/shardcounter"
)

// CreateCounter creates a counter with opts.Shards shards, or with the
// policy's count for opts.FollowersCount, or with the default count, and
// the kind, bounds and window of opts. When the counter exists with the
// same spec it returns it with created false, so a retried create
// succeeds; with another spec it returns ErrExists.
func (e *Engine) CreateCounter(ctx context.Context, id string, opts shardcounter.CreateOptions) (*shardcounter.Counter, bool, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, false, err
	}
	shards := opts.Shards
	switch {
	case shards != 0 && (opts.FollowersCount != nil || opts.Visibility != ""):
		return nil, false, shardcounter.Errorf(shardcounter.EINVALID, "give either shards or followers_count and visibility, not both")
	case opts.FollowersCount != nil:
		n, err := e.cfg.Policy(*opts.FollowersCount, opts.Visibility)
		if err != nil {
			return nil, false, err
		}
		shards = n
	case opts.Visibility != "":
		return nil, false, shardcounter.Errorf(shardcounter.EINVALID, "visibility needs followers_count: give both, or shards")
	case shards == 0:
		shards = e.cfg.DefaultShards
	}
	spec := shardcounter.Spec{Shards: shards, Kind: opts.Kind, Min: opts.Min, Max: opts.Max, Window: opts.Window, TTL: opts.TTL}
	if spec.Kind == "" {
		spec.Kind = shardcounter.KindSum
	}
	if err := shardcounter.ValidateSpec(spec); err != nil {
		return nil, false, err
	}
	var c *shardcounter.Counter
	err := e.observe(ctx, &shardcounter.Commit{Op: shardcounter.CommitCreate, Counter: id}, func(ctx context.Context) (err error) {
		c, err = e.store.CreateCounter(ctx, id, spec)
		return err
	})
	if err == nil {
		return c, true, nil
	}
	if !errors.Is(err, shardcounter.ErrExists) {
		return nil, false, err
	}
	old, gerr := e.store.GetCounter(ctx, id)
	switch {
	case errors.Is(gerr, shardcounter.ErrNotFound):
		return nil, false, err // deleted in between: the conflict stands
	case gerr != nil:
		return nil, false, gerr
	case !old.Spec.Equal(spec):
		return nil, false, shardcounter.Errorf(shardcounter.EEXISTS, "counter %q already exists with other options (%s): delete it first, or create it with the same options", id, describeSpec(old.Spec))
	}
	return old, false, nil
}

// describeSpec says what a counter was created with, for error messages.
func describeSpec(s shardcounter.Spec) string {
	d := fmt.Sprintf("kind %s, %d shards", s.Kind, s.Shards)
	if s.Min != nil {
		d += fmt.Sprintf(", min %d", *s.Min)
	}
	if s.Max != nil {
		d += fmt.Sprintf(", max %d", *s.Max)
	}
	if s.Window != nil {
		d += fmt.Sprintf(", window %s:%s", s.Window.Bucket, s.Window.Retention)
	}
	return d
}

// ReshardCounter changes the counter's shard count; the value is kept.
func (e *Engine) ReshardCounter(ctx context.Context, id string, shards int) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	if err := shardcounter.ValidateShards(shards); err != nil {
		return nil, err
	}
	if e.pacer != nil {
		defer e.pacer.reshard(id)
	}
	var c *shardcounter.Counter
	err := e.observe(ctx, &shardcounter.Commit{Op: shardcounter.CommitReshard, Counter: id}, func(ctx context.Context) (err error) {
		c, err = e.store.ReshardCounter(ctx, id, shards)
		return err
	})
	return c, err
}

// DeleteCounter removes the counter.
func (e *Engine) DeleteCounter(ctx context.Context, id string) error {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return err
	}
	defer e.cache.forget(id)
	defer e.windows.forget(id)
	return e.observe(ctx, &shardcounter.Commit{Op: shardcounter.CommitDelete, Counter: id}, func(ctx context.Context) error {
		return e.store.DeleteCounter(ctx, id)
	})
}

// ListCounters returns a page of counters in id order. Next is set when a
// further page may exist.
func (e *Engine) ListCounters(ctx context.Context, opts shardcounter.ListOptions) (*shardcounter.CounterList, error) {
	limit, err := listLimit(opts)
	if err != nil {
		return nil, err
	}
	if opts.After != "" && !strings.HasPrefix(opts.After, opts.Prefix) {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "the page token belongs to another prefix: start again without it")
	}
	cs, err := e.store.ListCounters(ctx, opts.Prefix, opts.After, limit)
	if err != nil {
		return nil, err
	}
	list := &shardcounter.CounterList{Counters: cs}
	if len(cs) == limit {
		list.Next = cs[len(cs)-1].ID
	}
	return list, nil
}

// GetCounter returns the counter's metadata.
func (e *Engine) GetCounter(ctx context.Context, id string) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	return e.store.GetCounter(ctx, id)
}

// Placement returns each shard's value and the node that holds it.
func (e *Engine) Placement(ctx context.Context, id string) (*shardcounter.Placement, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	return e.store.Placement(ctx, id)
}

// IsMember reports whether member is in a distinct counter.
func (e *Engine) IsMember(ctx context.Context, id, member string) (bool, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return false, err
	}
	if err := shardcounter.ValidateID("member", member); err != nil {
		return false, err
	}
	return e.store.IsMember(ctx, id, member)
}

// ListMembers returns a page of a distinct counter's members in byte
// order, with the limits of ListCounters. Next is set when a further page
// may exist.
func (e *Engine) ListMembers(ctx context.Context, id string, opts shardcounter.ListOptions) (*shardcounter.MemberList, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	if opts.Prefix != "" {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "members cannot be filtered by prefix: page through them with after")
	}
	limit, err := listLimit(opts)
	if err != nil {
		return nil, err
	}
	ms, err := e.store.ListMembers(ctx, id, opts.After, limit)
	if err != nil {
		return nil, err
	}
	list := &shardcounter.MemberList{Members: ms}
	if len(ms) == limit {
		list.Next = ms[len(ms)-1]
	}
	return list, nil
}

// listLimit checks a page's limit and position and returns the limit.
func listLimit(opts shardcounter.ListOptions) (int, error) {
	limit := opts.Limit
	switch {
	case limit == 0:
		limit = shardcounter.DefaultListLimit
	case limit < 0 || limit > shardcounter.MaxListLimit:
		return 0, shardcounter.Errorf(shardcounter.EINVALID, "limit %d is out of range: give 1 to %d", limit, shardcounter.MaxListLimit)
	}
	if len(opts.Prefix) > shardcounter.MaxCounterIDLen || len(opts.After) > shardcounter.MaxCounterIDLen {
		return 0, shardcounter.Errorf(shardcounter.EINVALID, "prefix or page position longer than %d bytes", shardcounter.MaxCounterIDLen)
	}
	return limit, nil
}
