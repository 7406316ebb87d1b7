package pebble

import (
	"context"
	"errors"

	pdb "github.com/cockroachdb/pebble/v2"

	"github.com/shardcounter/shardcounter"
)

// Every write of the store goes through commit: it is built and handed to
// Pebble under s.mu, in the order its ticket gives, and waits for its WAL
// sync outside it, so that the next batch is built and queued while this
// one syncs (Pebble's commit pipeline gives the batches queued behind one
// fsync the next fsync together). Once a batch's sync returns, its changes
// to the counters in memory are published, in ticket order, under s.pub.
// So a strong read (from memory) sees a batch only once it is durable, and
// every batch acknowledged before the read began.
//
// A batch's sync that fails leaves the store failed: its writes, and those
// of every batch queued behind it, may or may not be in the log, so their
// outcome is unknown and nothing more is written; reopening the directory
// replays the log and tells.

var _ shardcounter.CommitPipeliner = (*CounterStore)(nil)

// CommitsInFlight is 2: while one batch waits for its sync, the engine
// builds the next, which Pebble syncs with any others queued behind the
// first.
func (s *CounterStore) CommitsInFlight() int { return 2 }

// update is one counter as a batch leaves it, to publish once durable.
type update struct {
	c      *ctr
	total  int64
	shards uint16 // 0: the batch deleted the counter

	apx      *apxState // an approx counter's sketches to publish, when set
	sketches [][]byte  // nil: it is no longer an approx counter
}

// inflight is a batch between its hand-over to Pebble and its publication.
type inflight struct {
	ticket  uint64
	updates []update
	synced  bool
	err     error
}

// errClosed is the error of a call on a closed store.
var errClosed = shardcounter.Errorf(shardcounter.EUNAVAILABLE, "pebble: the store is closed")

// check returns the error that stops a write before it starts: the store
// is closed, or a commit failed. s.mu is held.
func (s *CounterStore) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "pebble: %v", err)
	}
	if s.closed {
		return errClosed
	}
	s.pub.RLock()
	defer s.pub.RUnlock()
	return s.failedErr()
}

// failedErr is the error of every write after a failed commit. s.pub is held.
func (s *CounterStore) failedErr() error {
	if s.failed == nil {
		return nil
	}
	return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "pebble: an earlier commit failed (%v): nothing applied; restart the server to recover the log", s.failed)
}

// hand gives b, built under s.mu (which the caller holds), to Pebble and
// queues its publication. It returns the batch's place in the queue; the
// caller releases s.mu and calls wait.
func (s *CounterStore) hand(b *pdb.Batch, updates []update) (*inflight, error) {
	f := &inflight{ticket: s.ticket.Load() + 1, updates: updates}
	s.pub.Lock()
	s.queue = append(s.queue, f)
	s.pub.Unlock()
	s.ticket.Store(f.ticket)
	if err := s.db.ApplyNoSyncWait(b, pdb.Sync); err != nil {
		// Whether b reached the memtable is unknown: the next take of a
		// limit key reads its state from Pebble.
		clear(s.states)
		s.settle(f, err)
		return nil, shardcounter.OutcomeUnknownf("pebble: commit failed (%v)", err)
	}
	return f, nil
}

// wait waits for b's sync, publishes f (and the batches before it) and
// returns once f is published, or the error that settled it.
func (s *CounterStore) wait(b *pdb.Batch, f *inflight) error {
	err := b.SyncWait()
	b.Close()
	return s.settle(f, err)
}

// settle records f's sync, publishes the synced batches at the head of
// the queue, and waits until f is published or the store failed.
func (s *CounterStore) settle(f *inflight, err error) error {
	s.pub.Lock()
	defer s.pub.Unlock()
	f.synced, f.err = true, err
	published := false
	for len(s.queue) > 0 && s.queue[0].synced {
		h := s.queue[0]
		s.queue = s.queue[1:]
		if h.err != nil && s.failed == nil {
			s.failed = h.err
		}
		if s.failed == nil {
			for _, u := range h.updates {
				u.c.total, u.c.shards = u.total, u.shards
				if u.apx != nil {
					u.apx.published = u.sketches
					u.apx.gen++
				}
			}
			s.durable = h.ticket
		}
		published = true
	}
	if published {
		s.cond.Broadcast()
	}
	for s.durable < f.ticket && s.failed == nil {
		s.cond.Wait()
	}
	if s.durable < f.ticket {
		return shardcounter.OutcomeUnknownf("pebble: commit failed (%v)", s.failed)
	}
	return nil
}

// commit hands b to Pebble and waits until it is durable and published.
// s.mu is held on entry and released before it returns.
func (s *CounterStore) commit(b *pdb.Batch, updates []update) error {
	f, err := s.hand(b, updates)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.wait(b, f)
}

// durableRead runs fn on a snapshot of the database and returns once every
// batch the snapshot may hold is durable: so a read off the memory path
// (metadata, shards, members, windows, documents) never shows a write a
// crash could still undo.
func (s *CounterStore) durableRead(ctx context.Context, fn func(r pdb.Reader) error) error {
	if err := ctx.Err(); err != nil {
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "pebble: %v", err)
	}
	s.mu.Lock() // against Close
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	snap := s.db.NewSnapshot()
	s.reads.Add(1)
	s.mu.Unlock()
	defer s.reads.Done()
	defer snap.Close()
	// Tickets are taken before a batch goes to Pebble, so every batch in
	// the snapshot has one at most this.
	t := s.ticket.Load()
	if err := fn(snap); err != nil {
		var e *shardcounter.Error
		if errors.As(err, &e) {
			return err
		}
		return shardcounter.Errorf(shardcounter.EINTERNAL, "pebble: read failed: %v", err)
	}
	return s.waitDurable(t)
}

// waitDurable waits until batch t and those before it are published, or
// the store failed.
func (s *CounterStore) waitDurable(t uint64) error {
	s.pub.Lock()
	defer s.pub.Unlock()
	for s.durable < t && s.failed == nil {
		s.cond.Wait()
	}
	if s.durable < t {
		return shardcounter.OutcomeUnknownf("pebble: commit failed (%v)", s.failed)
	}
	return nil
}
