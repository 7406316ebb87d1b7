// Package model is a plain in-memory shardcounter.CounterStore written
// from the store contract's words (the doc comments of CounterStore,
// Increment, Outcome and Spec, and docs/DESIGN.md's "The store contract"),
// to check the real stores against: storetest's differential test runs the
// same random batches through it and through a store and compares every
// outcome and every read, and the engine's tests run on it.
//
// It shares no code with any store or with the code that decides a
// store's writes: it decides dedupe, membership, bounds, int64 overflow,
// create on write, kinds, window buckets and whether a sketch changed
// itself, with maps, in the order the contract states them. It uses only
// what defines the contract: the root package's types, errors and
// validation of names and specs, package shard's placement, and package
// sketch's data format. One mutex makes every call one atomic step.
//
// It is for tests only: no DSN opens it, and nothing it holds survives
// the process.
package model

import (
	"context"
	"math"
	"math/big"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/shard"
	"github.com/shardcounter/shardcounter/sketch"
)

// Options configure a Store.
type Options struct {
	// Now is the store's clock: creation times, the age of request ids
	// and the bucket a write lands in. Default time.Now.
	Now func() time.Time
	// DedupeWindow is how long a request id is remembered. Default
	// shardcounter.DefaultDedupeWindow.
	DedupeWindow time.Duration
}

// Store is the model. It is safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	now      func() time.Time
	dedupe   time.Duration
	counters map[string]*counter
	rankings map[string]shardcounter.Ranking
	closed   bool
}

// counter is everything the contract says a counter holds.
type counter struct {
	c        shardcounter.Counter
	total    int64            // sum: the sum of every applied delta
	shards   []int64          // sum: where the deltas landed; distinct: members per shard
	members  map[string]bool  // distinct: the members present
	sketches [][]byte         // approx: each shard's sketch, nil for none yet
	union    *int64           // approx: the estimate of their union, once computed
	requests map[string]int64 // request id → when it was recorded (unix ns)
	buckets  map[int64]int64  // window: bucket start (unix ns) → sum of its writes
	limit    *keyState        // a rate limit key's state counter: its takes
}

var (
	_ shardcounter.CounterStore     = (*Store)(nil)
	_ shardcounter.SketchStore      = (*Store)(nil)
	_ shardcounter.RequestIDExpirer = (*Store)(nil)
	_ shardcounter.RankingStore     = (*Store)(nil)
)

// New returns an empty model.
func New(opts Options) *Store {
	s := &Store{now: opts.Now, counters: map[string]*counter{}, rankings: map[string]shardcounter.Ranking{}}
	if s.now == nil {
		s.now = time.Now
	}
	s.SetDedupeWindow(opts.DedupeWindow)
	return s
}

// SetDedupeWindow sets how long a request id is remembered; d <= 0 means
// shardcounter.DefaultDedupeWindow.
func (s *Store) SetDedupeWindow(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d <= 0 {
		d = shardcounter.DefaultDedupeWindow
	}
	s.dedupe = d
}

// lock takes the model's one lock, or returns the error of a call whose
// context has ended: nothing is done.
func (s *Store) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "model: %v", err)
	}
	s.mu.Lock()
	return nil
}

// Ping answers unless the model was closed.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.closed {
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "model: closed")
	}
	return nil
}

// Close marks the model closed (Ping fails); its data stays readable.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// kind returns a counter's kind, "" read as sum.
func kind(c *counter) shardcounter.Kind {
	if c.c.Kind == "" {
		return shardcounter.KindSum
	}
	return c.c.Kind
}

// newCounter returns a counter of spec, created at now.
func newCounter(id string, spec shardcounter.Spec, now time.Time) *counter {
	spec.TTL = 0 // an option of the create, not kept
	if spec.Kind == "" {
		spec.Kind = shardcounter.KindSum
	}
	spec = cloneSpec(spec)
	c := &counter{c: shardcounter.Counter{ID: id, Spec: spec, CreatedAt: now}, requests: map[string]int64{}}
	switch spec.Kind {
	case shardcounter.KindDistinct:
		c.shards = make([]int64, spec.Shards)
		c.members = map[string]bool{}
	case shardcounter.KindApprox:
		c.sketches = make([][]byte, spec.Shards)
	default:
		c.shards = make([]int64, spec.Shards)
		c.buckets = map[int64]int64{}
	}
	return c
}

func ptr(v int64) *int64 { return &v }

// cloneSpec returns spec with nothing shared with the caller's.
func cloneSpec(spec shardcounter.Spec) shardcounter.Spec {
	if spec.Min != nil {
		spec.Min = ptr(*spec.Min)
	}
	if spec.Max != nil {
		spec.Max = ptr(*spec.Max)
	}
	if spec.Window != nil {
		w := *spec.Window
		spec.Window = &w
	}
	return spec
}

// meta returns a copy of the counter's metadata.
func (c *counter) meta() *shardcounter.Counter {
	m := c.c
	m.Spec = cloneSpec(m.Spec)
	return &m
}

// get returns a counter or ErrNotFound.
func (s *Store) get(id string) (*counter, error) {
	if c := s.counters[id]; c != nil {
		return c, nil
	}
	return nil, shardcounter.CounterNotFound(id)
}

// CreateCounter records a counter of spec, zero-valued.
func (s *Store) CreateCounter(ctx context.Context, id string, spec shardcounter.Spec) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID(shardcounter.CounterIDKind, id); err != nil {
		return nil, err
	}
	if err := shardcounter.ValidateSpec(spec); err != nil {
		return nil, err
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if s.counters[id] != nil {
		return nil, shardcounter.Errorf(shardcounter.EEXISTS, "counter %q already exists", id)
	}
	c := newCounter(id, spec, s.now())
	s.counters[id] = c
	return c.meta(), nil
}

// GetCounter returns a counter's metadata.
func (s *Store) GetCounter(ctx context.Context, id string) (*shardcounter.Counter, error) {
	return withCounter(ctx, s, id, func(c *counter) (*shardcounter.Counter, error) { return c.meta(), nil })
}

// ListCounters returns up to limit counters whose ids start with prefix
// and sort after after, in byte order.
func (s *Store) ListCounters(ctx context.Context, prefix, after string, limit int) ([]*shardcounter.Counter, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var ids []string
	for id := range s.counters {
		if strings.HasPrefix(id, prefix) && id > after {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []*shardcounter.Counter
	for _, id := range ids[:min(len(ids), max(limit, 0))] {
		out = append(out, s.counters[id].meta())
	}
	return out, nil
}

// DeleteCounter forgets a counter and all it holds.
func (s *Store) DeleteCounter(ctx context.Context, id string) error {
	_, err := withCounter(ctx, s, id, func(*counter) (struct{}, error) {
		delete(s.counters, id)
		return struct{}{}, nil
	})
	return err
}

// value returns a counter's value: its total, its member count, or the
// estimate of the union of its shards' sketches.
func (c *counter) value() int64 {
	switch kind(c) {
	case shardcounter.KindDistinct:
		return int64(len(c.members))
	case shardcounter.KindApprox:
		if c.union == nil { // an estimate costs a pass over the registers
			c.union = ptr(estimate(c.sketches...))
		}
		return *c.union
	}
	return c.total
}

// estimate returns the estimate of the union of encoded sketches.
func estimate(sketches ...[]byte) int64 {
	n, err := sketch.Count(sketches)
	if err != nil { // the model only keeps what sketch encoded
		panic(err)
	}
	return n
}

// ReshardCounter changes a counter's shard count, keeping its value.
func (s *Store) ReshardCounter(ctx context.Context, id string, shards int) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateShards(shards); err != nil {
		return nil, err
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	c, err := s.get(id)
	if err != nil {
		return nil, err
	}
	switch kind(c) {
	case shardcounter.KindDistinct: // a member lives on ForMember(m) mod n
		c.shards = make([]int64, shards)
		for m := range c.members {
			c.shards[shard.Of(shard.ForMember(m), shards)]++
		}
	case shardcounter.KindApprox: // removed shard i merges into i mod n
		for i := shards; i < len(c.sketches); i++ {
			c.sketches[i%shards] = merge(c.sketches[i%shards], c.sketches[i])
		}
		c.sketches = append(c.sketches[:min(shards, len(c.sketches))], make([][]byte, max(0, shards-len(c.sketches)))...)
		c.union = nil
	default: // removed shard i folds into i mod n; new shards start at 0
		sums := make([]*big.Int, shards)
		for i := range sums {
			sums[i] = new(big.Int)
		}
		for i, v := range c.shards {
			sums[i%shards].Add(sums[i%shards], big.NewInt(v))
		}
		c.shards = make([]int64, shards)
		for i, v := range sums {
			if !v.IsInt64() { // the total fits: it goes on shard 0
				clear(c.shards)
				c.shards[0] = c.total
				break
			}
			c.shards[i] = v.Int64()
		}
	}
	c.c.Shards = shards
	return c.meta(), nil
}

// place adds v to shard k, or, when k cannot hold it, to the first shard
// after k that can: only the total is the counter's value, and some
// shard always has room when the total does.
func (c *counter) place(k int, v int64) {
	for i := range len(c.shards) {
		j := (k + i) % len(c.shards)
		if sum, ok := add(c.shards[j], v); ok {
			c.shards[j] = sum
			return
		}
	}
	panic("model: no shard holds a value its total holds")
}

// add returns a+b and whether it is an int64.
func add(a, b int64) (int64, bool) {
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, false
	}
	return a + b, true
}

// merge returns the encoding of the union of two encoded sketches.
func merge(a, b []byte) []byte {
	u, err := sketch.Union([][]byte{a, b})
	if err != nil {
		panic(err)
	}
	return u.Encode()
}

// Add adds delta to shard pick mod n of a sum counter.
func (s *Store) Add(ctx context.Context, id string, delta int64, pick uint64) error {
	out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: delta, Pick: pick}})
	if err != nil {
		return err
	}
	return out[0].Err
}

// Apply applies a batch, item by item in order, as one atomic step.
func (s *Store) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	b := &batch{s: s, now: s.now(), created: map[string]*counter{}, sketches: map[sketchKey]*pending{}, incs: incs}
	out := make([]shardcounter.Outcome, len(incs))
	for i, inc := range incs {
		if inc.If != 0 {
			// Conditional on an earlier item: skipped unless it applied
			// and was not skipped itself.
			if j := inc.If - 1; j < 0 || j >= i {
				out[i].Err = shardcounter.Errorf(shardcounter.EINVALID, "item %d is conditional on item %d, which is not before it", i, j)
				continue
			} else if out[j].Err != nil || out[j].Skipped {
				out[i].Skipped = true
				continue
			}
			inc.If = 0
		}
		b.item(inc, i, &out[i])
	}
	// Each shard's sketch changes once a commit; its items are unchanged
	// together when it did not.
	for k, p := range b.sketches {
		c := k.c
		before := c.sketches[k.shard]
		after := apply(before, p.members, p.merges)
		changed := !sameSketch(before, after)
		c.sketches[k.shard], c.union = after, nil
		for _, i := range p.items {
			out[i].Unchanged = !changed
		}
	}
	for i, inc := range incs {
		if inc.Total && out[i].Err == nil && (inc.If == 0 || !out[i].Skipped) {
			var v int64 // a bounded item skipped on a counter still missing: 0
			if c := s.counters[inc.Counter]; c != nil {
				v = c.value()
			}
			out[i].Total = &v
		}
	}
	return out, nil
}

// batch is one Apply in progress.
type batch struct {
	s        *Store
	now      time.Time
	created  map[string]*counter // counters made by an item of the batch
	sketches map[sketchKey]*pending
	incs     []shardcounter.Increment
	busy     map[string]bool // counters of the batch's items other than removals (isBusy)
}

// sketchKey is one shard of one approx counter.
type sketchKey struct {
	c     *counter
	shard int
}

// pending is what a batch adds to one shard's sketch, and the items that
// add it.
type pending struct {
	members []string
	merges  [][]byte
	items   []int
}
