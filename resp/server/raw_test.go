package server_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/resp/server"
)

// raw is a connection that speaks RESP by hand, to send what no client
// library sends and to check replies byte for byte.
type raw struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

// ioTimeout bounds each read or write of a raw connection, so that a
// server that fails to answer fails the test instead of hanging it.
const ioTimeout = 20 * time.Second

// MustRaw dials addr; the connection closes when the test ends.
func MustRaw(tb testing.TB, addr string) *raw {
	tb.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close() })
	return &raw{t: tb, nc: nc, br: bufio.NewReader(nc)}
}

func serverOptions() server.Options { return server.Options{} }

func (r *raw) send(s string) {
	r.t.Helper()
	r.nc.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := io.WriteString(r.nc, s); err != nil {
		r.t.Fatalf("send: %v", err)
	}
}

// expect reads each reply and checks it is exactly want.
func (r *raw) expect(want ...string) {
	r.t.Helper()
	for _, w := range want {
		r.nc.SetReadDeadline(time.Now().Add(ioTimeout))
		got := make([]byte, len(w))
		n, err := io.ReadFull(r.br, got)
		if err != nil || string(got) != w {
			r.t.Fatalf("got %q, %v; want %q", got[:n], err, w)
		}
	}
}

// line reads one line of a reply, without its CRLF.
func (r *raw) line() string {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	s, err := r.br.ReadString('\n')
	if err != nil || !strings.HasSuffix(s, "\r\n") {
		r.t.Fatalf("reading a reply line: %q, %v", s, err)
	}
	return s[:len(s)-2]
}

// skipReply reads one reply of any type and returns its first line.
func (r *raw) skipReply() string {
	r.t.Helper()
	first := r.line()
	n, _ := strconv.Atoi(first[1:])
	switch first[0] {
	case '$', '=':
		if n >= 0 {
			buf := make([]byte, n+2)
			if _, err := io.ReadFull(r.br, buf); err != nil {
				r.t.Fatal(err)
			}
		}
	case '*', '~', '>':
		for range n {
			r.skipReply()
		}
	case '%':
		for range 2 * n {
			r.skipReply()
		}
	}
	return first
}

// expectClosed checks that the server closed the connection, with nothing
// more sent.
func (r *raw) expectClosed() {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	b, err := r.br.ReadByte()
	if err == nil {
		rest, _ := r.br.Peek(r.br.Buffered())
		r.t.Fatalf("got %q, want the connection closed", string(b)+string(rest))
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		r.t.Fatalf("got %v, want the connection closed", err)
	}
}

func listen(tb testing.TB) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return ln
}

func dial(addr string) (net.Conn, error) { return net.Dial("tcp", addr) }
