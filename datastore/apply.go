package datastore

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
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
// in Stats.Conflicts. A batch whose commit would pass Datastore's 10 MiB
// is split between counters, a transaction a part (docstore.Split).
func (s *CounterStore) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	return docstore.Split(ctx, "datastore", incs, s.commitLimit, s.applyWhole)
}

// applyWhole applies the batch in one transaction (see Apply), or refuses
// it, nothing committed, with a *docstore.TooLarge when its commit would
// pass limit (0 for none).
func (s *CounterStore) applyWhole(ctx context.Context, incs []shardcounter.Increment, limit int) ([]shardcounter.Outcome, error) {
	out := make([]shardcounter.Outcome, len(incs))
	if len(incs) == 0 {
		return out, nil
	}
	m := docstore.NewMarker[sentAttempt]("datastore", incs)
	r := docstore.Attempts[sentAttempt]{Store: "datastore", Stats: s.Stats(), Marker: m, Conflict: errConflict,
		Try:  func() (int, bool, error) { return s.attempt(ctx, incs, out, m, limit) },
		Get:  func(ctx context.Context) (int64, bool, error) { return s.markerAttempt(ctx, s.markerKey(m)) },
		Done: func(a sentAttempt) { a.b.committed(a.sw) },
	}
	recorded, err := r.Run(ctx, out)
	if err != nil {
		return nil, err
	}
	s.expire(ctx, recorded)
	return out, nil
}

// txGrace is how long a transaction may outlive the deadline of its
// Apply: the time its rollback has to reach the database.
const txGrace = 5 * time.Second

// attempt runs one attempt (applyOnce) in a transaction whose context
// outlives ctx by txGrace, and answers at ctx's end even if the attempt
// has not. A transaction whose calls were cut off by the caller's
// deadline would otherwise stay open, holding its locks on the counter's
// entities (Datastore takes them on reads) until the database expires it,
// a minute later, and every write of those counters would wait for it.
// Given the time, it rolls back instead. Abandoned before its commit, the
// attempt never commits: nothing was applied. Abandoned in its commit, its
// outcome is unknown. detached says the attempt was left running (it
// still uses m).
func (s *CounterStore) attempt(ctx context.Context, incs []shardcounter.Increment, out []shardcounter.Outcome, m *marker, limit int) (recorded int, detached bool, err error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		recorded, err = s.applyPaced(ctx, ctx, incs, out, m, limit, nil)
		return recorded, false, err
	}
	txCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline.Add(txGrace))
	const running, committing, abandoned = 0, 1, 2
	var state atomic.Int32
	type result struct {
		recorded int
		err      error
	}
	mine := make([]shardcounter.Outcome, len(out))
	done := make(chan result, 1)
	go func() {
		defer cancel()
		n, err := s.applyPaced(ctx, txCtx, incs, mine, m, limit, func() bool { return state.CompareAndSwap(running, committing) })
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		copy(out, mine)
		return r.recorded, false, r.err
	case <-ctx.Done():
	}
	if state.CompareAndSwap(running, abandoned) {
		return 0, true, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "datastore: the batch did not reach its commit before %v; nothing applied", ctx.Err())
	}
	select {
	case r := <-done: // it ended as the deadline came
		copy(out, mine)
		return r.recorded, false, r.err
	default:
	}
	return 0, true, shardcounter.OutcomeUnknownf("datastore: the commit did not answer before %v", ctx.Err())
}

// applyOnce makes one attempt in one transaction, its commit marked by m
// (see marker.go); it returns how many request ids it recorded. It
// commits only if mayCommit (when set) says it still may, and only a
// commit under limit (0 for none): past it, its error is a
// *docstore.TooLarge.
func (s *CounterStore) applyOnce(ctx context.Context, incs []shardcounter.Increment, out []shardcounter.Outcome, m *marker, limit int, mayCommit func() bool) (int, error) {
	ids := make([]string, len(incs))
	for i, inc := range incs {
		ids[i] = inc.Counter
	}
	defer s.Locks.LockCounters(ids...)()
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
		return len(b.Records), nil
	}
	if wait := b.paceWait(); wait > 0 {
		return 0, notDue(wait) // rolled back: the wait is outside the transaction (applyPaced)
	}
	m.Attempt++
	mk, me := s.markerKey(m), &ownEntity{At: b.now, Attempt: m.Attempt}
	muts = append(muts, datastore.NewInsert(mk, me))
	b.count(mk, me)
	if err := b.size.Check("datastore", limit); err != nil {
		m.Attempt-- // not sent
		return 0, err
	}
	if _, err := tx.Mutate(muts...); err != nil {
		return 0, txError("write", err)
	}
	if mayCommit != nil && !mayCommit() {
		return 0, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "datastore: the batch did not reach its commit in time; nothing applied")
	}
	m.Send(sentAttempt{b: b, sw: shardWrites}, out, len(b.Records))
	done = true
	if _, err := tx.Commit(); err != nil {
		err = commitError(err)
		if shardcounter.IsOutcomeUnknown(err) {
			tx.Rollback() //nolint:errcheck // best effort: frees its locks if the commit never arrived
			m.Failed(err)
		}
		return 0, err
	}
	b.committed(shardWrites)
	return len(b.Records), nil
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
