// Package faultproxy is a TCP proxy for tests that puts a store's network
// at the test's command: it cuts every connection, cuts the next reply in
// its middle, delays, and black-holes (accepts and never answers), between
// a store client and its server (PostgreSQL, Redis, each node of a Redis
// Cluster).
//
// It is a small proxy of the project's own rather than toxiproxy
// (github.com/Shopify/toxiproxy/v2) because the faults the tests need are
// a few lines each here, run in the test's process with no server to
// start or API to drive, and one of them, cutting a reply in its middle at
// the moment a commit answers, is not a toxic toxiproxy has (its
// limit_data cuts after a byte count fixed in advance, per connection).
package faultproxy

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards the connections it accepts on Addr to its target.
type Proxy struct {
	ln     net.Listener
	target string

	delay     atomic.Int64 // nanoseconds added before each chunk is forwarded
	blackHole atomic.Bool  // forward nothing, answer nothing
	refuse    atomic.Bool  // close each new connection at once
	cutReply  atomic.Int32 // cut this many next replies in their middle
	cutSkip   atomic.Int32 // pass this many replies before cutting those

	mu    sync.Mutex
	conns map[*link]struct{}
	cuts  atomic.Int64
}

// link is one proxied connection: the client's and the server's side.
type link struct {
	client, server net.Conn
	once           sync.Once
	dead           atomic.Bool
}

func (l *link) close() {
	l.once.Do(func() {
		l.dead.Store(true)
		l.client.Close()
		l.server.Close()
	})
}

// Start starts a proxy on a free port of 127.0.0.1 to target (host:port).
// The test's cleanup closes it and every connection.
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[*link]struct{})}
	go p.accept()
	tb.Cleanup(p.Close)
	return p
}

// Addr is the proxy's address, to give the store client in place of the
// target's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Close stops accepting and cuts every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.CutAll()
}

// CutAll closes every open connection, both sides, at once: to the client
// it is a connection reset mid-whatever it was doing.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	ls := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		ls = append(ls, l)
	}
	p.mu.Unlock()
	for _, l := range ls {
		l.close()
	}
	p.cuts.Add(int64(len(ls)))
}

// CutReplies makes the next n replies (chunks from the server) be cut in
// their middle: the first half is forwarded, then the connection closed.
// The server has done what the reply answers; the client never learns it.
func (p *Proxy) CutReplies(n int) { p.cutReply.Store(int32(n)) }

// CutReplyAfter makes the reply after the next skip replies be cut in its
// middle (as CutReplies(1), skip replies later): for a test that knows
// which reply of a conversation answers the commit.
func (p *Proxy) CutReplyAfter(skip int) {
	p.cutSkip.Store(int32(skip))
	p.cutReply.Store(1)
}

// SetDelay delays every chunk, both ways, by d (0: none).
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// BlackHole, while on, makes the proxy accept connections and forward
// nothing either way: a network partition that drops packets.
func (p *Proxy) BlackHole(on bool) { p.blackHole.Store(on) }

// Refuse, while on, closes each new connection as soon as it is accepted,
// as a server that is down (the client's next read fails at once).
func (p *Proxy) Refuse(on bool) { p.refuse.Store(on) }

// Cuts returns how many connections CutAll and cut replies have closed.
func (p *Proxy) Cuts() int64 { return p.cuts.Load() }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			c.Close()
			continue
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	s, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	l := &link{client: c, server: s}
	p.mu.Lock()
	p.conns[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
		l.close()
	}()
	done := make(chan struct{}, 2)
	go func() { p.pipe(l, c, s, false); done <- struct{}{} }()
	go func() { p.pipe(l, s, c, true); done <- struct{}{} }()
	<-done
}

// pipe copies from src to dst chunk by chunk, applying the faults;
// replies says src is the server.
func (p *Proxy) pipe(l *link, src, dst net.Conn, replies bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			for p.blackHole.Load() {
				time.Sleep(5 * time.Millisecond) // hold the bytes: nothing goes through
				if l.dead.Load() {
					return
				}
			}
			if d := p.delay.Load(); d > 0 {
				time.Sleep(time.Duration(d))
			}
			if replies && p.takeCut() {
				dst.Write(buf[:n/2]) //nolint:errcheck // cutting anyway
				p.cuts.Add(1)
				l.close()
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				l.close()
				return
			}
		}
		if err != nil { // EOF or a failure: either way the link is over
			l.close()
			return
		}
	}
}

// takeCut takes one of the replies CutReplies asked to cut, if any is left.
func (p *Proxy) takeCut() bool {
	for {
		n := p.cutReply.Load()
		if n <= 0 {
			return false
		}
		if k := p.cutSkip.Load(); k > 0 {
			if p.cutSkip.CompareAndSwap(k, k-1) {
				return false
			}
			continue
		}
		if p.cutReply.CompareAndSwap(n, n-1) {
			return true
		}
	}
}
