package http

import (
	"context"
	"sync"
	"time"
)

// deadlinePoll is how often the server's deadline watcher looks at the
// requests it bounds while any is in flight: the most a request's context
// is late in seeing that its parent (net/http's, canceled when the client
// goes away) was canceled. Deadlines themselves are kept to the watcher's
// timer, not to the poll.
const deadlinePoll = 20 * time.Millisecond

// deadlineContext is an API request's context with its RequestTimeout:
// what context.WithTimeout gives, without its allocations and its runtime
// timer a request. The server's deadlineWatcher cancels it at its
// deadline, or once its parent is done; its Done channel is made only
// when asked for, and it is part of the request's allocation.
//
// It implements AfterFunc, so that contexts derived from it (a store
// client's context.WithCancel) are canceled with it without a goroutine
// each (context's propagateCancel).
type deadlineContext struct {
	context.Context // the parent: the request's context with its values
	deadline        time.Time

	mu     sync.Mutex
	done   chan struct{} // made on the first Done, or closed on cancel
	err    error
	afters []*afterFunc

	// The watcher's list, under deadlineWatcher.mu.
	prev, next *deadlineContext
	listed     bool
}

type afterFunc struct{ f func() }

// closedChan is the Done of a context canceled before anyone asked for it.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (c *deadlineContext) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
	}
	return c.done
}

func (c *deadlineContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *deadlineContext) String() string { return "http.requestDeadline" }

// AfterFunc arranges to call f in its own goroutine once c is canceled,
// as context.AfterFunc does; stop undoes it, reporting whether it did.
func (c *deadlineContext) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f: f}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	c.afters = append(c.afters, a)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.afters {
			if x == a {
				c.afters = append(c.afters[:i], c.afters[i+1:]...)
				return true
			}
		}
		return false
	}
}

// cancel cancels c with err, once.
func (c *deadlineContext) cancel(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	if c.done == nil {
		c.done = closedChan
	} else {
		close(c.done)
	}
	afters := c.afters
	c.afters = nil
	c.mu.Unlock()
	for _, a := range afters {
		go a.f()
	}
}

// deadlineWatcher cancels the deadlineContexts of the requests in flight:
// each at its deadline, or, looking every deadlinePoll, once its parent is
// done. Its goroutine runs only while a request is in flight. Its list is
// in the order requests started, which with one RequestTimeout for all is
// the order of their deadlines, give or take the few microseconds between
// a deadline's reading of the clock and its place in the list.
type deadlineWatcher struct {
	mu         sync.Mutex
	head, tail *deadlineContext
	running    bool
	due        []*deadlineContext // the watcher's, reused
}

// start makes c, over parent, end at deadline, and watches it until stop.
func (d *deadlineWatcher) start(c *deadlineContext, parent context.Context, deadline time.Time) {
	c.Context, c.deadline = parent, deadline
	d.mu.Lock()
	c.prev, c.next, c.listed = d.tail, nil, true
	if d.tail != nil {
		d.tail.next = c
	} else {
		d.head = c
	}
	d.tail = c
	run := !d.running
	d.running = true
	d.mu.Unlock()
	if run {
		go d.run()
	}
}

// stop stops watching c and cancels it, as the CancelFunc of
// context.WithTimeout does when the request is done.
func (d *deadlineWatcher) stop(c *deadlineContext) {
	d.mu.Lock()
	d.unlink(c)
	d.mu.Unlock()
	c.cancel(context.Canceled)
}

func (d *deadlineWatcher) unlink(c *deadlineContext) {
	if !c.listed {
		return
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		d.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		d.tail = c.prev
	}
	c.prev, c.next, c.listed = nil, nil, false
}

// run is the watcher's goroutine: it sleeps until the first deadline or
// the next poll, cancels what is due, and ends when nothing is in flight.
func (d *deadlineWatcher) run() {
	t := time.NewTimer(deadlinePoll)
	defer t.Stop()
	for {
		d.mu.Lock()
		if d.head == nil {
			d.running = false
			d.mu.Unlock()
			return
		}
		now := time.Now()
		due := d.due[:0]
		for c := d.head; c != nil; {
			next := c.next
			if !now.Before(c.deadline) || c.Context.Err() != nil {
				d.unlink(c)
				due = append(due, c)
			}
			c = next
		}
		wait := deadlinePoll
		if d.head != nil {
			wait = min(wait, d.head.deadline.Sub(now))
		}
		d.mu.Unlock()
		for i, c := range due {
			if err := c.Context.Err(); err != nil {
				c.cancel(err)
			} else {
				c.cancel(context.DeadlineExceeded)
			}
			due[i] = nil
		}
		d.due = due[:0]
		t.Reset(max(wait, 0))
		<-t.C
	}
}
