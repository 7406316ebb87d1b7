package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardcounter/shardcounter"
)

// Store wraps a CounterStore so that its failures are counted in
// shardcounter_store_errors_total, by operation and kind. Only failures
// of the store itself count: unavailable, internal and outcome-unknown
// errors, including those of single items of a batch. Answers such as
// not_found or already_exists are the store working.
//
// The wrapper forwards what the engine asks of a store beyond
// CounterStore (RequestIDExpirer, MemoryReader, CommitPipeliner,
// TxnApplier, SketchStore, RankingStore) to the store when it implements
// it: a wrapper that hid one would change what the engine does. It is safe for concurrent use when the store is.
func (m *Metrics) Store(s shardcounter.CounterStore) shardcounter.CounterStore {
	st := &store{CounterStore: s, errs: make(map[string][3]prometheus.Counter)}
	for _, op := range storeOps {
		st.errs[op] = [3]prometheus.Counter{
			m.storeErrors.WithLabelValues(op, kindUnavailable),
			m.storeErrors.WithLabelValues(op, kindOutcomeUnknown),
			m.storeErrors.WithLabelValues(op, kindInternal),
		}
	}
	return st
}

// storeOps are the values of the "op" label: one per CounterStore
// method. Each has its series made up front, so that they exist at 0.
var storeOps = []string{
	"create", "get", "list", "delete",
	"read", "read_batch", "read_shards", "placement", "read_window", "read_series",
	"is_member", "list_members", "read_sketches",
	"add", "apply", "reshard", "ping",
}

// Kinds of store failure, the values of the "kind" label.
const (
	kindUnavailable    = "unavailable"
	kindOutcomeUnknown = "outcome_unknown"
	kindInternal       = "internal"
)

type store struct {
	shardcounter.CounterStore
	errs map[string][3]prometheus.Counter // op → counters by kind, made up front so the series exist at 0
}

var (
	_ shardcounter.CounterStore     = (*store)(nil)
	_ shardcounter.RequestIDExpirer = (*store)(nil)
	_ shardcounter.SketchStore      = (*store)(nil)
	_ shardcounter.TxnApplier       = (*store)(nil)
)

// count records err when it is a failure of the store, and returns it.
func (s *store) count(op string, err error) {
	if err == nil {
		return
	}
	c := s.errs[op]
	switch {
	case shardcounter.IsOutcomeUnknown(err):
		c[1].Inc()
	case shardcounter.ErrorCode(err) == shardcounter.EUNAVAILABLE:
		c[0].Inc()
	case shardcounter.ErrorCode(err) == shardcounter.EINTERNAL:
		c[2].Inc()
	}
}

func (s *store) CreateCounter(ctx context.Context, id string, spec shardcounter.Spec) (*shardcounter.Counter, error) {
	c, err := s.CounterStore.CreateCounter(ctx, id, spec)
	s.count("create", err)
	return c, err
}

func (s *store) GetCounter(ctx context.Context, id string) (*shardcounter.Counter, error) {
	c, err := s.CounterStore.GetCounter(ctx, id)
	s.count("get", err)
	return c, err
}

func (s *store) ListCounters(ctx context.Context, prefix, after string, limit int) ([]*shardcounter.Counter, error) {
	cs, err := s.CounterStore.ListCounters(ctx, prefix, after, limit)
	s.count("list", err)
	return cs, err
}

func (s *store) DeleteCounter(ctx context.Context, id string) error {
	err := s.CounterStore.DeleteCounter(ctx, id)
	s.count("delete", err)
	return err
}

func (s *store) ReadCounter(ctx context.Context, id string) (*shardcounter.Reading, error) {
	r, err := s.CounterStore.ReadCounter(ctx, id)
	s.count("read", err)
	return r, err
}

func (s *store) ReadShards(ctx context.Context, id string) (*shardcounter.Counter, []int64, error) {
	c, v, err := s.CounterStore.ReadShards(ctx, id)
	s.count("read_shards", err)
	return c, v, err
}

func (s *store) ReadCounters(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	rs, err := s.CounterStore.ReadCounters(ctx, ids)
	s.count("read_batch", err)
	return rs, err
}

func (s *store) Placement(ctx context.Context, id string) (*shardcounter.Placement, error) {
	p, err := s.CounterStore.Placement(ctx, id)
	s.count("placement", err)
	return p, err
}

func (s *store) ReadWindow(ctx context.Context, id string, from, to time.Time) (*shardcounter.Reading, error) {
	r, err := s.CounterStore.ReadWindow(ctx, id, from, to)
	s.count("read_window", err)
	return r, err
}

func (s *store) ReadSeries(ctx context.Context, id string, from, to time.Time) ([]shardcounter.Bucket, error) {
	bs, err := s.CounterStore.ReadSeries(ctx, id, from, to)
	s.count("read_series", err)
	return bs, err
}

func (s *store) IsMember(ctx context.Context, id, member string) (bool, error) {
	ok, err := s.CounterStore.IsMember(ctx, id, member)
	s.count("is_member", err)
	return ok, err
}

func (s *store) ListMembers(ctx context.Context, id, after string, limit int) ([]string, error) {
	ms, err := s.CounterStore.ListMembers(ctx, id, after, limit)
	s.count("list_members", err)
	return ms, err
}

func (s *store) Add(ctx context.Context, id string, delta int64, pick uint64) error {
	err := s.CounterStore.Add(ctx, id, delta, pick)
	s.count("add", err)
	return err
}

func (s *store) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	out, err := s.CounterStore.Apply(ctx, incs)
	s.count("apply", err)
	for _, o := range out {
		s.count("apply", o.Err)
	}
	return out, err
}

func (s *store) ReshardCounter(ctx context.Context, id string, shards int) (*shardcounter.Counter, error) {
	c, err := s.CounterStore.ReshardCounter(ctx, id, shards)
	s.count("reshard", err)
	return c, err
}

func (s *store) Ping(ctx context.Context) error {
	err := s.CounterStore.Ping(ctx)
	s.count("ping", err)
	return err
}

// SetDedupeWindow implements shardcounter.RequestIDExpirer by passing the
// window on to the store when it keeps one.
func (s *store) SetDedupeWindow(d time.Duration) {
	if x, ok := s.CounterStore.(shardcounter.RequestIDExpirer); ok {
		x.SetDedupeWindow(d)
	}
}

// ReadsFromMemory implements shardcounter.MemoryReader by passing on the
// store's answer, false when it has none.
func (s *store) ReadsFromMemory() bool {
	m, ok := s.CounterStore.(shardcounter.MemoryReader)
	return ok && m.ReadsFromMemory()
}

// CommitsInFlight implements shardcounter.CommitPipeliner by passing on
// the store's advice, 0 when it gives none.
func (s *store) CommitsInFlight() int {
	if p, ok := s.CounterStore.(shardcounter.CommitPipeliner); ok {
		return p.CommitsInFlight()
	}
	return 0
}

// TxnUnits implements shardcounter.TxnApplier by passing on the store's
// answer, false when it has none: the engine must see, through the
// wrapper, that a Redis Cluster store applies a transaction in one step.
func (s *store) TxnUnits() bool {
	t, ok := s.CounterStore.(shardcounter.TxnApplier)
	return ok && t.TxnUnits()
}

// ReadSketches implements shardcounter.SketchStore, counting failures
// under op "read_sketches".
func (s *store) ReadSketches(ctx context.Context, id string) (*shardcounter.Counter, [][]byte, error) {
	ss, ok := s.CounterStore.(shardcounter.SketchStore)
	if !ok {
		return nil, nil, shardcounter.Errorf(shardcounter.EINTERNAL, "%T keeps no sketches", s.CounterStore)
	}
	c, sk, err := ss.ReadSketches(ctx, id)
	s.count("read_sketches", err)
	return c, sk, err
}
