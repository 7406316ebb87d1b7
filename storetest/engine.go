package storetest

import (
	"context"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// ThroughEngine returns store seen through an engine over it: Add and
// Apply are the engine's writes (group commit; Increment.Total is
// Write.WantValue, and Outcome.Total the value returned), ReadCounter and
// ReadCounters its strong reads (gathered with concurrent ones), and the
// rest is the store's own. RunStrongReads on it checks that what the
// engine adds on the way keeps strong reads linearizable. The engine is
// closed at the end of the test.
func ThroughEngine(tb testing.TB, store shardcounter.CounterStore, cfg engine.Config) shardcounter.CounterStore {
	tb.Helper()
	e, err := engine.New(store, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close(context.Background()) })
	return engineStore{store, e}
}

// engineStore is ThroughEngine's store.
type engineStore struct {
	shardcounter.CounterStore
	e *engine.Engine
}

func (s engineStore) Add(ctx context.Context, id string, delta int64, _ uint64) error {
	_, err := s.e.WriteCounter(ctx, shardcounter.Write{Counter: id, Delta: delta})
	return err
}

func (s engineStore) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	ws := make([]shardcounter.Write, len(incs))
	for i, inc := range incs {
		ws[i] = shardcounter.Write{Counter: inc.Counter, Delta: inc.Delta, RequestID: inc.RequestID, WantValue: inc.Total}
	}
	res, err := s.e.WriteBatch(ctx, ws)
	if err != nil {
		return nil, err
	}
	out := make([]shardcounter.Outcome, len(res))
	for i, r := range res {
		out[i].Duplicate = r.Duplicate
		if r.Error != nil {
			out[i].Err = r.Error
		}
		out[i].Total = r.Value
	}
	return out, nil
}

func (s engineStore) ReadCounter(ctx context.Context, id string) (*shardcounter.Reading, error) {
	return s.e.ReadCounter(ctx, id, shardcounter.Strong)
}

func (s engineStore) ReadCounters(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	rs, err := s.e.ReadCounters(ctx, ids, shardcounter.Strong)
	if err != nil {
		return nil, err
	}
	out := make([]*shardcounter.Reading, len(rs))
	for i, r := range rs {
		switch {
		case r.Err == nil:
			out[i] = r.Reading
		case shardcounter.ErrorCode(r.Err) != shardcounter.ENOTFOUND:
			return nil, r.Err
		}
	}
	return out, nil
}
