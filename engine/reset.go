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
	defer e.ranks.changed(id) // a reset is no delta a ranking can add
	return e.expiry.ResetCounter(ctx, id, r, create)
}
