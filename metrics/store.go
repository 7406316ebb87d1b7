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
// It counts the CounterStore methods that read and write counters, and
// passes the rest of CounterStore on by embedding (ranking definitions,
// rare and not counted; SetDedupeWindow). It forwards no optional
// capability: the engine finds those beneath it with shardcounter.As
// (Unwrap), so the wrapper can never hide one. It is safe for concurrent
// use when the store is.
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
	_ shardcounter.CounterStore = (*store)(nil)
	_ shardcounter.Unwrapper    = (*store)(nil)
)

// Unwrap returns the wrapped store (shardcounter.Unwrapper).
func (s *store) Unwrap() shardcounter.CounterStore { return s.CounterStore }

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

// ReadSketches counts failures under op "read_sketches".
func (s *store) ReadSketches(ctx context.Context, id string) (*shardcounter.Counter, [][]byte, error) {
	c, sk, err := s.CounterStore.ReadSketches(ctx, id)
	s.count("read_sketches", err)
	return c, sk, err
}
