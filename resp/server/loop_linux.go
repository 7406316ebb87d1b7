//go:build linux

package server

import (
	"errors"
	"io"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shardcounter/shardcounter/resp"
)

// loop serves connections from one goroutine over epoll, as Redis serves
// its clients: each cycle it reads the commands of every connection that
// has input, executes them together (their writes as one WriteBatch, so
// they share one group commit; executor.run), and sends every reply.
//
// Why not a goroutine per connection: with closed-loop clients (each
// sending its next command once the last is answered) each command then
// costs a goroutine wake-up on arrival, another when its commit is done,
// and a thread wake-up whenever a processor was idle; on a two-core
// virtual machine those wake-ups, not the protocol or the engine, bound
// INCR at -P 1 (docs/BENCHMARKS.md). One loop
// pays one epoll_wait a cycle for all of them, and the clients that
// return while a commit runs are all in the next cycle's batch.
//
// The price is Redis's: a command that waits for the store holds up the
// cycle, and every connection with it; each such wait is bounded by
// CommandTimeout.
type loop struct {
	s      *Server
	ep     int // the epoll instance
	wake   int // an eventfd: connections to add, shutdown
	events []unix.EpollEvent

	mu     sync.Mutex
	added  []*conn // accepted, not yet registered
	exited bool    // the loop has stopped: add serves no more

	conns   map[int]*conn // registered, by descriptor
	x       executor
	turns   []segment
	again   []*conn // served a pipeline and may have more input buffered
	cycle   int64
	writing int // connections with replies the socket has not taken

	held     []*conn   // connections whose replies wait for conn.delay (a throttled WRONGPASS)
	partial  int       // connections with part of a command buffered (loopConn.partialSince)
	lastScan time.Time // when expireReads last looked
}

// loopConn is what the loop keeps of a connection it serves.
type loopConn struct {
	fd        int
	sent      int       // bytes of c.w already sent
	since     time.Time // when sending started to wait for the socket
	readCycle int64     // the cycle that last read it
	closed    bool

	partialSince time.Time // when its buffered, incomplete command started to arrive
	holdUntil    time.Time // its replies are not sent before then
}

// fdReader reads a non-blocking socket for a resp.Reader.
type fdReader int

func (fd fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(fd), p)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, resp.ErrWouldBlock
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func newLoop(s *Server) (*loop, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(ep)
		return nil, err
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake)}); err != nil {
		unix.Close(ep)
		unix.Close(wake)
		return nil, err
	}
	l := &loop{
		s:      s,
		ep:     ep,
		wake:   wake,
		events: make([]unix.EpollEvent, 256),
		conns:  make(map[int]*conn),
		x:      executor{s: s},
	}
	go l.run()
	return l, nil
}

// prepare makes c one the loop serves, starting the loop with the first
// connection, unless the server is told to serve each connection on its
// own goroutine (Options.ConnGoroutines), c has no socket of its own (a
// connection not from a TCP or Unix listener), or the loop cannot start.
// It runs under s.mu as c joins the server's connections, so that
// Shutdown sees c.lc settled.
//
// The loop takes a duplicate of c's socket and closes c.nc, which takes
// the socket out of the Go runtime's own poller: left there, every
// command arriving would also wake the runtime's poller, for a goroutine
// that is not waiting, a thread wake-up per command.
func (s *Server) prepare(c *conn) {
	if s.opts.ConnGoroutines {
		return
	}
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	s.loopOnce.Do(func() {
		l, err := newLoop(s)
		if err != nil {
			s.opts.Logger.Warn("resp: cannot start the event loop; serving each connection on its own goroutine", "error", err)
			return
		}
		s.loop.Store(l)
	})
	if s.loop.Load() == nil {
		return
	}
	fd, dupErr := -1, error(nil)
	rc.Control(func(d uintptr) { fd, dupErr = unix.FcntlInt(d, unix.F_DUPFD_CLOEXEC, 0) })
	if fd < 0 || dupErr != nil {
		return
	}
	c.nc.Close()
	c.lc = &loopConn{fd: fd, readCycle: -1}
	c.rd = resp.NewReader(fdReader(fd), c.limits())
}

// serveConn serves c, from the loop or on a goroutine of its own (prepare).
func (s *Server) serveConn(c *conn) {
	if c.lc == nil {
		go c.serve()
		return
	}
	s.loop.Load().add(c)
}

// add hands c to the loop. Once the loop has stopped (the server shut
// down), it closes c instead.
func (l *loop) add(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.exited {
		unix.Close(c.lc.fd)
		l.s.forget(c)
		return
	}
	l.added = append(l.added, c)
	l.signal()
}

// wakeUp makes the loop look at its added connections and the server's
// shutdown.
func (l *loop) wakeUp() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.exited {
		l.signal()
	}
}

// signal writes the eventfd; l.mu is held, so that it is not closed.
func (l *loop) signal() {
	one := [8]byte{1}
	unix.Write(l.wake, one[:])
}

// run is the loop: wait for input, read it, execute it, send the replies.
func (l *loop) run() {
	for {
		timeout := -1
		switch {
		case len(l.again) > 0:
			timeout = 0
		case l.writing > 0 || l.s.shutdown.Load():
			timeout = 100 // check write timeouts and shutdown's progress
		}
		timeout = l.timers(timeout)
		n, err := unix.EpollWait(l.ep, l.events, timeout)
		if err != nil && err != unix.EINTR {
			l.s.opts.Logger.Error("resp: epoll_wait failed", "error", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		l.cycle++
		l.turns = l.turns[:0]
		again := l.again
		l.again = nil
		for _, c := range again {
			l.read(c)
		}
		for _, ev := range l.events[:max(n, 0)] {
			fd := int(ev.Fd)
			if fd == l.wake {
				var b [8]byte
				unix.Read(l.wake, b[:])
				l.register()
				continue
			}
			c := l.conns[fd]
			if c == nil {
				continue
			}
			if ev.Events&unix.EPOLLOUT != 0 {
				l.send(c)
			}
			if ev.Events&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR) != 0 && !c.lc.closed && l.idle(c) {
				l.read(c)
			}
		}
		if len(l.turns) > 0 {
			l.execute()
			for _, t := range l.turns {
				l.send(t.c)
			}
		}
		clear(l.turns)
		if l.writing > 0 {
			l.expire()
		}
		if len(l.held) > 0 {
			l.release()
		}
		if l.partial > 0 {
			l.expireReads()
		}
		if l.s.shutdown.Load() && l.drain() {
			return
		}
	}
}

// idle reports whether c may be read: it has no replies waiting for the
// socket (a client that does not read its replies is not read either),
// and this cycle has not read it yet (a second read would reuse the
// buffer its commands point into).
func (l *loop) idle(c *conn) bool {
	return c.w.Len() == 0 && c.lc.readCycle != l.cycle && !c.quit
}

// register starts serving the connections added since the last cycle.
func (l *loop) register() {
	l.mu.Lock()
	added := l.added
	l.added = nil
	l.mu.Unlock()
	for _, c := range added {
		if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, c.lc.fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(c.lc.fd)}); err != nil {
			l.s.opts.Logger.Warn("resp: cannot watch a connection; closing it", "error", err)
			unix.Close(c.lc.fd)
			l.s.forget(c)
			continue
		}
		l.conns[c.lc.fd] = c
	}
}

// read reads c's commands into this cycle's turns.
func (l *loop) read(c *conn) {
	if !l.idle(c) || c.lc.closed {
		return
	}
	c.lc.readCycle = l.cycle
	cmds, err := c.rd.ReadCommands()
	var pe *resp.ProtocolError
	switch {
	case err == nil:
		l.notePartial(c, false)
		l.turns = append(l.turns, segment{c, cmds})
		if c.rd.Pending() {
			l.again = append(l.again, c)
		}
	case errors.Is(err, resp.ErrWouldBlock):
		l.notePartial(c, c.rd.Buffered() > 0)
		c.rd.Release() // when nothing is buffered: an idle connection holds no buffer
	case errors.As(err, &pe):
		c.protocolError(err)
		l.turns = append(l.turns, segment{c, nil})
	default: // the client left
		l.close(c)
	}
}

// notePartial records whether c has part of a command buffered, and since
// when: a command completing starts the time afresh.
func (l *loop) notePartial(c *conn, partial bool) {
	lc := c.lc
	switch {
	case !partial && !lc.partialSince.IsZero():
		lc.partialSince = time.Time{}
		l.partial--
	case partial && lc.partialSince.IsZero():
		lc.partialSince = time.Now()
		l.partial++
	}
}

// timers shortens the loop's wait for events, timeout (ms, -1 for none),
// to the first moment it has something to do of its own: send held
// replies, or look for half-sent commands past ReadTimeout.
func (l *loop) timers(timeout int) int {
	wake := func(d time.Duration) {
		ms := int(max(d, 0)/time.Millisecond) + 1
		if timeout < 0 || ms < timeout {
			timeout = ms
		}
	}
	for _, c := range l.held {
		wake(time.Until(c.lc.holdUntil))
	}
	if l.partial > 0 {
		wake(time.Until(l.lastScan.Add(l.scanEvery())))
	}
	return timeout
}

// scanEvery is how often expireReads looks: a tenth of ReadTimeout,
// between 10 ms and a second.
func (l *loop) scanEvery() time.Duration {
	return min(max(l.s.opts.ReadTimeout/10, 10*time.Millisecond), time.Second)
}

// expireReads answers and closes the connections whose buffered, incomplete
// command started to arrive longer than ReadTimeout ago. It looks at most
// every scanEvery, so it costs a walk of the connections that often while
// some have half a command buffered, and nothing otherwise.
func (l *loop) expireReads() {
	now := time.Now()
	if l.s.opts.ReadTimeout <= 0 || now.Sub(l.lastScan) < l.scanEvery() {
		return
	}
	l.lastScan = now
	for _, c := range l.conns {
		lc := c.lc
		if lc.partialSince.IsZero() || now.Sub(lc.partialSince) < l.s.opts.ReadTimeout || !lc.since.IsZero() || c.w.Len() > 0 {
			continue
		}
		l.notePartial(c, false)
		c.protocolError(errReadTimeout)
		l.send(c)
	}
}

// release sends the replies held back whose time has come.
func (l *loop) release() {
	now := time.Now()
	held := l.held[:0]
	var due []*conn
	for _, c := range l.held {
		if c.lc.closed {
			continue
		}
		if now.Before(c.lc.holdUntil) {
			held = append(held, c)
		} else {
			due = append(due, c)
		}
	}
	l.held = held
	for _, c := range due {
		c.lc.holdUntil = time.Time{}
		l.watch(c, unix.EPOLLIN)
		l.send(c)
		if !c.lc.closed && c.rd.Pending() {
			l.again = append(l.again, c) // buffered already: no EPOLLIN will come for it
		}
	}
}

// execute runs this cycle's commands. A panic closes the connections of
// the cycle, whose state it may have left half changed, and the loop goes
// on serving the others.
func (l *loop) execute() {
	defer func() {
		if p := recover(); p != nil {
			l.s.opts.Logger.Error("resp: panic serving connections; closing them", "panic", p, "connections", len(l.turns), "stack", string(debug.Stack()))
			for _, t := range l.turns {
				t.c.w.Reset()
				l.close(t.c)
			}
		}
	}()
	l.x.run(l.turns)
}

// send sends c's replies as far as the socket takes them. What it does not
// take waits for EPOLLOUT, and c is not read meanwhile. A connection that
// quit is closed once its replies are sent.
func (l *loop) send(c *conn) {
	lc := c.lc
	if lc.closed {
		return
	}
	if c.delay > 0 {
		lc.holdUntil = time.Now().Add(c.delay)
		c.delay = 0
		l.held = append(l.held, c)
		l.watch(c, 0) // not read until its replies are sent: no wake-ups for its input meanwhile
	}
	if !lc.holdUntil.IsZero() {
		return // release sends it; meanwhile c is not read (idle)
	}
	b := c.w.Bytes()
	for lc.sent < len(b) {
		n, err := unix.Write(lc.fd, b[lc.sent:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if lc.since.IsZero() {
				lc.since = time.Now()
				l.writing++
				l.watch(c, unix.EPOLLOUT)
			}
			return
		case err != nil:
			l.close(c) // the client left
			return
		}
		lc.sent += n
	}
	c.w.Reset()
	lc.sent = 0
	if !lc.since.IsZero() {
		lc.since = time.Time{}
		l.writing--
		l.watch(c, unix.EPOLLIN)
		if c.rd.Pending() {
			// It was not read while its replies waited; what it sent may
			// all be buffered already, so no EPOLLIN would come for it.
			l.again = append(l.again, c)
		}
	}
	if c.quit || l.s.shutdown.Load() {
		l.close(c)
		return
	}
	if !c.rd.Pending() {
		c.rd.Release() // its commands are done: an idle connection holds no buffer
	}
}

// watch sets the events the loop waits for on c.
func (l *loop) watch(c *conn, events uint32) {
	if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_MOD, c.lc.fd, &unix.EpollEvent{Events: events, Fd: int32(c.lc.fd)}); err != nil {
		l.close(c)
	}
}

// expire closes the connections whose replies have waited for the socket
// longer than WriteTimeout: clients that stopped reading.
func (l *loop) expire() {
	for _, c := range l.conns {
		if !c.lc.since.IsZero() && time.Since(c.lc.since) > l.s.opts.WriteTimeout {
			l.close(c)
		}
	}
}

// close stops serving c and closes it.
func (l *loop) close(c *conn) {
	lc := c.lc
	if lc.closed {
		return
	}
	lc.closed = true
	if !lc.since.IsZero() {
		l.writing--
	}
	l.notePartial(c, false)
	c.rd.Close()
	unix.EpollCtl(l.ep, unix.EPOLL_CTL_DEL, lc.fd, nil)
	delete(l.conns, lc.fd)
	unix.Close(lc.fd)
	l.s.forget(c)
}

// drain, once the server shuts down, closes the connections with nothing
// left to send (the cycle that saw the shutdown has sent what it
// executed), and, when none is left, stops the loop. Shutdown's deadline
// (closeAll) ends the wait for the others.
func (l *loop) drain() bool {
	l.register()
	for _, c := range l.conns {
		if c.lc.since.IsZero() || l.s.closeNow.Load() {
			l.close(c)
		}
	}
	if len(l.conns) > 0 {
		return false
	}
	l.mu.Lock()
	l.exited = true
	added := l.added
	l.added = nil
	unix.Close(l.wake)
	l.mu.Unlock()
	for _, c := range added {
		unix.Close(c.lc.fd)
		l.s.forget(c)
	}
	unix.Close(l.ep)
	return true
}
