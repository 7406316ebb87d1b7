package shardcounter

import "context"

// Loader is a store that can create many counters at once, each with its
// value or its members, far faster than Apply can (which decides item by
// item and, on some stores, writes every shard of a new counter). An
// import (package transfer) gives it the counters it found missing and
// writes the rest through Apply; a store without it is imported through
// Apply alone.
//
// LoadCounters creates each counter of cs that does not exist, with its
// value or members, in one atomic step for the whole call: after an error
// none of them was created (or, when the error is OutcomeUnknown, all or
// none). A counter that exists is left as it is and reported false in
// created, so the caller can write it the general way. Counters with a
// window are not loaded (their buckets need the store's clock): they are
// an ErrInvalid error, as is a value outside the counter's bounds.
type Loader interface {
	LoadCounters(ctx context.Context, cs []NewCounter) (created []bool, err error)
}

// NewCounter is a counter for Loader.LoadCounters: its id and spec (no
// window), and a sum counter's value or a distinct counter's members.
type NewCounter struct {
	ID      string
	Spec    Spec
	Value   int64    // a sum counter's value
	Members []string // a distinct counter's members (duplicates count once)
}

// Validate checks a counter for Loader.LoadCounters: its id and spec, no
// window, a distinct counter's members, and a sum counter's value within
// its bounds. A Loader refuses the whole call when one fails.
func (c NewCounter) Validate() error {
	if err := ValidateID("counter id", c.ID); err != nil {
		return err
	}
	if err := ValidateSpec(c.Spec); err != nil {
		return err
	}
	if c.Spec.Window != nil {
		return Errorf(EINVALID, "load counter %q: a windowed counter is written through Apply, which places its buckets", c.ID)
	}
	if c.Spec.Kind == KindDistinct {
		for _, m := range c.Members {
			if err := ValidateID("member", m); err != nil {
				return err
			}
		}
		return nil
	}
	if c.Spec.Min != nil && c.Value < *c.Spec.Min || c.Spec.Max != nil && c.Value > *c.Spec.Max {
		return Errorf(EINVALID, "load counter %q: value %d is outside its bounds", c.ID, c.Value)
	}
	return nil
}
