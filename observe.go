package shardcounter

import (
	"context"
	"time"
)

// CommitOp says what a Commit did to the store.
type CommitOp uint8

const (
	// CommitBatch is an Apply: Incs and Outcomes say what it carried and
	// what became of each item (the engine's group commit, a PFMERGE's
	// sketches).
	CommitBatch CommitOp = iota + 1
	// CommitCreate created Counter (CreateCounter).
	CommitCreate
	// CommitDelete deleted Counter: a caller's delete, or an expired
	// name purged by package expiry before a write or by its sweep.
	CommitDelete
	// CommitReset set Counter's value, or deleted it (a Resetter's reset:
	// a read and a write that no increment describes).
	CommitReset
	// CommitReshard changed Counter's shard count.
	CommitReshard
)

// Commit is one store call that changes counters, as a CommitObserver
// hears of it.
type Commit struct {
	Op CommitOp
	// Counter is the counter of every Op but CommitBatch.
	Counter string
	// Incs are a CommitBatch's increments, in the order sent. Outcomes,
	// set before AfterCommit, holds one per increment: the store's, or
	// the call's error on each when the whole call failed.
	Incs     []Increment
	Outcomes []Outcome
	// Writes is how many client writes a CommitBatch of the engine's
	// group commit carries (folding puts several in one increment, and a
	// deadline change is a write with no increment of its own); 0
	// otherwise.
	Writes int
	// Start and End are the engine's clock (its Config.Now) just before
	// and just after the store call, set before AfterCommit: the commit
	// took effect between them by that clock, and by the store's within
	// the two clocks' skew.
	Start, End time.Time
	// Err is the call's error, set before AfterCommit: nil when the
	// store answered (a CommitBatch's items may still have failed on
	// their own).
	Err error
}

// CommitObserver hears of the store calls that change counters, so that
// what must follow each commit (the rankings' deltas, a trace's spans)
// learns of it in one place instead of by calls woven into each path that
// writes. The engine calls its observers around every such call it makes
// (its flushes, creates, deletes, resets, reshards and merges), and
// package expiry around each deletion of an expired name it makes on its
// own.
//
// BeforeCommit is called just before the store call, with c's Op,
// Counter, Incs and Writes set; it may hold the call back (the rankings
// wait while a read they must not overlap runs), and it returns the
// context the call runs with and AfterCommit receives: a tracer returns
// one holding its span, an observer that keeps state per commit one
// holding that (keyed by c, since a store call may make calls of its own
// that are observed too). AfterCommit is called once the store has
// answered, before any writer of the commit hears its result, with c
// complete.
//
// Observers are called on the path of every commit, by several
// goroutines at once: they must be quick and safe for concurrent use.
type CommitObserver interface {
	BeforeCommit(ctx context.Context, c *Commit) context.Context
	AfterCommit(ctx context.Context, c *Commit)
}

// Observers is several observers as one. BeforeCommit calls each in
// order, each with the context the one before returned; AfterCommit calls
// them in reverse order, as deferred calls run, so that an observer
// around the others (a tracer's span) ends after them.
type Observers []CommitObserver

// BeforeCommit implements CommitObserver.
func (obs Observers) BeforeCommit(ctx context.Context, c *Commit) context.Context {
	for _, o := range obs {
		ctx = o.BeforeCommit(ctx, c)
	}
	return ctx
}

// AfterCommit implements CommitObserver.
func (obs Observers) AfterCommit(ctx context.Context, c *Commit) {
	for i := len(obs) - 1; i >= 0; i-- {
		obs[i].AfterCommit(ctx, c)
	}
}

// Observe makes the store call call, which c describes, between o's
// BeforeCommit and AfterCommit: it sets c.Start and c.End by now around
// the call and c.Err to its error, which it returns. A CommitBatch's call
// sets c.Outcomes itself. With o nil it only makes the call.
func Observe(ctx context.Context, o CommitObserver, now func() time.Time, c *Commit, call func(context.Context) error) error {
	if o == nil {
		return call(ctx)
	}
	ctx = o.BeforeCommit(ctx, c)
	c.Start = now()
	c.Err = call(ctx)
	c.End = now()
	o.AfterCommit(ctx, c)
	return c.Err
}
