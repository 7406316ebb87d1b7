package redis

// This file holds the round-2 store methods that are not yet written for
// this store. Each returns an internal error that says so; the storetest
// suite fails on them. It is removed when the last one is implemented.

import (
	"context"
	"time"

	"github.com/shardcounter/shardcounter"
)

func notYet(what string) error {
	return shardcounter.Errorf(shardcounter.EINTERNAL, "redis: %s is not implemented yet", what)
}

// unsupported refuses the parts of a spec this store cannot keep yet.
func unsupported(spec shardcounter.Spec) error {
	if spec.Kind == shardcounter.KindDistinct || spec.Bounded() || spec.Window != nil {
		return notYet("distinct, bounded and windowed counters")
	}
	return nil
}

// ReadWindow is not implemented yet.
func (s *CounterStore) ReadWindow(ctx context.Context, id string, from, to time.Time) (*shardcounter.Reading, error) {
	return nil, notYet("ReadWindow")
}

// ReadSeries is not implemented yet.
func (s *CounterStore) ReadSeries(ctx context.Context, id string, from, to time.Time) ([]shardcounter.Bucket, error) {
	return nil, notYet("ReadSeries")
}

// IsMember is not implemented yet.
func (s *CounterStore) IsMember(ctx context.Context, id, member string) (bool, error) {
	return false, notYet("IsMember")
}

// ListMembers is not implemented yet.
func (s *CounterStore) ListMembers(ctx context.Context, id, after string, limit int) ([]string, error) {
	return nil, notYet("ListMembers")
}
