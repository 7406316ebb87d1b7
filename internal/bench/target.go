package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// counterService is what a path does to one counter. write adds 1; a
// write or read of a counter that does not exist returns an error that
// matches shardcounter.ErrNotFound, and create then makes it.
type counterService interface {
	write(ctx context.Context, id string) error
	read(ctx context.Context, id string, c shardcounter.Consistency) error
	create(ctx context.Context, id string, shards int) error
	value(ctx context.Context, id string) (int64, error)
	remove(ctx context.Context, id string) error
}

// naiveService is the seed algorithm: one store write per increment, on
// a shard picked at random.
type naiveService struct{ store shardcounter.CounterStore }

func (s naiveService) write(ctx context.Context, id string) error {
	return s.store.Add(ctx, id, 1, rand.Uint64())
}

func (s naiveService) read(ctx context.Context, id string, _ shardcounter.Consistency) error {
	_, err := s.store.ReadCounter(ctx, id)
	return err
}

func (s naiveService) create(ctx context.Context, id string, shards int) error {
	_, err := s.store.CreateCounter(ctx, id, shardcounter.Spec{Shards: shards})
	return err
}

func (s naiveService) value(ctx context.Context, id string) (int64, error) {
	r, err := s.store.ReadCounter(ctx, id)
	if err != nil {
		return 0, err
	}
	return r.Value, nil
}

func (s naiveService) remove(ctx context.Context, id string) error {
	return s.store.DeleteCounter(ctx, id)
}

// engineService writes and reads through an engine; it creates, reads
// back and deletes through the store, since the engine is closed by then.
type engineService struct {
	eng   *engine.Engine
	store shardcounter.CounterStore
}

func (s engineService) write(ctx context.Context, id string) error {
	_, err := s.eng.WriteCounter(ctx, shardcounter.Write{Counter: id, Delta: 1})
	return err
}

func (s engineService) read(ctx context.Context, id string, c shardcounter.Consistency) error {
	_, err := s.eng.ReadCounter(ctx, id, c)
	return err
}

func (s engineService) create(ctx context.Context, id string, shards int) error {
	return naiveService{s.store}.create(ctx, id, shards)
}

func (s engineService) value(ctx context.Context, id string) (int64, error) {
	return naiveService{s.store}.value(ctx, id)
}

func (s engineService) remove(ctx context.Context, id string) error {
	return naiveService{s.store}.remove(ctx, id)
}

// counterTarget drives svc on cfg.Counters fresh counters of the given
// shard count. A counter is created on its first write, by whichever
// client gets there first (or by the server's auto-create); reading a counter nobody has written yet is
// an answered read of 0, as it is for a user. Counters created are read
// back and deleted after the run.
func counterTarget(cfg Config, svc counterService, path string, shards int) target {
	ids := make([]string, cfg.Counters)
	prefix := fmt.Sprintf("bench/%x/%s-%d-shards/", time.Now().UnixNano(), path, shards)
	for i := range ids {
		ids[i] = prefix + fmt.Sprint(i)
	}
	created := make([]atomic.Bool, len(ids))
	return target{
		write: func(ctx context.Context, i int) error {
			err := svc.write(ctx, ids[i])
			if errors.Is(err, shardcounter.ErrNotFound) {
				if cerr := svc.create(ctx, ids[i], shards); cerr != nil && !errors.Is(cerr, shardcounter.ErrExists) {
					return cerr
				}
				created[i].Store(true)
				err = svc.write(ctx, ids[i])
			}
			// Marked on every write, not only on create: a server with
			// auto-create makes counters without a 404 first.
			if err == nil && !created[i].Load() {
				created[i].Store(true)
			}
			return err
		},
		read: func(ctx context.Context, i int) error {
			if err := svc.read(ctx, ids[i], cfg.ReadConsistency); err != nil && !errors.Is(err, shardcounter.ErrNotFound) {
				return err
			}
			return nil
		},
		total: func(ctx context.Context) (int64, error) {
			var total atomic.Int64
			err := forCreated(ctx, created, cfg.Clients, func(ctx context.Context, i int) error {
				v, err := svc.value(ctx, ids[i])
				total.Add(v)
				return err
			})
			return total.Load(), err
		},
		cleanup: func(ctx context.Context) error {
			return forCreated(ctx, created, cfg.Clients, func(ctx context.Context, i int) error {
				return svc.remove(ctx, ids[i])
			})
		},
	}
}

// forCreated calls fn for every i with created[i] set, from up to
// workers goroutines, since a run over many counters leaves thousands to
// read back and delete. It returns the first error.
func forCreated(ctx context.Context, created []atomic.Bool, workers int, fn func(ctx context.Context, i int) error) error {
	next := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range max(workers, 1) {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		})
	}
	for i := range created {
		if !created[i].Load() {
			continue
		}
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
