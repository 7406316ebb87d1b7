package server

import (
	"context"
	"errors"
	"net"
	"runtime/debug"
	"time"

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

	authed  bool     // AUTH succeeded, or none is needed
	name    string   // CLIENT SETNAME
	libName string   // CLIENT SETINFO LIB-NAME
	libVer  string   // CLIENT SETINFO LIB-VER
	quit    bool     // QUIT, or a protocol error: close after the replies
	tx      *txState // MULTI: the transaction being queued, else nil

	x     *executor // executes the pipelines of a connection served on its own goroutine
	lc    *loopConn // the loop's state of a connection it serves, or nil
	lower [32]byte  // lookup's scratch
}

func (s *Server) newConn(nc net.Conn) *conn {
	return &conn{
		s:       s,
		nc:      nc,
		rd:      resp.NewReader(nc, s.opts.Limits),
		id:      s.nextID.Add(1),
		raddr:   nc.RemoteAddr(),
		laddr:   nc.LocalAddr(),
		created: time.Now(),
		authed:  !s.tokens.Required(),
	}
}

// interrupt wakes the connection from waiting for input, so that it sees
// the server shutting down; commands executing are not affected. The loop
// sees the shutdown itself.
func (c *conn) interrupt() {
	if c.lc == nil {
		c.nc.SetReadDeadline(time.Unix(1, 0))
	}
}

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
	for !c.s.shutdown.Load() {
		cmds, err := c.rd.ReadCommands()
		if err != nil {
			var pe *resp.ProtocolError
			if !errors.As(err, &pe) {
				return // the client left, or Shutdown interrupted the read
			}
			// As Redis: say what was wrong, then close, since nothing
			// after a framing error can be trusted to start a command.
			c.s.stats.protocolErrors.Add(1)
			c.s.opts.Logger.Debug("resp: protocol error; closing the connection", "client", c.raddr.String(), "error", pe.Msg)
			c.w.Error("ERR " + pe.Error())
			c.quit = true
		}
		c.run(cmds)
		if err := c.flush(); err != nil || c.quit {
			return
		}
	}
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
// authenticated (or cmd needs none), the argument count fits, and no
// transaction is being queued (but for EXEC, which ends it).
func (c *conn) ready(cmd *command, args [][]byte) bool {
	return (c.authed || cmd.noAuth) && cmd.arityOK(len(args)) && (c.tx == nil || cmd.name == "exec")
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
// it exists, its argument count, and authentication.
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
	case !c.authed && !cmd.noAuth:
		c.w.Error(errNoAuth)
	case cmd.run == nil: // a batched command when the batch cannot take it (EXEC, alone)
		c.runBatched(cmd, args)
	default:
		cmd.run(c, args)
	}
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
