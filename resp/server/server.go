// Package server serves a shardcounter.CounterService over the Redis
// protocol (RESP2 and RESP3), so that redis-cli, redis-benchmark and any
// Redis client can use shardcounter: INCR, GET, MGET, EXISTS, DEL, the set
// commands on distinct counters, and SC.* commands for what Redis has no
// word for. docs/RESP.md is the command reference.
//
// The server holds no counter state: each command is one or a few calls
// of the service. The commands that arrive together are served as a
// unit: consecutive writes (INCR, SADD, SC.INCRBY ...) of a pipeline, and
// of every connection the event loop reads in one cycle, go to the
// service as one WriteBatch, so that they join the engine's group commits
// together instead of making one round trip through it each, and
// consecutive GETs are one batch read (executor). Replies go back in
// order, and the commands of one connection take effect in the order
// sent, as in Redis.
package server

import (
	"go.opentelemetry.io/otel/trace"

	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/acl"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/internal/authtoken"
	"github.com/shardcounter/shardcounter/resp"
)

// Defaults of Options.
const (
	// DefaultCommandTimeout bounds the service calls of one command (or of
	// one batch of pipelined writes).
	DefaultCommandTimeout = 5 * time.Second
	// DefaultMaxClients bounds the connections served at once, as Redis's
	// maxclients does.
	DefaultMaxClients = 10000
	// DefaultWriteTimeout bounds the sending of one batch of replies, so
	// that a client that stops reading cannot hold its connection forever.
	DefaultWriteTimeout = time.Minute
	// DefaultReadTimeout bounds the time a command takes to arrive once
	// its first byte has: a client that sends half a command and stops
	// (or trickles it) is closed then, instead of holding its buffered
	// input for ever. A command of the 1 MiB limit arrives within it at
	// 100 KB/s, as an HTTP body of --max-body within --body-timeout.
	DefaultReadTimeout = 10 * time.Second
	// DefaultMaxInputMemory bounds the bytes of unparsed input buffered
	// for all connections together (resp.Budget). Idle connections
	// served by the event loop hold none.
	DefaultMaxInputMemory = 256 << 20

	// PreAuthMaxBuffer is the most unparsed input an unauthenticated
	// connection may hold (with tokens required): AUTH and HELLO with any
	// token (http.MaxTokenLen) fit. Redis closed the same hole in 2021
	// (CVE-2021-32675), letting an unauthenticated client send only
	// small frames; 1,000 connections holding this much hold 4 MiB.
	PreAuthMaxBuffer = 4 << 10
	// PreAuthMaxArgs bounds the arguments of an unauthenticated
	// connection's command, as Redis does (10): HELLO 3 AUTH user pass
	// SETNAME name has 7.
	PreAuthMaxArgs = 10
)

// Options configure a Server. The zero value is usable: each field's doc
// gives its default.
type Options struct {
	// AuthTokens, when not empty, are the passwords accepted by AUTH and
	// HELLO ... AUTH; until a connection authenticates, every other
	// command gets -NOAUTH. SetAuthTokens replaces them.
	AuthTokens []string
	// Users, when set, are the users AUTH and HELLO ... AUTH accept, with
	// what each may run and touch (package acl); it wins over AuthTokens,
	// whose tokens the caller adds as default's passwords (Users.WithTokens).
	// SetUsers replaces them.
	Users *acl.Users
	// Audit, when set, receives a line for every command refused for its
	// user's rights and every @admin or @keyspace command (acl.Audit).
	Audit *acl.Audit
	// Limits bound what an authenticated connection may send
	// (resp.Limits' defaults; its Budget is the server's own, of
	// MaxInputMemory). Before AUTH, with tokens required, a connection is
	// read one command at a time under PreAuthMaxBuffer and
	// PreAuthMaxArgs.
	Limits resp.Limits
	// ReadTimeout bounds the time a command takes to arrive once its
	// first byte has; past it the connection gets a protocol error and
	// is closed. An idle connection, with nothing buffered, has no
	// deadline. Negative means none. Default DefaultReadTimeout.
	ReadTimeout time.Duration
	// MaxInputMemory bounds the bytes of unparsed input buffered for all
	// connections together; a connection whose input would take more is
	// answered with a protocol error and closed. Default
	// DefaultMaxInputMemory.
	MaxInputMemory int64
	// AuthGuard counts failed AUTH and HELLO ... AUTH by remote address
	// and, past a burst, delays their -WRONGPASS reply (authtoken.Guard).
	// serve shares one with the HTTP server. Default: a Guard of the
	// server's own, whose bursts are logged at warn level.
	AuthGuard *authtoken.Guard
	// CommandTimeout bounds the service calls of one command or of one
	// batch of pipelined writes. Default DefaultCommandTimeout.
	CommandTimeout time.Duration
	// WriteTimeout bounds the sending of one batch of replies. Default
	// DefaultWriteTimeout.
	WriteTimeout time.Duration
	// MaxClients bounds the connections served at once; past it a new
	// connection gets "-ERR max number of clients reached" and is
	// closed. Default DefaultMaxClients.
	MaxClients int
	// Engine, when set, is shown by INFO (section "engine"): writes,
	// batches, commit times.
	Engine *engine.Stats
	// Durability is the engine's mode, shown by INFO and CONFIG GET
	// appendfsync: "durable" (the default) or "async".
	Durability engine.Durability
	// Version is shardcounter's version, shown by HELLO and INFO.
	Version string
	// Tracer, when set, gives every command a span (trace.go), the span
	// the engine links a write's commit to. Nil, the default, makes none
	// and costs a command a nil check.
	Tracer trace.Tracer
	// Logger receives protocol errors (at debug level) and panics.
	// Default slog.Default().
	Logger *slog.Logger
	// ConnGoroutines serves each connection on a goroutine of its own
	// instead of from the event loop (Linux), where a command that waits
	// for the store holds up only its own connection rather than the
	// loop's cycle. It is what the server does on other systems. The loop
	// is faster for many small commands (docs/RESP.md, "Serving"). It is
	// the default over a service whose commits of one hot counter overlap
	// (engine.Engine.OverlapsHotCommits: Redis, Redis Cluster), unless
	// EventLoop is set.
	ConnGoroutines bool
	// EventLoop keeps the event loop over a service whose commits of one
	// hot counter overlap, where the server would otherwise serve a
	// goroutine a connection: the loop holds one batch at a time in the
	// service, so there a hot counter's writes commit one batch at a time.
	// ConnGoroutines overrides it.
	EventLoop bool
	// TLSConfig, when set, makes Serve speak TLS on its listeners. TLS
	// connections are served each on a goroutine of its own: the event
	// loop reads raw descriptors. With client certificates required and
	// verified (ClientAuth), a certificate whose subject CN names a user
	// that is on authenticates the connection as that user, without AUTH.
	TLSConfig *tls.Config
	// AllowFlush lets FLUSHDB and FLUSHALL delete every counter (serve
	// --resp-allow-flush); without it they are refused.
	AllowFlush bool
}

// hotCommitOverlapper is implemented by a service whose writers of one
// hot counter wait for their commits beside each other's
// (engine.Engine.OverlapsHotCommits). The event loop waits for each
// cycle's batch before it reads the next commands, so over such a service
// it would leave all but one of those commits unused: there the server
// serves each connection on a goroutine of its own, whose writes reach the
// engine while another connection's batch commits (docs/RESP.md,
// "Serving").
type hotCommitOverlapper interface {
	OverlapsHotCommits() bool
}

// Server serves a CounterService over RESP. It is safe for concurrent use.
type Server struct {
	svc     shardcounter.CounterService
	opts    Options
	users   acl.Set
	start   time.Time
	budget  *resp.Budget
	preAuth resp.Limits // limits of a connection yet to authenticate

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	closing   bool
	serving   sync.WaitGroup // connections being served

	shutdown atomic.Bool
	closeNow atomic.Bool // Shutdown's deadline passed: close every connection
	nextID   atomic.Int64
	stats    stats

	types   typeCache // what names hold (types.go)
	cursors cursors   // SCAN's positions (keyspace.go)

	loopOnce sync.Once
	loop     atomic.Pointer[loop] // serves the connections (loop_linux.go), once one came
}

// stats are the server's running totals, shown by INFO.
type stats struct {
	connected      atomic.Int64 // connections open now
	connections    atomic.Int64 // connections accepted in all
	commands       atomic.Int64 // commands served
	rejected       atomic.Int64 // connections refused at MaxClients
	protocolErrors atomic.Int64 // connections closed for a malformed frame
	readTimeouts   atomic.Int64 // connections closed for a command not complete within ReadTimeout
	revoked        atomic.Int64 // sessions ended because their token was removed
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("resp server closed")

// New returns a Server over svc.
func New(svc shardcounter.CounterService, opts Options) *Server {
	if opts.CommandTimeout <= 0 {
		opts.CommandTimeout = DefaultCommandTimeout
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.MaxClients <= 0 {
		opts.MaxClients = DefaultMaxClients
	}
	if opts.Durability == "" {
		opts.Durability = engine.Durable
	}
	if opts.Version == "" {
		opts.Version = "devel"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = DefaultReadTimeout
	}
	if opts.MaxInputMemory <= 0 {
		opts.MaxInputMemory = DefaultMaxInputMemory
	}
	if opts.AuthGuard == nil {
		log := opts.Logger
		opts.AuthGuard = &authtoken.Guard{OnBurst: func(addr string, p authtoken.Protocol, n int64) {
			log.Warn("failed authentications: slowing this address down", "addr", addr, "protocol", p.String(), "failures", n)
		}}
	}
	if !opts.EventLoop {
		if h, ok := svc.(hotCommitOverlapper); ok && h.OverlapsHotCommits() {
			opts.ConnGoroutines = true
		}
	}
	budget := resp.NewBudget(opts.MaxInputMemory)
	opts.Limits.Budget = budget
	s := &Server{
		svc:    svc,
		opts:   opts,
		start:  time.Now(),
		budget: budget,
		preAuth: resp.Limits{MaxBuffer: PreAuthMaxBuffer, MaxBulk: PreAuthMaxBuffer, MaxInline: PreAuthMaxBuffer,
			MaxArgs: PreAuthMaxArgs, Pipeline: 1, Budget: budget},
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
	}
	if opts.Users == nil {
		opts.Users = acl.FromTokens(opts.AuthTokens)
	}
	s.SetUsers(opts.Users)
	return s
}

// SetAuthTokens replaces the passwords AUTH accepts with tokens, the
// passwords of the user default (acl.FromTokens); none means no AUTH is
// needed. It is SetUsers of the tokens' users.
func (s *Server) SetAuthTokens(tokens []string) {
	s.SetUsers(acl.FromTokens(tokens))
}

// SetUsers replaces the users; nil means no AUTH is needed. A connection
// whose user is gone, off or no longer has the password it gave gets
// -NOAUTH on its next command and is closed; the others run their next
// command with their user's new rights. It is safe to call while the
// server serves (serve calls it on SIGHUP).
func (s *Server) SetUsers(us *acl.Users) { s.users.Replace(us) }

// Serve accepts connections on ln and serves them until Shutdown, when it
// returns ErrServerClosed. It closes ln. On Linux the server's event loop
// serves every connection of a TCP or Unix listener (loop_linux.go); other
// connections, and all of them with Options.ConnGoroutines or on other
// systems, are served each on its own goroutine.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	if s.opts.TLSConfig != nil {
		ln = tls.NewListener(ln, s.opts.TLSConfig)
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.shutdown.Load() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors, say: wait and retry, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.opts.Logger.Warn("resp: accept failed; retrying", "error", err, "in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		s.stats.connections.Add(1)
		c := s.newConn(nc)
		s.mu.Lock()
		switch {
		case s.closing:
			s.mu.Unlock()
			nc.Close()
			continue
		case len(s.conns) >= s.opts.MaxClients:
			s.mu.Unlock()
			s.stats.rejected.Add(1)
			nc.SetWriteDeadline(time.Now().Add(time.Second))
			nc.Write([]byte("-ERR max number of clients reached\r\n"))
			nc.Close()
			continue
		}
		s.prepare(c)
		s.conns[c] = struct{}{}
		s.serving.Add(1)
		s.mu.Unlock()
		s.stats.connected.Add(1)
		s.serveConn(c)
	}
}

// Shutdown stops the server gracefully: it closes the listeners, lets each
// connection finish the commands it is executing and send their replies,
// and closes it before it reads more. It returns once every connection is
// closed, or with ctx's error when ctx ends first, after closing the
// connections still open (their commands in flight may yet complete in
// the service). Commands a client had sent that were not yet executing are
// not executed: the client sees the connection close.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdown.Store(true)
	s.mu.Lock()
	s.closing = true
	for ln := range s.listeners {
		ln.Close()
	}
	for c := range s.conns {
		c.interrupt()
	}
	s.mu.Unlock()
	if l := s.loop.Load(); l != nil {
		l.wakeUp() // it closes its connections as they finish
	}
	done := make(chan struct{})
	go func() {
		s.serving.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			if c.lc == nil { // the loop closes its own
				c.nc.Close()
			}
		}
		s.mu.Unlock()
		s.closeNow.Store(true)
		if l := s.loop.Load(); l != nil {
			l.wakeUp()
		}
		return ctx.Err()
	}
}

// forget removes a closed connection.
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.stats.connected.Add(-1)
	s.serving.Done()
}
