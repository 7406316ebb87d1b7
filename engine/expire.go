package engine

import (
	"context"
	"time"

	"github.com/shardcounter/shardcounter"
)

var _ shardcounter.Expirer = (*Engine)(nil)

// ExpireCounter gives name a deadline (shardcounter.Expirer). A cached
// read may show an expired counter for up to its staleness bound; strong
// reads never do.
func (e *Engine) ExpireCounter(ctx context.Context, name string, at time.Time) (bool, error) {
	return e.expiry.ExpireCounter(ctx, name, at)
}

// PersistCounter removes name's deadline (shardcounter.Expirer).
func (e *Engine) PersistCounter(ctx context.Context, name string) (bool, error) {
	return e.expiry.PersistCounter(ctx, name)
}

// CounterTTL reports name's deadline (shardcounter.Expirer).
func (e *Engine) CounterTTL(ctx context.Context, name string) (*shardcounter.TTL, error) {
	return e.expiry.CounterTTL(ctx, name)
}
