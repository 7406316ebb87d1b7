package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
)

// counterService is what a path does to its counters. A write or read of
// a counter that does not exist returns an error that matches
// shardcounter.ErrNotFound (unless the path creates counters on their
// first write), and create then makes it.
type counterService interface {
	// write applies w and reports whether it changed the value: every
	// applied delta write, a member write that changed membership.
	write(ctx context.Context, w shardcounter.Write) (changed bool, err error)
	read(ctx context.Context, id string, c shardcounter.Consistency) error
	// readMany reads the counters at once, as a timeline does; missing
	// counters are answered reads.
	readMany(ctx context.Context, ids []string, c shardcounter.Consistency) error
	// writeBatch applies ws together, creating missing counters, and
	// returns how many changed a value.
	writeBatch(ctx context.Context, ws []shardcounter.Write) (int64, error)
	create(ctx context.Context, id string) error
	// sum returns the sum of the counters' values, strong; a counter
	// that does not exist is an error, since the run wrote it.
	sum(ctx context.Context, ids []string) (int64, error)
	// window returns the sum of the counter's window over its retention.
	window(ctx context.Context, id string) (int64, error)
	remove(ctx context.Context, id string) error
}

// writeOf is the write op asks of counter id.
func writeOf(id string, op *operation, kind shardcounter.Kind) shardcounter.Write {
	if kind == shardcounter.KindDistinct {
		if op.delta < 0 {
			return shardcounter.RemoveMember(id, memberName(op.member))
		}
		return shardcounter.AddMember(id, memberName(op.member))
	}
	return shardcounter.Write{Counter: id, Delta: op.delta}
}

// prefillWrite is the write that prefills counter id: +1, or member 0.
func prefillWrite(id string, kind shardcounter.Kind) shardcounter.Write {
	return writeOf(id, &operation{delta: 1}, kind)
}

// changedOf reads a write result's change: a delta write that applied
// changed the value; a member write says.
func changedOf(r shardcounter.WriteResult) bool {
	return r.Applied && (r.Changed == nil || *r.Changed)
}

// naiveService is the seed algorithm: one store write per increment, on
// a shard picked at random (store.Add), and one Apply per member write.
type naiveService struct {
	store shardcounter.CounterStore
	spec  shardcounter.Spec
}

func (s naiveService) write(ctx context.Context, w shardcounter.Write) (bool, error) {
	if w.Member == "" {
		return true, s.store.Add(ctx, w.Counter, w.Delta, randomPick())
	}
	delta := int64(1)
	if !*w.Present {
		delta = -1
	}
	out, err := s.store.Apply(ctx, []shardcounter.Increment{{Counter: w.Counter, Delta: delta, Member: w.Member}})
	if err != nil {
		return false, err
	}
	return !out[0].Unchanged && out[0].Err == nil, out[0].Err
}

func (s naiveService) read(ctx context.Context, id string, _ shardcounter.Consistency) error {
	_, err := s.store.ReadCounter(ctx, id)
	return err
}

func (s naiveService) readMany(ctx context.Context, ids []string, _ shardcounter.Consistency) error {
	_, err := s.store.ReadCounters(ctx, ids)
	return err
}

// writeBatch applies ws in one store.Apply whose items create their
// counters, in the same commit.
func (s naiveService) writeBatch(ctx context.Context, ws []shardcounter.Write) (int64, error) {
	incs := make([]shardcounter.Increment, len(ws))
	for i, w := range ws {
		incs[i] = shardcounter.Increment{Counter: w.Counter, Delta: w.Delta, Member: w.Member, Pick: randomPick(), Create: &s.spec}
		if w.Member != "" {
			incs[i].Delta = 1
			if !*w.Present {
				incs[i].Delta = -1
			}
		}
	}
	out, err := s.store.Apply(ctx, incs)
	if err != nil {
		return 0, err
	}
	var n int64
	for i, o := range out {
		if o.Err != nil {
			return n, fmt.Errorf("%s: %w", incs[i].Counter, o.Err)
		}
		if !o.Duplicate && !o.Unchanged {
			n++
		}
	}
	return n, nil
}

func (s naiveService) create(ctx context.Context, id string) error {
	_, err := s.store.CreateCounter(ctx, id, s.spec)
	return err
}

func (s naiveService) sum(ctx context.Context, ids []string) (int64, error) {
	rs, err := s.store.ReadCounters(ctx, ids)
	if err != nil {
		return 0, err
	}
	var total int64
	for i, r := range rs {
		if r == nil {
			return 0, shardcounter.Errorf(shardcounter.ENOTFOUND, "counter %q was written and is gone", ids[i])
		}
		total += r.Value
	}
	return total, nil
}

// window reads the buckets from the start of the retention to a bucket
// past now, which holds every write of the run.
func (s naiveService) window(ctx context.Context, id string) (int64, error) {
	w := s.spec.Window
	now := time.Now()
	r, err := s.store.ReadWindow(ctx, id, w.BucketOf(now.Add(-time.Duration(w.Retention))), now.Add(time.Duration(w.Bucket)))
	if err != nil {
		return 0, err
	}
	return r.Value, nil
}

func (s naiveService) remove(ctx context.Context, id string) error {
	return s.store.DeleteCounter(ctx, id)
}

// counterTarget drives svc on cfg.Counters fresh counters of variant v.
// A counter is created on its first write: by the path itself where it
// creates counters on their first write (auto-create), else by whichever
// client meets ErrNotFound first. Reading a counter nobody has written
// yet is an answered read, as it is for a user. Counters written are
// read back and deleted after the run.
func counterTarget(cfg Config, svc counterService, path string, v Variant, shards int) target {
	prefix := runPrefix(path, v, shards)
	// Ids are made when needed rather than kept: a million of them would
	// weigh on the memory figures of the paths served in this process.
	id := func(i int) string { return prefix + strconv.Itoa(i) }
	created := make([]atomic.Bool, cfg.Counters)
	write := func(ctx context.Context, op *operation) error {
		w := writeOf(id(op.counter), op, cfg.Kind)
		changed, err := svc.write(ctx, w)
		if errors.Is(err, shardcounter.ErrNotFound) {
			if cerr := svc.create(ctx, w.Counter); cerr != nil && !errors.Is(cerr, shardcounter.ErrExists) {
				return cerr
			}
			created[op.counter].Store(true)
			changed, err = svc.write(ctx, w)
		}
		// Marked on every write that may have applied, not only on
		// create: auto-create makes counters without a not-found first.
		if (err == nil || shardcounter.IsOutcomeUnknown(err)) && !created[op.counter].Load() {
			created[op.counter].Store(true)
		}
		op.changed = changed
		return err
	}
	t := target{touched: func() int64 { return countSet(created) }}
	t.total = func(ctx context.Context) (int64, error) {
		var total atomic.Int64
		err := forChunks(ctx, created, shardcounter.MaxReadBatch, cfg.Clients, func(ctx context.Context, is []int) error {
			ids := make([]string, len(is))
			for j, i := range is {
				ids[j] = id(i)
			}
			n, err := svc.sum(ctx, ids)
			total.Add(n)
			return err
		})
		return total.Load(), err
	}
	if v.Window != nil {
		t.windowTotal = func(ctx context.Context) (int64, error) {
			var total atomic.Int64
			err := forCreated(ctx, created, cfg.Clients, func(ctx context.Context, i int) error {
				n, err := svc.window(ctx, id(i))
				total.Add(n)
				return err
			})
			return total.Load(), err
		}
	}
	t.do = oneByOne(write,
		func(ctx context.Context, op *operation) error {
			if err := svc.read(ctx, id(op.counter), cfg.ReadConsistency); !errors.Is(err, shardcounter.ErrNotFound) {
				return err
			}
			return nil
		},
		func(ctx context.Context, op *operation) error {
			ids := make([]string, len(op.counters))
			for j, c := range op.counters {
				ids[j] = id(c)
			}
			return svc.readMany(ctx, ids, cfg.ReadConsistency)
		})
	t.prefill = func(ctx context.Context, is []int) (int64, error) {
		ws := make([]shardcounter.Write, len(is))
		for j, i := range is {
			ws[j] = prefillWrite(id(i), cfg.Kind)
			created[i].Store(true)
		}
		return svc.writeBatch(ctx, ws)
	}
	t.cleanup = func(ctx context.Context) error {
		if cfg.KeepCounters {
			return nil
		}
		return forCreated(ctx, created, cfg.Clients, func(ctx context.Context, i int) error {
			return svc.remove(ctx, id(i))
		})
	}
	return t
}

// oneByOne returns a target's do that performs each operation in turn:
// write (which sets op.changed), read of one counter, or readMany of a
// timeline's.
func oneByOne(write, read, readMany func(ctx context.Context, op *operation) error) func(ctx context.Context, ops []operation) {
	return func(ctx context.Context, ops []operation) {
		for i := range ops {
			op := &ops[i]
			switch op.kind {
			case opWrite:
				op.err = write(ctx, op)
			case opRead:
				op.err = read(ctx, op)
			case opReadBatch:
				op.err = readMany(ctx, op)
			}
		}
	}
}

// countSet is how many of set are true.
func countSet(set []atomic.Bool) int64 {
	var n int64
	for i := range set {
		if set[i].Load() {
			n++
		}
	}
	return n
}

// runPrefix is the prefix of a run's counter ids: "bench/", a time that
// keeps runs apart, and the path, shard count and variant, so that a
// counter left behind says where it came from.
func runPrefix(path string, v Variant, shards int) string {
	if v.Name == VariantPlain {
		return fmt.Sprintf("bench/%x/%s-%d-shards/", time.Now().UnixNano(), path, shards)
	}
	return fmt.Sprintf("bench/%x/%s-%d-shards-%s/", time.Now().UnixNano(), path, shards, v.Name)
}

// forChunks calls fn with the indexes i where set[i] is true, up to n at
// a time, from up to workers goroutines, and returns the first error.
func forChunks(ctx context.Context, set []atomic.Bool, n, workers int, fn func(ctx context.Context, idx []int) error) error {
	var chunks [][]int
	var idx []int
	for i := range set {
		if !set[i].Load() {
			continue
		}
		if idx = append(idx, i); len(idx) == n {
			chunks, idx = append(chunks, idx), nil
		}
	}
	if len(idx) > 0 {
		chunks = append(chunks, idx)
	}
	return forEach(ctx, len(chunks), workers, func(ctx context.Context, c int) error { return fn(ctx, chunks[c]) })
}

// forCreated calls fn for every i with created[i] set, from up to
// workers goroutines, since a run over many counters leaves thousands to
// read back and delete. It returns the first error.
func forCreated(ctx context.Context, created []atomic.Bool, workers int, fn func(ctx context.Context, i int) error) error {
	return forEach(ctx, len(created), workers, func(ctx context.Context, i int) error {
		if !created[i].Load() {
			return nil
		}
		return fn(ctx, i)
	})
}

// forEach calls fn for every i in [0, n) from up to workers goroutines
// and returns the first error, after which it starts no more calls.
func forEach(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range max(min(workers, n), 1) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// randomPick is a shard pick for a write without a request id: the
// seed's random shard.
func randomPick() uint64 { return rand.Uint64() }
