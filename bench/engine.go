package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// engineService writes and reads through an engine; it creates, reads
// back and deletes through the store, since the engine is closed by then.
type engineService struct {
	naiveService
	eng *engine.Engine
}

// startEngine starts the engine of one engine-path run. Plain counters
// are created by their first write (the engine's auto-create, with the
// run's shard count), as a server does; bounded and windowed ones by the
// run, on ErrNotFound, since auto-create makes plain counters.
func startEngine(cfg Config, spec shardcounter.Spec, inFlight int) (*engineService, error) {
	eng, err := engine.New(cfg.Store, engineConfig(cfg, spec, inFlight))
	if err != nil {
		return nil, err
	}
	return &engineService{naiveService{cfg.Store, spec}, eng}, nil
}

// engineConfig is the engine configuration of the engine path and of
// the servers the http and resp paths start. A store that paces its
// shard records (Firestore, Datastore) is paced as serve paces it, at its
// own interval (its DSN's shard_write_interval), so that the figures are
// those of a server.
func engineConfig(cfg Config, spec shardcounter.Spec, inFlight int) engine.Config {
	plain := spec.Min == nil && spec.Max == nil && spec.Window == nil
	ec := engine.Config{DefaultShards: spec.Shards, NoAutoCreate: !plain, MaxInFlight: inFlight, MaxReadsInFlight: cfg.MaxReadsInFlight,
		MaxStaleness: cfg.MaxStaleness, CacheSize: cfg.CacheSize}
	// The store's own pace, as serve keeps it, unless the run sets one.
	switch sp, ok := shardcounter.As[shardcounter.ShardPacer](cfg.Store); {
	case cfg.ShardWriteInterval != nil:
		ec.ShardWriteInterval = *cfg.ShardWriteInterval
	case ok:
		ec.ShardWriteInterval = sp.ShardWriteInterval()
	}
	return ec
}

func (s *engineService) write(ctx context.Context, w shardcounter.Write) (bool, error) {
	r, err := s.eng.WriteCounter(ctx, w)
	if err != nil {
		return false, err
	}
	return changedOf(*r), nil
}

func (s *engineService) read(ctx context.Context, id string, c shardcounter.Consistency) error {
	_, err := s.eng.ReadCounter(ctx, id, c)
	return err
}

func (s *engineService) readMany(ctx context.Context, ids []string, c shardcounter.Consistency) error {
	_, err := s.eng.ReadCounters(ctx, ids, c)
	return err
}

// writeBatch writes through the engine's WriteBatch; counters that it
// does not create itself (bounded, windowed) are created first.
func (s *engineService) writeBatch(ctx context.Context, ws []shardcounter.Write) (int64, error) {
	return writeBatchCreating(ctx, ws, s.eng.WriteBatch, s.create)
}

// writesPerCommit is how many writes the engine's store commits carried
// on average.
func (s *engineService) writesPerCommit() float64 {
	st := s.eng.Stats()
	return float64(st.Writes.Load()) / float64(max(st.Flushes.Load(), 1))
}

// writeBatchCreating applies ws with batch; items that fail with
// ErrNotFound have their counters created with create and are applied
// again. It returns how many writes changed a value.
func writeBatchCreating(ctx context.Context, ws []shardcounter.Write,
	batch func(context.Context, []shardcounter.Write) ([]shardcounter.WriteResult, error),
	create func(context.Context, string) error) (int64, error) {
	var n int64
	for range 2 {
		rs, err := batch(ctx, ws)
		if err != nil {
			return n, err
		}
		var missing []shardcounter.Write
		for i, r := range rs {
			switch {
			case r.Error == nil:
				if changedOf(r) {
					n++
				}
			case r.Error.Code == shardcounter.ENOTFOUND:
				if err := create(ctx, ws[i].Counter); err != nil && !errors.Is(err, shardcounter.ErrExists) {
					return n, err
				}
				missing = append(missing, ws[i])
			default:
				return n, fmt.Errorf("%s: %w", ws[i].Counter, r.Error)
			}
		}
		if len(missing) == 0 {
			return n, nil
		}
		ws = missing
	}
	return n, fmt.Errorf("%s: still missing after it was created", ws[0].Counter)
}
