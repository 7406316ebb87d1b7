package engine

// This file holds the round-2 service methods that the engine does not
// serve yet. Each returns an internal error that says so. It is removed
// when the last one is implemented.

import (
	"context"
	"time"

	"github.com/shardcounter/shardcounter"
)

func notYet(what string) error {
	return shardcounter.Errorf(shardcounter.EINTERNAL, "engine: %s is not implemented yet", what)
}

// GetCounter returns the counter's metadata.
func (e *Engine) GetCounter(ctx context.Context, id string) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	return e.store.GetCounter(ctx, id)
}

// ReadCounters is not implemented yet.
func (e *Engine) ReadCounters(ctx context.Context, ids []string, c shardcounter.Consistency) ([]shardcounter.ReadResult, error) {
	return nil, notYet("ReadCounters")
}

// ReadWindow is not implemented yet.
func (e *Engine) ReadWindow(ctx context.Context, id string, last time.Duration) (*shardcounter.Reading, error) {
	return nil, notYet("ReadWindow")
}

// ReadSeries is not implemented yet.
func (e *Engine) ReadSeries(ctx context.Context, id string, last, bucket time.Duration) (*shardcounter.Series, error) {
	return nil, notYet("ReadSeries")
}

// Placement is not implemented yet.
func (e *Engine) Placement(ctx context.Context, id string) (*shardcounter.Placement, error) {
	return nil, notYet("Placement")
}

// IsMember is not implemented yet.
func (e *Engine) IsMember(ctx context.Context, id, member string) (bool, error) {
	return false, notYet("IsMember")
}

// ListMembers is not implemented yet.
func (e *Engine) ListMembers(ctx context.Context, id string, opts shardcounter.ListOptions) (*shardcounter.MemberList, error) {
	return nil, notYet("ListMembers")
}
