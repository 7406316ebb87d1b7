package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/shardcounter/shardcounter/acl"
	"github.com/shardcounter/shardcounter/resp"
)

// conn is one client connection. Only its own goroutine touches it, but
// for interrupt, which Shutdown calls.
type conn struct {
	s       *Server
	nc      net.Conn
	rd      *resp.Reader
	w       resp.Writer
	id      int64
	created time.Time
	raddr   net.Addr // the client's address, kept: the loop closes nc early
	laddr   net.Addr

	authed  bool          // AUTH succeeded, or none is needed: user is set
	user    *acl.User     // the user the connection runs as, once authenticated
	pass    *acl.Digest   // the password it authenticated with; nil for none (default nopass)
	userGen uint64        // the generation of the server's users last checked
	delay   time.Duration // hold the replies this long before sending them (a throttled WRONGPASS)

	// The read deadline of a connection on its own goroutine (timedReader).
	mu           sync.Mutex // guards interrupted against a read deadline being set
	interrupted  bool       // Shutdown set a past deadline: leave it
	partialSince time.Time  // when the command being read started to arrive; zero: none
	deadline     time.Time  // the read deadline set on nc

	name    string   // CLIENT SETNAME
	libName string   // CLIENT SETINFO LIB-NAME
	libVer  string   // CLIENT SETINFO LIB-VER
	quit    bool     // QUIT, or a protocol error: close after the replies
	tx      *txState // MULTI: the transaction being queued, else nil

	x     *executor  // executes the pipelines of a connection served on its own goroutine
	lc    *loopConn  // the loop's state of a connection it serves, or nil
	lower [32]byte   // lookup's scratch
	thr   throttleID // the last CL.THROTTLE's state id
}

func (s *Server) newConn(nc net.Conn) *conn {
	c := &conn{
		s:       s,
		nc:      nc,
		id:      s.nextID.Add(1),
		raddr:   nc.RemoteAddr(),
		laddr:   nc.LocalAddr(),
		created: time.Now(),
		user:    s.users.Unauthenticated(),
		userGen: s.users.Generation(),
	}
	c.authed = c.user != nil
	c.rd = resp.NewReader(timedReader{c}, c.limits())
	return c
}

// limits returns the limits of the connection's input: small ones until
// it authenticates.
func (c *conn) limits() resp.Limits {
	if c.authed {
		return c.s.opts.Limits
	}
	return c.s.preAuth
}

// authOK reports whether the connection is authenticated: it did AUTH
// as a user that is still on with the password it gave (or needs none).
// When the server's users changed since it last looked (one atomic load
// on every command), it takes its user's new rights; when its user is
// gone, off, or no longer has its password, the session ends: it is
// unauthenticated from then on, and closed after the replies to what it
// sent so far, each -NOAUTH.
func (c *conn) authOK() bool {
	if !c.authed {
		return false
	}
	gen := c.s.users.Generation()
	if gen == c.userGen {
		return true
	}
	c.userGen = gen
	if u := c.s.users.Current(c.user, c.pass); u != nil {
		c.user = u
		return true
	}
	c.authed, c.user, c.quit = false, nil, true
	c.rd.SetLimits(c.s.preAuth)
	c.s.stats.revoked.Add(1)
	c.s.opts.Logger.Info("resp: ending a session whose token was removed", "client", c.raddr.String(), "id", c.id)
	return false
}

// interrupt wakes the connection from waiting for input, so that it sees
// the server shutting down; commands executing are not affected. The loop
// sees the shutdown itself.
func (c *conn) interrupt() {
	if c.lc == nil {
		c.mu.Lock()
		c.interrupted = true
		c.nc.SetReadDeadline(time.Unix(1, 0))
		c.mu.Unlock()
	}
}

// timedReader reads a connection served on its own goroutine for its
// resp.Reader, setting the socket's read deadline to ReadTimeout after the
// first byte of a command that has not fully arrived, and clearing it
// when the connection has nothing buffered (idle connections have no
// deadline). The deadline runs from when the command started arriving,
// not from the last byte, so a client cannot hold a half-sent command by
// trickling it; it starts afresh once a command completes.
type timedReader struct{ c *conn }

func (t timedReader) Read(p []byte) (int, error) {
	c := t.c
	if c.s.opts.ReadTimeout > 0 {
		var want time.Time
		if c.rd.Buffered() > 0 {
			if c.partialSince.IsZero() {
				c.partialSince = time.Now()
			}
			want = c.partialSince.Add(c.s.opts.ReadTimeout)
		}
		if !want.Equal(c.deadline) {
			c.mu.Lock()
			if !c.interrupted {
				c.nc.SetReadDeadline(want)
			}
			c.mu.Unlock()
			c.deadline = want
		}
	}
	return c.nc.Read(p)
}

// protocolError encodes the reply to input the connection's Reader cannot
// use, and marks the connection to be closed after it, as Redis does:
// nothing after a framing error can be trusted to start a command.
func (c *conn) protocolError(err error) {
	var pe *resp.ProtocolError
	var ne net.Error
	switch {
	case errors.As(err, &pe):
		c.s.stats.protocolErrors.Add(1)
		c.s.opts.Logger.Debug("resp: protocol error; closing the connection", "client", c.raddr.String(), "error", pe.Msg)
		msg := "ERR " + pe.Error()
		if !c.authed {
			msg += fmt.Sprintf(" (before AUTH a command may have at most %d arguments and %d bytes)", PreAuthMaxArgs, PreAuthMaxBuffer)
		}
		c.w.Error(msg)
	case errors.As(err, &ne) && ne.Timeout() || err == errReadTimeout:
		c.s.stats.readTimeouts.Add(1)
		c.w.Error(fmt.Sprintf("ERR Protocol error: the command did not arrive in full within %v (--resp-read-timeout): send each command whole", c.s.opts.ReadTimeout))
	}
	c.quit = true
}

// errReadTimeout is the event loop's word for a command that did not
// arrive within ReadTimeout.
var errReadTimeout = errors.New("read timeout")

// serve reads pipelines of commands, executes them and sends the replies,
// until the client quits or leaves, a frame is malformed, or the server
// shuts down.
func (c *conn) serve() {
	defer c.s.forget(c)
	defer c.nc.Close()
	defer func() {
		if p := recover(); p != nil {
			c.s.opts.Logger.Error("resp: panic serving a connection; closing it", "panic", p, "client", c.raddr.String(), "stack", string(debug.Stack()))
		}
	}()
	defer c.rd.Close()
	if tc, ok := c.nc.(*tls.Conn); ok && !c.handshake(tc) {
		return
	}
	for !c.s.shutdown.Load() {
		cmds, err := c.rd.ReadCommands()
		if err != nil {
			var pe *resp.ProtocolError
			var ne net.Error
			if !errors.As(err, &pe) && (!errors.As(err, &ne) || !ne.Timeout() || c.s.shutdown.Load()) {
				return // the client left, or Shutdown interrupted the read
			}
			c.protocolError(err)
		} else {
			c.partialSince = time.Time{} // a command came whole: the next one's time starts
		}
		c.run(cmds)
		if c.delay > 0 {
			time.Sleep(c.delay)
			c.delay = 0
		}
		if err := c.flush(); err != nil || c.quit {
			return
		}
	}
}

// handshake completes a TLS connection's handshake within ReadTimeout
// (10 s when none), and authenticates it as the user its verified client
// certificate names (acl.Users.ByCertificate), if any. It reports whether
// the connection may go on.
func (c *conn) handshake(tc *tls.Conn) bool {
	d := c.s.opts.ReadTimeout
	if d <= 0 {
		d = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.s.opts.Logger.Debug("resp: TLS handshake failed", "client", c.raddr.String(), "error", err)
		return false
	}
	if us := c.s.users.Users(); us != nil {
		st := tc.ConnectionState()
		if u := us.ByCertificate(&st); u != nil {
			if !c.authed {
				c.rd.SetLimits(c.s.opts.Limits)
			}
			c.authed, c.user, c.pass, c.userGen = true, u, nil, c.s.users.Generation()
		}
	}
	return true
}

// flush sends the replies encoded so far.
func (c *conn) flush() error {
	if c.w.Len() == 0 {
		return nil
	}
	c.nc.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout))
	_, err := c.nc.Write(c.w.Bytes())
	c.w.Reset()
	return err
}

// ctx returns the context of one command's (or one batch's) service
// calls. It does not end when the server shuts down: commands executing
// then finish.
func (c *conn) ctx() (context.Context, context.CancelFunc) { return c.s.ctx() }

func (s *Server) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.opts.CommandTimeout)
}

// run executes a pipeline of the connection's commands in order and
// encodes their replies (executor.run).
func (c *conn) run(cmds []resp.Command) {
	if c.x == nil {
		c.x = &executor{s: c.s}
	}
	c.x.run([]segment{{c, cmds}})
}

// batchesWith reports whether args is a write that can join a batch of
// writes.
func (c *conn) batchesWith(args [][]byte) bool {
	cmd := c.lookup(args)
	return cmd != nil && cmd.write != nil && c.ready(cmd, args)
}

// readsWith reports whether args is a strong read that can join a batch
// read.
func (c *conn) readsWith(args [][]byte) bool {
	cmd := c.lookup(args)
	return cmd != nil && cmd.readReply != nil && c.ready(cmd, args)
}

// ready reports whether cmd may run with args now: the connection is
// authenticated (or cmd needs none), the argument count fits, no
// transaction is being queued (but for EXEC, which ends it), and its
// user may run it on its keys.
func (c *conn) ready(cmd *command, args [][]byte) bool {
	return (cmd.noAuth || c.authOK()) && cmd.arityOK(len(args)) && (c.tx == nil || cmd.name == "exec") &&
		c.permit(cmd, args, false) == ""
}

// lookup returns the command named by args[0], in any case, or nil.
func (c *conn) lookup(args [][]byte) *command {
	name := args[0]
	if len(name) > len(c.lower) {
		return nil
	}
	b := c.lower[:len(name)]
	for i, ch := range name {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		b[i] = ch
	}
	return commands[string(b)]
}

// exec runs one command, checking as Redis does, in Redis's order: that
// it exists, its argument count, authentication, and its user's
// permission.
//
// Within MULTI it queues the command instead (queue), unless it is one
// that a transaction does not queue.
func (c *conn) exec(cmd *command, args [][]byte) {
	switch {
	case c.tx != nil && (cmd == nil || !cmd.txControl):
		c.queue(cmd, args)
	case cmd == nil:
		c.w.Error(unknownCommand(args))
	case !cmd.arityOK(len(args)):
		c.w.Error("ERR wrong number of arguments for '" + cmd.name + "' command")
	case !cmd.noAuth && !c.authOK():
		c.w.Error(errNoAuth)
	case !cmd.noAuth && c.refused(cmd, args):
	case cmd.run == nil: // a batched command when the batch cannot take it (EXEC, alone)
		c.runBatched(cmd, args)
	default:
		cmd.run(c, args)
	}
}

// refused answers NOPERM when the connection's user may not run cmd
// with args, and reports whether it did.
func (c *conn) refused(cmd *command, args [][]byte) bool {
	if msg := c.permit(cmd, args, true); msg != "" {
		c.w.Error(msg)
		return true
	}
	return false
}

// unknownCommand is Redis's reply to a command it does not have.
func unknownCommand(args [][]byte) string {
	msg := "ERR unknown command '" + clip(args[0]) + "', with args beginning with: "
	for _, a := range args[1:] {
		msg += "'" + clip(a) + "' "
	}
	return msg
}

// clip shortens an argument quoted in an error, as Redis does.
func clip(b []byte) string {
	if len(b) > 128 {
		b = b[:128]
	}
	return string(b)
}

// runBatched runs a command of the batched kinds (a write, or a strong
// read of keys) on its own, for the rare path that meets one outside a
// batch.
func (c *conn) runBatched(cmd *command, args [][]byte) {
	if cmd.write == nil {
		c.runAlone(cmd, args)
		return
	}
	x := executor{s: c.s}
	x.writeBatch([]segment{{c, []resp.Command{{Args: args}}}})
}
