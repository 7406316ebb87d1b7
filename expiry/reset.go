package expiry

import (
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"sync"

	"github.com/shardcounter/shardcounter"
)

// Resets.
//
// A reset reads the counter's total and adds what takes it to the new
// value, in two store calls, while it holds its counter's stripe of
// resets exclusively; every Apply and Add through the same Store holds
// the stripes of its counters shared. So within one Store (one engine, one
// process) no write to the counter commits between the reset's read and
// its write: the reset is one step, the value it returns is the value
// just before it, and every increment counts either before it or after
// it. Writes from another process sharing the store are not held back: an
// increment of theirs that commits between the two calls counts after
// the reset (never lost, never counted twice), but the value returned
// and the value after are then not one moment's.

// resetStripes is the number of stripes of the reset locks.
const resetStripes = 256

func stripe(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % resetStripes)
}

// holdShared takes the reset stripes of ids shared, in stripe order, and
// returns their release.
func (s *Store) holdShared(ids []string) func() {
	st := make([]int, len(ids))
	for i, id := range ids {
		st[i] = stripe(id)
	}
	slices.Sort(st)
	st = slices.Compact(st)
	for _, k := range st {
		s.resets[k].RLock()
	}
	return func() {
		for _, k := range st {
			s.resets[k].RUnlock()
		}
	}
}

// ResetCounter resets a sum counter (see shardcounter.Resetter); create is
// the spec of a counter the reset creates.
func (s *Store) ResetCounter(ctx context.Context, id string, r shardcounter.Reset, create shardcounter.Spec) (*shardcounter.ResetResult, error) {
	if err := shardcounter.ValidateReset(r); err != nil {
		return nil, err
	}
	if err := s.alive(ctx, id, true); err != nil && !errors.Is(err, shardcounter.ErrNotFound) {
		return nil, err
	}
	mu := &s.resets[stripe(id)]
	mu.Lock()
	defer mu.Unlock()
	res := &shardcounter.ResetResult{ID: id, Value: r.Value}
	c, err := s.CounterStore.GetCounter(ctx, id)
	switch {
	case errors.Is(err, shardcounter.ErrNotFound):
	case err != nil:
		return nil, err
	case c.Kind == shardcounter.KindDistinct && !r.Delete:
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "counter %q is a distinct counter: its value is its member count; delete it instead", id)
	case c.Window != nil && !r.Delete:
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "counter %q has a window, which counts writes as they come: a reset is not a write; delete it instead", id)
	default:
		rd, err := s.CounterStore.ReadCounter(ctx, id)
		if err != nil {
			return nil, err
		}
		res.Existed, res.Old = true, rd.Value
	}
	if r.Delete {
		res.Deleted = res.Existed
		if res.Existed {
			if err := s.CounterStore.DeleteCounter(ctx, id); err != nil && !errors.Is(err, shardcounter.ErrNotFound) {
				return nil, err
			}
		}
		return res, s.forgetDeadline(ctx, id)
	}
	if err := s.write(ctx, id, r.Value-res.Old, res.Existed, create); err != nil {
		return nil, err
	}
	switch name := shardcounter.NameOf(id); {
	case r.KeepTTL:
	case r.ExpiresAt != nil:
		return res, s.setDeadline(ctx, name, r.ExpiresAt.UnixMilli())
	default:
		return res, s.forgetDeadline(ctx, id)
	}
	return res, nil
}

// write takes a counter from its value to that plus delta: an Apply, or a
// create for a new counter whose value is to be 0.
func (s *Store) write(ctx context.Context, id string, delta int64, existed bool, create shardcounter.Spec) error {
	create.TTL = 0
	if delta == 0 {
		if existed {
			return nil
		}
		_, err := s.CounterStore.CreateCounter(ctx, id, create)
		if errors.Is(err, shardcounter.ErrExists) {
			return nil // created by another process meanwhile; its writes count after
		}
		return err
	}
	out, err := s.CounterStore.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: delta, Create: &create}})
	if err == nil {
		err = out[0].Err
	}
	return err
}

// forgetDeadline removes the deadline of id's name when id is the name
// itself and it has one.
func (s *Store) forgetDeadline(ctx context.Context, id string) error {
	if _, _, ok := shardcounter.SplitHashID(id); ok {
		return nil
	}
	ds, err := s.deadlines(ctx, []string{id})
	if err != nil || ds[0] == 0 {
		return err
	}
	mu := s.lock(id)
	mu.Lock()
	defer mu.Unlock()
	return s.dropRecord(ctx, id)
}

// resetLocks are the stripes ResetCounter and the writes share.
type resetLocks [resetStripes]sync.RWMutex
