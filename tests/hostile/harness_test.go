package hostile_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/internal/testbin"
)

// binary is the shardcounter binary built for these tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shardcounter-hostile")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "shardcounter")
	if out, err := exec.Command("go", "build", "-o", binary, "../../cmd/shardcounter").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building shardcounter: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// readSources reads the module's sources once (testbin.ReadSources): the
// binary these tests run is built by a subprocess, whose inputs go test's
// cache does not see.
var readSources = sync.OnceFunc(func() { testbin.ReadSources("../..") })

// token is the token every server here is started with.
const token = "hostile-test-token"

// server is a running `shardcounter serve` with a token file, HTTP and
// RESP on free loopback ports.
type server struct {
	*testbin.Server
	tokenFile string
}

// start runs serve with a token file and --resp-listen on a bolt file in
// a temporary directory (unless args give a --store), adding args, and
// waits until both ports listen. It is killed at the end of the test.
func start(tb testing.TB, args ...string) *server {
	tb.Helper()
	readSources()
	dir := tb.TempDir()
	s := &server{tokenFile: filepath.Join(dir, "tokens")}
	if err := os.WriteFile(s.tokenFile, []byte(token+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	full := []string{"--listen", "127.0.0.1:0", "--resp-listen", "127.0.0.1:0", "--auth-token-file", s.tokenFile}
	if !strings.Contains(strings.Join(args, " "), "--store") {
		full = append(full, "--store", "bolt:"+filepath.Join(dir, "data.db"))
	}
	ts, err := testbin.Start(binary, dir, 30*time.Second, append(full, args...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(ts.Kill)
	s.Server = ts
	return s
}

// Logs returns what the server has logged so far.
func (s *server) Logs() string { return s.Server.Logs.String() }

// waitLog waits until the log holds sub.
func (s *server) waitLog(tb testing.TB, sub string) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(s.Logs(), sub) {
		if time.Now().After(deadline) {
			tb.Fatalf("the log never said %q:\n%s", sub, s.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reloadTokens writes tokens to the token file and has the server reread
// it (SIGHUP).
func (s *server) reloadTokens(tb testing.TB, tokens ...string) {
	tb.Helper()
	if err := os.WriteFile(s.tokenFile, []byte(strings.Join(tokens, "\n")+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	n := strings.Count(s.Logs(), "auth tokens reloaded")
	s.Cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(s.Logs(), "auth tokens reloaded") == n {
		if time.Now().After(deadline) {
			tb.Fatalf("the tokens were not reloaded:\n%s", s.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reply is an HTTP reply, read in full.
type reply struct {
	Status int
	Header http.Header
	Body   string
}

// do sends a request with the token (unless headers set Authorization)
// and returns the reply. Headers come in name, value pairs.
func (s *server) do(tb testing.TB, method, path, body string, headers ...string) reply {
	tb.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: string(b)}
}

// must checks the reply's status, and that its body holds each of subs.
func (r reply) must(tb testing.TB, status int, subs ...string) reply {
	tb.Helper()
	if r.Status != status {
		tb.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	for _, sub := range subs {
		if !strings.Contains(r.Body, sub) {
			tb.Fatalf("reply %s does not hold %q", r.Body, sub)
		}
	}
	return r
}

// rconn is a RESP connection spoken by hand.
type rconn struct {
	tb testing.TB
	nc net.Conn
	br *bufio.Reader
}

func (s *server) dialRESP(tb testing.TB) *rconn {
	tb.Helper()
	nc, err := net.Dial("tcp", s.RESP)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close() })
	return &rconn{tb: tb, nc: nc, br: bufio.NewReader(nc)}
}

func (c *rconn) send(s string) {
	c.tb.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c.nc, s); err != nil {
		c.tb.Fatalf("send: %v", err)
	}
}

// line reads one reply line, without its CRLF.
func (c *rconn) line() string {
	c.tb.Helper()
	c.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	s, err := c.br.ReadString('\n')
	if err != nil {
		c.tb.Fatalf("reading a reply: %q, %v", s, err)
	}
	return strings.TrimSuffix(s, "\r\n")
}

// closed waits for the server to close the connection, with nothing more
// sent, and reports whether it did within d.
func (c *rconn) closed(d time.Duration) bool {
	c.nc.SetReadDeadline(time.Now().Add(d))
	_, err := c.br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// stream is a watch stream being read.
type stream struct {
	resp *http.Response
	done chan struct{}
}

// openWatch opens GET /v1/counters/{id}/watch with the token and reads it
// in the background until it ends.
func (s *server) openWatch(tb testing.TB, id string) *stream {
	tb.Helper()
	req, err := http.NewRequest("GET", s.URL+"/v1/counters/"+id+"/watch", nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != 200 {
		tb.Fatalf("watch: status %d", resp.StatusCode)
	}
	st := &stream{resp: resp, done: make(chan struct{})}
	tb.Cleanup(func() { resp.Body.Close() })
	go func() {
		io.Copy(io.Discard, resp.Body)
		close(st.done)
	}()
	return st
}

// ended reports whether the stream ended within d.
func (st *stream) ended(d time.Duration) bool {
	select {
	case <-st.done:
		return true
	case <-time.After(d):
		return false
	}
}
