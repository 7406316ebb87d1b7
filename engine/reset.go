package engine

import (
	"context"

	"github.com/shardcounter/shardcounter"
)

var _ shardcounter.Resetter = (*Engine)(nil)

// ResetCounter resets a sum counter (shardcounter.Resetter), creating a
// missing one with the default shard count. It is one step with respect
// to the engine's writes and strong reads of the counter (package
// expiry).
func (e *Engine) ResetCounter(ctx context.Context, id string, r shardcounter.Reset) (*shardcounter.ResetResult, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	create := shardcounter.Spec{Shards: e.cfg.DefaultShards, Kind: shardcounter.KindSum}
	var res *shardcounter.ResetResult
	err := e.observe(ctx, &shardcounter.Commit{Op: shardcounter.CommitReset, Counter: id}, func(ctx context.Context) (err error) {
		res, err = e.store.ResetCounter(ctx, id, r, create)
		return err
	})
	return res, err
}
