package expiry

import (
	"context"
	"errors"
	"time"

	"github.com/shardcounter/shardcounter"
)

// maxReplace bounds the tries of a deadline's replacement that other
// processes keep replacing at the same moment.
const maxReplace = 8

// ExpireCounter gives name the deadline at (see shardcounter.Expirer).
func (s *Store) ExpireCounter(ctx context.Context, name string, at time.Time) (bool, error) {
	if err := shardcounter.ValidateName("name", name); err != nil {
		return false, err
	}
	if _, err := s.live(ctx, []string{name}, true); err != nil {
		return false, err
	}
	mu := s.lock(name)
	mu.Lock()
	defer mu.Unlock()
	ok, err := s.exists(ctx, name)
	if err != nil || !ok {
		return false, err
	}
	ms := at.UnixMilli()
	if ms <= s.nowMS() {
		if err := s.deleteName(ctx, name); err != nil {
			return false, err
		}
		return true, s.dropRecord(ctx, name)
	}
	return true, s.setDeadline(ctx, name, ms)
}

// setDeadline replaces name's deadline record by one holding ms, with its
// index entry, in one Apply.
func (s *Store) setDeadline(ctx context.Context, name string, ms int64) error {
	if err := s.markUsed(ctx); err != nil {
		return err
	}
	max := ms
	rec := &shardcounter.Spec{Shards: 1, Kind: shardcounter.KindSum, Max: &max}
	idx := &shardcounter.Spec{Shards: 1, Kind: shardcounter.KindSum}
	for range maxReplace {
		if err := s.dropRecord(ctx, name); err != nil {
			return err
		}
		out, err := s.CounterStore.Apply(ctx, []shardcounter.Increment{
			{Counter: RecordID(name), Delta: ms, Create: rec},
			{Counter: IndexID(ms, name), Delta: 1, Create: idx},
		})
		if err != nil {
			return err
		}
		if errors.Is(out[0].Err, shardcounter.ErrOutOfRange) {
			continue // another process created the record after our delete
		}
		for _, o := range out {
			if o.Err != nil {
				return o.Err
			}
		}
		s.cache.put(name, ms)
		s.dueBy(ms)
		return nil
	}
	return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "the deadline of %q is being replaced by others at the same time: nothing changed, retry", name)
}

// markUsed records that the store has deadlines, once.
func (s *Store) markUsed(ctx context.Context) error {
	if s.inUse.Load() {
		return nil
	}
	spec := &shardcounter.Spec{Shards: 1, Kind: shardcounter.KindSum}
	out, err := s.CounterStore.Apply(ctx, []shardcounter.Increment{{Counter: inUseID, Delta: 1, Create: spec}})
	if err == nil {
		err = out[0].Err
	}
	if err != nil {
		return err
	}
	s.inUse.Store(true)
	return nil
}

// PersistCounter removes name's deadline (see shardcounter.Expirer).
func (s *Store) PersistCounter(ctx context.Context, name string) (bool, error) {
	if err := shardcounter.ValidateName("name", name); err != nil {
		return false, err
	}
	if _, err := s.live(ctx, []string{name}, true); err != nil {
		return false, err
	}
	mu := s.lock(name)
	mu.Lock()
	defer mu.Unlock()
	d, err := s.fresh(ctx, name)
	if err != nil || d == 0 {
		return false, err
	}
	if ok, err := s.exists(ctx, name); err != nil || !ok {
		return false, err
	}
	return true, s.dropRecord(ctx, name)
}

// CounterTTL reports name's state (see shardcounter.Expirer), reading
// its record past the cache.
func (s *Store) CounterTTL(ctx context.Context, name string) (*shardcounter.TTL, error) {
	if err := shardcounter.ValidateName("name", name); err != nil {
		return nil, err
	}
	d, err := s.fresh(ctx, name)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if expired(d, now.UnixMilli()) {
		return shardcounter.NewTTL(name, false, 0, now), nil
	}
	ok, err := s.exists(ctx, name)
	if err != nil {
		return nil, err
	}
	return shardcounter.NewTTL(name, ok, d, now), nil
}

// Deadline returns name's deadline in Unix ms as this process sees it (0
// for none), for front ends that keep a name's deadline across a reset.
func (s *Store) Deadline(ctx context.Context, name string) (int64, error) {
	ds, err := s.deadlines(ctx, []string{name})
	if err != nil {
		return 0, err
	}
	return ds[0], nil
}
