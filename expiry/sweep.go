package expiry

import (
	"context"
	"errors"
	"time"

	"github.com/shardcounter/shardcounter"
)

// dueBy notes that a deadline at ms is in the index, so that a sweep is
// due then even if the last one found nothing due before later.
func (s *Store) dueBy(ms int64) {
	ns := ms * int64(time.Millisecond)
	for {
		cur := s.nextSweep.Load()
		if cur != 0 && cur <= ns || s.nextSweep.CompareAndSwap(cur, ns) {
			return
		}
	}
}

// afterWrite starts a sweep in the background when one is due and none
// is running: after writes only, so an idle store does no work.
func (s *Store) afterWrite() {
	if !s.inUse.Load() || s.now().UnixNano() < s.nextSweep.Load() {
		return
	}
	if !s.sweeping.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.sweeping.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Sweep(ctx) // a failed sweep is retried after a later write
	}()
}

// Sweep looks at the first SweepBatch entries of the deadline index and
// deletes the names among them that expired, with their records and
// entries. It returns how many names it deleted. Writes call it in the
// background; tests call it to see storage reclaimed.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	now := s.nowMS()
	cs, err := s.CounterStore.ListCounters(ctx, shardcounter.InternalPrefix+tagIndex, "", SweepBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	next := now + s.refresh.Milliseconds() // look again a Refresh later at most
	all := true
	for _, c := range cs {
		ms, name, ok := parseIndexID(c.ID)
		if ok && ms > now {
			next, all = min(next, ms), false
			break
		}
		if ok {
			// The entry is the name's deadline rounded up to a second
			// (bucket): the deadline now is expired, or later and in an
			// entry of its own, or gone.
			cur, err := s.fresh(ctx, name)
			if err != nil {
				return n, err
			}
			if expired(cur, now) {
				if err := s.purge(ctx, name, cur); err != nil {
					return n, err
				}
				n++
			}
		}
		if err := s.CounterStore.DeleteCounter(ctx, c.ID); err != nil && !errors.Is(err, shardcounter.ErrNotFound) {
			return n, err
		}
	}
	if all && len(cs) == SweepBatch {
		next = now // more may be due: the next write sweeps again
	}
	s.nextSweep.Store(next * int64(time.Millisecond))
	return n, nil
}
