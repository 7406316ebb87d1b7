package expiry

import (
	"context"
	"errors"
	"time"

	"github.com/shardcounter/shardcounter"
)

// CreateCounter creates the counter, first deleting an expired one of the
// same name, and gives it spec.TTL's deadline.
func (s *Store) CreateCounter(ctx context.Context, id string, spec shardcounter.Spec) (*shardcounter.Counter, error) {
	if err := s.alive(ctx, id, true); err != nil && !errors.Is(err, shardcounter.ErrNotFound) {
		return nil, err
	}
	ttl := time.Duration(spec.TTL)
	spec.TTL = 0
	if ttl != 0 {
		if err := shardcounter.ValidateTTL(ttl); err != nil {
			return nil, err
		}
	}
	c, err := s.CounterStore.CreateCounter(ctx, id, spec)
	if err != nil || ttl == 0 {
		return c, err
	}
	at := s.now().Add(ttl)
	if err := s.setDeadline(ctx, shardcounter.NameOf(id), at.UnixMilli()); err != nil {
		return nil, err
	}
	at = time.UnixMilli(at.UnixMilli()).UTC()
	c.ExpiresAt = &at
	return c, nil
}

// GetCounter returns the counter with its deadline, or ErrNotFound when
// it expired.
func (s *Store) GetCounter(ctx context.Context, id string) (*shardcounter.Counter, error) {
	if err := s.alive(ctx, id, false); err != nil {
		return nil, err
	}
	c, err := s.CounterStore.GetCounter(ctx, id)
	if err != nil {
		return nil, err
	}
	ds, err := s.deadlines(ctx, []string{shardcounter.NameOf(id)})
	if err != nil {
		return nil, err
	}
	if ds[0] != 0 {
		at := time.UnixMilli(ds[0]).UTC()
		c.ExpiresAt = &at
	}
	return c, nil
}

// skipInternal is a listing position past every internal record: they
// sort first, and no user's id starts with U+001E.
const skipInternal = shardcounter.InternalPrefix + "\U0010FFFF"

// ListCounters lists counters without the internal records and the
// expired names, with their deadlines.
func (s *Store) ListCounters(ctx context.Context, prefix, after string, limit int) ([]*shardcounter.Counter, error) {
	if shardcounter.IsInternalID(prefix) {
		return nil, nil
	}
	if prefix == "" && after < skipInternal {
		after = skipInternal
	}
	var out []*shardcounter.Counter
	for len(out) < limit {
		want := limit - len(out)
		cs, err := s.CounterStore.ListCounters(ctx, prefix, after, want)
		if err != nil || len(cs) == 0 {
			return out, err
		}
		after = cs[len(cs)-1].ID
		names := make([]string, len(cs))
		for i, c := range cs {
			names[i] = shardcounter.NameOf(c.ID)
		}
		ds, err := s.deadlines(ctx, names)
		if err != nil {
			return nil, err
		}
		now := s.nowMS()
		for i, c := range cs {
			if shardcounter.IsInternalID(c.ID) || expired(ds[i], now) {
				continue
			}
			if ds[i] != 0 {
				at := time.UnixMilli(ds[i]).UTC()
				c.ExpiresAt = &at
			}
			out = append(out, c)
		}
		if len(cs) < want {
			break
		}
	}
	return out, nil
}

// DeleteCounter deletes the counter and, when it is a name (not a hash's
// field), the name's deadline. An expired counter is ErrNotFound.
func (s *Store) DeleteCounter(ctx context.Context, id string) error {
	if err := s.alive(ctx, id, true); err != nil {
		return err
	}
	if err := s.CounterStore.DeleteCounter(ctx, id); err != nil {
		return err
	}
	if hash, field, ok := shardcounter.SplitHashID(id); !ok || field == "" {
		return s.dropRecord(ctx, hash)
	}
	return nil
}

// ReadCounter reads the counter, ErrNotFound when it expired.
func (s *Store) ReadCounter(ctx context.Context, id string) (*shardcounter.Reading, error) {
	if err := s.alive(ctx, id, false); err != nil {
		return nil, err
	}
	return s.CounterStore.ReadCounter(ctx, id)
}

// ReadCounters reads the counters, nil for an expired one.
func (s *Store) ReadCounters(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	if err := refuse(ids...); err != nil {
		return nil, err
	}
	if err := shardcounter.CheckReadBatch(len(ids)); err != nil {
		return nil, err
	}
	ok, err := s.live(ctx, ids, false)
	if err != nil {
		return nil, err
	}
	rs, err := s.CounterStore.ReadCounters(ctx, ids)
	if err != nil {
		return nil, err
	}
	for i := range rs {
		if !ok[i] {
			rs[i] = nil
		}
	}
	return rs, nil
}

// ReadShards reads the shards of a counter that has not expired.
func (s *Store) ReadShards(ctx context.Context, id string) (*shardcounter.Counter, []int64, error) {
	if err := s.alive(ctx, id, false); err != nil {
		return nil, nil, err
	}
	return s.CounterStore.ReadShards(ctx, id)
}

// Placement places the shards of a counter that has not expired.
func (s *Store) Placement(ctx context.Context, id string) (*shardcounter.Placement, error) {
	if err := s.alive(ctx, id, false); err != nil {
		return nil, err
	}
	return s.CounterStore.Placement(ctx, id)
}

// ReadWindow reads the window of a counter that has not expired.
func (s *Store) ReadWindow(ctx context.Context, id string, from, to time.Time) (*shardcounter.Reading, error) {
	if err := s.alive(ctx, id, false); err != nil {
		return nil, err
	}
	return s.CounterStore.ReadWindow(ctx, id, from, to)
}

// ReadSeries reads the buckets of a counter that has not expired.
func (s *Store) ReadSeries(ctx context.Context, id string, from, to time.Time) ([]shardcounter.Bucket, error) {
	if err := s.alive(ctx, id, false); err != nil {
		return nil, err
	}
	return s.CounterStore.ReadSeries(ctx, id, from, to)
}

// IsMember asks a distinct counter that has not expired.
func (s *Store) IsMember(ctx context.Context, id, member string) (bool, error) {
	if err := s.alive(ctx, id, false); err != nil {
		return false, err
	}
	return s.CounterStore.IsMember(ctx, id, member)
}

// ListMembers lists the members of a distinct counter that has not
// expired.
func (s *Store) ListMembers(ctx context.Context, id, after string, limit int) ([]string, error) {
	if err := s.alive(ctx, id, false); err != nil {
		return nil, err
	}
	return s.CounterStore.ListMembers(ctx, id, after, limit)
}

// ReshardCounter reshards a counter that has not expired.
func (s *Store) ReshardCounter(ctx context.Context, id string, shards int) (*shardcounter.Counter, error) {
	if err := s.alive(ctx, id, true); err != nil {
		return nil, err
	}
	return s.CounterStore.ReshardCounter(ctx, id, shards)
}

// Add adds to a counter; an expired one is deleted first, so the add
// finds it missing.
func (s *Store) Add(ctx context.Context, id string, delta int64, pick uint64) error {
	if err := s.alive(ctx, id, true); err != nil {
		return err
	}
	release := s.holdShared([]string{id})
	err := s.CounterStore.Add(ctx, id, delta, pick)
	release()
	s.afterWrite()
	return err
}

// Apply deletes the expired names the batch writes to, so that its
// increments start new counters (or find them missing, without Create),
// then applies it.
func (s *Store) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	ids := make([]string, 0, len(incs))
	for i, inc := range incs {
		if inc.Take != nil && shardcounter.IsLimitKeyID(inc.Counter) {
			continue // a rate limit key's state (the engine's), which has no deadline
		}
		if inc.Create != nil && inc.Create.TTL != 0 {
			c := *inc.Create
			c.TTL = 0
			incs[i].Create = &c
		}
		ids = append(ids, inc.Counter)
	}
	if err := refuse(ids...); err != nil {
		return nil, err
	}
	if _, err := s.live(ctx, ids, true); err != nil {
		return nil, err
	}
	release := s.holdShared(ids)
	out, err := s.CounterStore.Apply(ctx, incs)
	release()
	s.afterWrite()
	return out, err
}

// ReadSketches reads the shard sketches of an approx counter that has not
// expired.
func (s *Store) ReadSketches(ctx context.Context, id string) (*shardcounter.Counter, [][]byte, error) {
	if err := s.alive(ctx, id, false); err != nil {
		return nil, nil, err
	}
	return s.CounterStore.ReadSketches(ctx, id)
}
