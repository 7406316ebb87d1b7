package datastore

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shardcounter/shardcounter"
)

// errConflict is a transaction the database aborted because another
// writer came first: nothing was applied, and the batch is tried again.
var errConflict = errors.New("datastore: conflict")

// Add adds delta to shard pick mod n: the seed's increment, made safe in a
// transaction (see Apply).
func (s *CounterStore) Add(ctx context.Context, id string, delta int64, pick uint64) error {
	out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: delta, Pick: pick}})
	if err != nil {
		return err
	}
	return out[0].Err
}

// Apply applies the batch in one Datastore transaction: it reads the
// counter entities, the shards the items write (every shard of a counter
// whose total must be checked), the request ids, members and buckets of
// the batch, decides every item on them, and commits the shards, members,
// buckets and request ids it changes together. A transaction aborted for
// contention applied nothing; it is tried again with backoff and counted
// in Stats.Conflicts.
func (s *CounterStore) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	out := make([]shardcounter.Outcome, len(incs))
	if len(incs) == 0 {
		return out, nil
	}
	pause := time.Millisecond
	for {
		recorded, err := s.applyOnce(ctx, incs, out)
		if err == nil {
			s.expire(ctx, recorded)
			return out, nil
		}
		if !errors.Is(err, errConflict) {
			return nil, err
		}
		s.stats.Conflicts.Add(1)
		if err := sleep(ctx, rand.N(pause)+pause/2); err != nil {
			return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "datastore: the batch kept meeting other writers until %v; nothing applied", err)
		}
		pause = min(2*pause, 200*time.Millisecond)
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// applyOnce makes one attempt in one transaction; it returns how many
// request ids it recorded.
func (s *CounterStore) applyOnce(ctx context.Context, incs []shardcounter.Increment, out []shardcounter.Outcome) (int, error) {
	ids := make([]string, len(incs))
	for i, inc := range incs {
		ids[i] = inc.Counter
	}
	defer s.locks.lock(ids...)()
	tx, err := s.client.NewTransaction(ctx) // not BeginLater: the emulator's lookups return no transaction id, and it would run each read in one of its own
	if err != nil {
		return 0, txError("begin transaction", err)
	}
	done := false
	defer func() {
		if !done {
			tx.Rollback()
		}
	}()
	now := s.now()
	b := s.newBatch(tx, incs, now)
	if err := b.readFirst(ctx); err != nil {
		return 0, err
	}
	for {
		more, err := b.decide(incs, out)
		if err != nil {
			return 0, err
		}
		if !more {
			break
		}
		if err := b.readShards(); err != nil { // counters found full: read all their shards, decide again
			return 0, err
		}
	}
	if err := b.sweep(ctx); err != nil {
		return 0, err
	}
	muts, shardWrites := b.mutations()
	if len(muts) == 0 {
		return b.recorded, nil
	}
	if _, err := tx.Mutate(muts...); err != nil {
		return 0, txError("write", err)
	}
	done = true
	if _, err := tx.Commit(); err != nil {
		return 0, commitError(err)
	}
	b.committed(shardWrites)
	for i, inc := range incs {
		t := b.targets[inc.Counter]
		if inc.Total && out[i].Err == nil && t != nil && t.full && t.summed {
			v := t.total
			out[i].Total = &v
		}
	}
	return b.recorded, nil
}

// txError maps a failed read or write inside a transaction: nothing was
// applied; an abort for contention is a conflict, tried again.
func txError(op string, err error) error {
	if errors.Is(err, datastore.ErrConcurrentTransaction) || status.Code(err) == codes.Aborted {
		return errConflict
	}
	return readError(op, err)
}

// commitError maps a failed commit. A commit is atomic: an abort or a
// refusal applied nothing; a commit cut off on the way may have been
// applied.
func commitError(err error) error {
	if errors.Is(err, datastore.ErrConcurrentTransaction) {
		return errConflict
	}
	switch status.Code(err) {
	case codes.Aborted, codes.FailedPrecondition, codes.AlreadyExists:
		return errConflict
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.ResourceExhausted, codes.NotFound:
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "datastore: commit refused, nothing applied: %v", status.Convert(err).Message())
	}
	return shardcounter.OutcomeUnknownf("datastore: commit failed (%v)", err)
}
