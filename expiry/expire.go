package expiry

import (
	"context"
	"time"

	"github.com/shardcounter/shardcounter"
)

// ExpireCounter gives name the deadline at (see shardcounter.Expirer), in
// one commit of its own; the engine makes it part of its group commit
// instead (ApplyChanges).
func (s *Store) ExpireCounter(ctx context.Context, name string, at time.Time) (bool, error) {
	if err := shardcounter.ValidateName("name", name); err != nil {
		return false, err
	}
	return s.change(ctx, Change{Name: name, At: max(at.UnixMilli(), 1)})
}

// PersistCounter removes name's deadline (see shardcounter.Expirer).
func (s *Store) PersistCounter(ctx context.Context, name string) (bool, error) {
	if err := shardcounter.ValidateName("name", name); err != nil {
		return false, err
	}
	return s.change(ctx, Change{Name: name, Cond: "xx"})
}

// setDeadline gives name, which holds something, the deadline ms in one
// commit, for a create or a reset that gives one. The caller holds no
// name lock.
func (s *Store) setDeadline(ctx context.Context, name string, ms int64) error {
	_, res, err := s.commitChanges(ctx, nil, []Change{{Name: name, At: max(ms, 1), Known: true}})
	if err != nil {
		return err
	}
	return res[0].Err
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
