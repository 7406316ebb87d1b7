package server

import (
	"context"
	"sync"
	"time"
)

// batchContext is the context of an executor's batches: the command
// timeout's deadline on a timer reused from batch to batch. A profile of
// pipelined INCR found context.WithTimeout's four allocations a batch to
// be most of a command's; this one allocates only on its first batch and
// after a deadline passes. An executor runs one batch at a time, and the
// services it calls (the engine) keep no context past their return, so
// one context an executor suffices: start arms it for a batch, stop
// disarms it when the batch is done.
type batchContext struct {
	timer *time.Timer

	mu       sync.Mutex
	deadline time.Time
	done     chan struct{} // made by Done, closed when the deadline passes
	err      error         // context.DeadlineExceeded once it has
}

// start arms c for a batch of at most d.
func (c *batchContext) start(d time.Duration) {
	c.mu.Lock()
	if c.err != nil { // the last batch's deadline passed: a fresh channel
		c.err, c.done = nil, nil
	}
	c.deadline = time.Now().Add(d)
	c.mu.Unlock()
	if c.timer == nil {
		c.timer = time.AfterFunc(d, c.expire)
	} else {
		c.timer.Reset(d)
	}
}

// stop disarms c once its batch is done.
func (c *batchContext) stop() { c.timer.Stop() }

// expire ends the batch whose deadline has passed; a call of the timer
// of a batch before, late, finds the deadline ahead and does nothing.
func (c *batchContext) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || time.Now().Before(c.deadline) {
		return
	}
	c.err = context.DeadlineExceeded
	if c.done == nil {
		c.done = make(chan struct{})
	}
	close(c.done)
}

func (c *batchContext) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deadline, true
}

func (c *batchContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
	}
	return c.done
}

func (c *batchContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *batchContext) Value(any) any { return nil }
