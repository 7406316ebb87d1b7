package http

import (
	"context"
	"net/http"
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

	// The watcher's list that holds c, under deadlineWatcher.mu.
	prev, next *deadlineContext
	list       *deadlineList

	// The request's body deadline (start's body, bodyRead), under mu:
	// while bodyW is set, the watcher cuts its connection's reads at
	// bodyDeadline, as SetReadDeadline would have, and says so in bodyCut.
	bodyW        http.ResponseWriter
	bodyDeadline time.Time
	bodyCut      bool
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
// done; and it cuts the reads of a request whose body is still arriving
// at the body's deadline (start's body). Its goroutine runs only while a
// request is in flight. Its list is in the order requests started, which
// with one RequestTimeout for all is the order of their deadlines, give or
// take the few microseconds between a deadline's reading of the clock and
// its place in the list. A request canceled while its body is still
// arriving moves to a second list, bodies, where the watcher keeps its
// body's deadline until the body is in or stop: a body may take longer
// than the request's deadline (serveRoute then gives the request a new
// one).
type deadlineWatcher struct {
	mu      sync.Mutex
	live    deadlineList
	bodies  deadlineList
	running bool
	due     []*deadlineContext // the watcher's, reused
}

// deadlineList is a list of deadlineContexts through their prev and next.
type deadlineList struct{ head, tail *deadlineContext }

func (l *deadlineList) push(c *deadlineContext) {
	c.prev, c.next, c.list = l.tail, nil, l
	if l.tail != nil {
		l.tail.next = c
	} else {
		l.head = c
	}
	l.tail = c
}

// start makes c, over parent, end at deadline, and watches it until stop.
// With a body (w not nil), the watcher also bounds the reads of w's
// connection until bodyDeadline, or until bodyRead says the body is in:
// what SetReadDeadline before the body and its clearing after did,
// without the two updates of the connection's runtime timer a request.
func (d *deadlineWatcher) start(c *deadlineContext, parent context.Context, deadline time.Time, w http.ResponseWriter, bodyDeadline time.Time) {
	c.Context, c.deadline = parent, deadline
	c.bodyW, c.bodyDeadline = w, bodyDeadline // published by d.mu to the watcher, which reads them under c.mu
	d.mu.Lock()
	d.live.push(c)
	run := !d.running
	d.running = true
	d.mu.Unlock()
	if run {
		go d.run()
	}
}

// bodyRead stops bounding the reads of c's connection, once its body is
// in or refused. It reports whether the watcher cut them at the body's
// deadline: the connection's reads then fail, and the body is late even
// if its last byte came in the meantime.
func (d *deadlineWatcher) bodyRead(c *deadlineContext) (cut bool) {
	c.mu.Lock()
	c.bodyW, cut = nil, c.bodyCut
	c.mu.Unlock()
	return cut
}

// cutBody cuts the reads of c's connection if its body is still being
// read at now, past its deadline, and returns the body's deadline while
// it is still to come (zero once the body is in or cut). The watcher
// calls it under d.mu, so that stop never races it, and c.mu orders it
// with bodyRead.
func (c *deadlineContext) cutBody(now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bodyW == nil || c.bodyCut {
		return time.Time{}
	}
	if now.Before(c.bodyDeadline) {
		return c.bodyDeadline
	}
	// A read deadline in the past wakes the handler's blocked read with a
	// timeout, as the deadline SetReadDeadline set would have.
	http.NewResponseController(c.bodyW).SetReadDeadline(time.Unix(1, 0)) //nolint:errcheck // a writer without deadlines cannot have its body bounded
	c.bodyCut = true
	return time.Time{}
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
	l := c.list
	if l == nil {
		return
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.tail = c.prev
	}
	c.prev, c.next, c.list = nil, nil, nil
}

// run is the watcher's goroutine: it sleeps until the first deadline or
// the next poll, cancels what is due, cuts the bodies that are late, and
// ends when nothing is in flight.
func (d *deadlineWatcher) run() {
	t := time.NewTimer(deadlinePoll)
	defer t.Stop()
	for {
		d.mu.Lock()
		if d.live.head == nil && d.bodies.head == nil {
			d.running = false
			d.mu.Unlock()
			return
		}
		now := time.Now()
		due := d.due[:0]
		wait := deadlinePoll
		for c := d.live.head; c != nil; {
			next := c.next
			body := c.cutBody(now)
			if !now.Before(c.deadline) || c.Context.Err() != nil {
				d.unlink(c)
				due = append(due, c)
				if !body.IsZero() {
					d.bodies.push(c) // canceled below; its body still arriving
				}
			}
			if !body.IsZero() {
				wait = min(wait, body.Sub(now))
			}
			c = next
		}
		for c := d.bodies.head; c != nil; {
			next := c.next
			if body := c.cutBody(now); body.IsZero() {
				d.unlink(c)
			} else {
				wait = min(wait, body.Sub(now))
			}
			c = next
		}
		if d.live.head != nil {
			wait = min(wait, d.live.head.deadline.Sub(now))
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
