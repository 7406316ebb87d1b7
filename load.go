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
