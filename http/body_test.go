package http_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// slowBody opens a connection to the server at url and sends a request
// whose body never finishes: the headers announce size bytes and only
// part of the body follows. It returns the connection, open.
func slowBody(tb testing.TB, url, path string, size int) net.Conn {
	tb.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	req := "POST " + path + " HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n" +
		"Content-Length: " + strconv.Itoa(size) + "\r\n\r\n{"
	if _, err := conn.Write([]byte(req)); err != nil {
		tb.Fatal(err)
	}
	return conn
}

// TestSlowBodiesHoldNoSlots checks that clients that send their headers
// and then dribble (or withhold) the body do not hold the server's
// concurrency slots: with every slot's worth of slow bodies in flight,
// another request is served at once.
func TestSlowBodiesHoldNoSlots(t *testing.T) {
	const slots = 2
	reading := make(chan struct{}, slots)
	e := MustServe(t, EnvOptions{
		Server: shttp.ServerOptions{MaxConcurrent: slots, QueueWait: 10 * time.Millisecond},
		// Signal when the server first reads a body: from then on, a server
		// that takes its slot before the body holds it while it waits.
		Front: func(api http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.Body = &signalReader{ReadCloser: r.Body, once: new(sync.Once), c: reading}
				api.ServeHTTP(w, r)
			})
		},
	})
	e.MustCreate(t, "c", 1)
	for range slots {
		slowBody(t, e.URL, path("c")+"/increment", 100)
		<-reading
	}
	for range 3 {
		if _, err := e.Client.WriteCounter(context.Background(), shardcounter.Write{Counter: "c", Delta: 1}); err != nil {
			t.Fatalf("a request behind %d slow bodies: %v", slots, err)
		}
	}
	if got := e.MustValue(t, "c"); got != 3 {
		t.Fatalf("value %d, want 3", got)
	}
}

// signalReader sends on c at its first Read, if there is room.
type signalReader struct {
	io.ReadCloser
	once *sync.Once
	c    chan struct{}
}

func (s *signalReader) Read(p []byte) (int, error) {
	s.once.Do(func() {
		select {
		case s.c <- struct{}{}:
		default: // nobody waits: a request after the slow ones
		}
	})
	return s.ReadCloser.Read(p)
}

// TestBodyTimeout checks that a body that does not arrive within
// BodyTimeout is answered with an error rather than waited for.
func TestBodyTimeout(t *testing.T) {
	e := MustServe(t, EnvOptions{Server: shttp.ServerOptions{BodyTimeout: 50 * time.Millisecond}})
	conn := slowBody(t, e.URL, path("c")+"/increment", 100)
	// A server without a body deadline never answers; the test's own
	// bound on that is this read deadline.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no reply to a stalled body: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	r := Reply{Status: resp.StatusCode, Header: resp.Header, Body: body}
	msg := r.MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
	if !strings.Contains(msg, "body") {
		t.Fatalf("message %q does not say the body was late", msg)
	}
	if !resp.Close {
		t.Fatal("the connection stays open after a body that was not read")
	}
	if _, err := e.Client.ReadCounter(context.Background(), "c", ""); err == nil {
		t.Fatal("the stalled write created the counter")
	}
}

// TestBodyPastRequestTimeout checks that a body that arrives after its
// request's RequestTimeout, within BodyTimeout, is read and served: the
// request's deadline then counts from the body's arrival, and the body's
// own deadline is kept past the request's.
func TestBodyPastRequestTimeout(t *testing.T) {
	e := MustServe(t, EnvOptions{Server: shttp.ServerOptions{RequestTimeout: 150 * time.Millisecond, BodyTimeout: time.Minute}})
	conn := slowBody(t, e.URL, path("c")+"/increment", len(`{"by":3}`))
	time.Sleep(500 * time.Millisecond) // past the request's deadline
	if _, err := conn.Write([]byte(`"by":3}`)); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no reply to a late body: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a body in after the request's deadline: status %d, %s", resp.StatusCode, body)
	}
	if got := e.MustValue(t, "c"); got != 3 {
		t.Fatalf("value %d, want 3", got)
	}
}

// bufferSizes is a request body that records the size of every buffer it
// is asked to fill.
type bufferSizes struct {
	r   io.Reader
	max int
}

func (b *bufferSizes) Read(p []byte) (int, error) {
	b.max = max(b.max, len(p))
	return b.r.Read(p)
}

func (b *bufferSizes) Close() error { return nil }

// TestBodyBufferNotFromHeader checks that the server does not size its
// body buffer from the client's Content-Length: a header costs nothing to
// send, so a thousand requests announcing a megabyte each would otherwise
// make the server allocate a gigabyte before any of it arrived.
func TestBodyBufferNotFromHeader(t *testing.T) {
	srv := shttp.NewServer(nopService{}, shttp.ServerOptions{
		MaxBodyBytes: 64 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	for _, n := range []int64{1 << 20, 64 << 20} {
		body := &bufferSizes{r: bytes.NewReader([]byte(`{"by":1}`))}
		req := httptest.NewRequest(http.MethodPost, "/v1/counters/c/increment", body)
		req.ContentLength = n // announced; the body ends long before
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if body.max > 64<<10 {
			t.Errorf("Content-Length %d: the server read into a %d-byte buffer before any of it arrived", n, body.max)
		}
		if rec.Code != http.StatusBadRequest {
			t.Errorf("Content-Length %d with an 8-byte body: status %d, want 400", n, rec.Code)
		}
	}
}
