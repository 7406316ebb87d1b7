package main_test

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/shardcounter/shardcounter/internal/redistest"
)

// respAddrRE finds the RESP address in serve's log line.
var respAddrRE = regexp.MustCompile(`msg="serving the Redis protocol" addr=(\S+)`)

// respAddr returns the address serve's log gives for --resp-listen.
func (s *Server) respAddr(tb testing.TB) (host, port string) {
	tb.Helper()
	s.waitLog(tb, "serving the Redis protocol")
	m := respAddrRE.FindStringSubmatch(s.Logs())
	if m == nil {
		tb.Fatalf("no RESP address in the log:\n%s", s.Logs())
	}
	h, p, err := net.SplitHostPort(m[1])
	if err != nil {
		tb.Fatal(err)
	}
	return h, p
}

// redisCLI runs redis-cli against host:port and returns its output.
func redisCLI(tb testing.TB, host, port string, args ...string) string {
	tb.Helper()
	bin, err := exec.LookPath("redis-cli")
	if err != nil {
		tb.Fatal("redis-cli is not on PATH: run scripts/ensure-redis-tools.sh")
	}
	out, err := exec.Command(bin, append([]string{"-h", host, "-p", port, "--no-auth-warning"}, args...)...).CombinedOutput()
	if err != nil {
		tb.Fatalf("redis-cli %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestServeRESP is issue 13's "done when", as a new user would try it:
// serve --resp-listen, then redis-cli INCR and GET, and redis-benchmark;
// on SIGTERM serve exits 0 with every acknowledged write committed.
func TestServeRESP(t *testing.T) {
	dir := t.TempDir()
	s := StartServer(t, dir, "--resp-listen", "127.0.0.1:0")
	h, p := s.respAddr(t)
	if got := redisCLI(t, h, p, "INCR", "likes"); got != "1" {
		t.Fatalf("redis-cli INCR likes: %q, want 1", got)
	}
	if got := redisCLI(t, h, p, "GET", "likes"); got != "1" {
		t.Fatalf("redis-cli GET likes: %q, want 1", got)
	}
	// Commands that read sketches reach the store through every wrapper
	// serve puts around it (metrics, expiry).
	redisCLI(t, h, p, "PFADD", "uv:a", "x", "y")
	redisCLI(t, h, p, "PFADD", "uv:b", "y", "z")
	if got := redisCLI(t, h, p, "PFCOUNT", "uv:a", "uv:b"); got != "3" {
		t.Fatalf("redis-cli PFCOUNT uv:a uv:b: %q, want 3", got)
	}
	if got := redisCLI(t, h, p, "PFMERGE", "uv:ab", "uv:a", "uv:b"); got != "OK" {
		t.Fatalf("redis-cli PFMERGE: %q, want OK", got)
	}
	if got := redisCLI(t, h, p, "PFCOUNT", "uv:ab"); got != "3" {
		t.Fatalf("redis-cli PFCOUNT uv:ab: %q, want 3", got)
	}
	bench, err := exec.LookPath("redis-benchmark")
	if err != nil {
		t.Fatal("redis-benchmark is not on PATH: run scripts/ensure-redis-tools.sh")
	}
	if out, err := exec.Command(bench, "-h", h, "-p", p, "-t", "incr", "-n", "2000", "-c", "16", "-q").CombinedOutput(); err != nil {
		t.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	if code := s.Stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM:\n%s", code, s.Logs())
	}
	// Restarted on the same store, the RESP port reads what was written.
	s = StartServerEnv(t, dir, []string{"SHARDCOUNTER_RESP_LISTEN=127.0.0.1:0"},
		"--listen", "127.0.0.1:0", "--store", "pebble:"+filepath.Join(dir, "data", "pebble"))
	h, p = s.respAddr(t)
	if got := redisCLI(t, h, p, "MGET", "likes", "counter:__rand_int__"); got != "1\n2000" {
		t.Fatalf("after a restart, MGET: %q, want 1 and 2000", got)
	}
}

// TestServeRESPAuth checks that --auth-token-file guards the RESP port
// too, and that SIGHUP's new tokens apply to it.
func TestServeRESPAuth(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("old-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := StartServer(t, dir, "--resp-listen", "127.0.0.1:0", "--auth-token-file", tokens)
	h, p := s.respAddr(t)
	if got := redisCLI(t, h, p, "INCR", "a"); got != "NOAUTH Authentication required." {
		t.Fatalf("INCR without AUTH: %q", got)
	}
	if got := redisCLI(t, h, p, "-a", "old-token", "INCR", "a"); got != "1" {
		t.Fatalf("INCR with the token: %q", got)
	}
	if err := os.WriteFile(tokens, []byte("new-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitLog(t, "auth tokens reloaded")
	if got := redisCLI(t, h, p, "-a", "new-token", "INCR", "a"); got != "2" {
		t.Fatalf("INCR with the new token: %q", got)
	}
	if got := redisCLI(t, h, p, "-a", "old-token", "INCR", "a"); !strings.Contains(got, "NOAUTH") {
		t.Fatalf("INCR with the old token after SIGHUP: %q, want NOAUTH", got)
	}
}

// TestServeRESPListenError checks that an address serve cannot listen on
// fails at start, exit 1, naming the flag.
func TestServeRESPListenError(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	msg := Run(t, dir, nil, "serve", "--listen", "127.0.0.1:0", "--store", "bolt:"+filepath.Join(dir, "c.db"),
		"--resp-listen", ln.Addr().String()).MustFail(t, 1)
	if !strings.Contains(msg, "--resp-listen") {
		t.Fatalf("message %q does not name the flag", msg)
	}
}

// TestServeRESPConnGoroutines checks that --resp-conn-goroutines serves
// the RESP port on a goroutine a connection, that the default is the
// event loop on Pebble and goroutines on Redis (whose commits of a hot
// counter overlap), and that --resp-conn-goroutines=false keeps the loop
// there (INFO's multiplexing_api says which).
func TestServeRESPConnGoroutines(t *testing.T) {
	// A Redis each, so that each case's INCRs count from 1.
	redisA, redisB := "redis://"+redistest.MustStart(t).Addr, "redis://"+redistest.MustStart(t).Addr
	for _, c := range []struct {
		flags []string
		api   string
	}{
		{[]string{"--resp-listen", "127.0.0.1:0"}, "epoll"},
		{[]string{"--resp-listen", "127.0.0.1:0", "--resp-conn-goroutines"}, "goroutine"},
		{[]string{"--resp-listen", "127.0.0.1:0", "--store", redisA}, "goroutine"},
		{[]string{"--resp-listen", "127.0.0.1:0", "--store", redisB, "--resp-conn-goroutines=false"}, "epoll"},
	} {
		s := StartServer(t, t.TempDir(), c.flags...)
		h, p := s.respAddr(t)
		for i, want := range []string{"1", "2"} {
			if got := redisCLI(t, h, p, "INCR", "likes"); got != want {
				t.Fatalf("%v: INCR %d: %q, want %s", c.flags, i+1, got, want)
			}
		}
		if info := redisCLI(t, h, p, "INFO", "server"); !strings.Contains(info, "multiplexing_api:"+c.api+"\r") {
			t.Errorf("%v: INFO server says\n%s\nwant multiplexing_api:%s", c.flags, info, c.api)
		}
		if code := s.Stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("serve exited %d after SIGTERM:\n%s", code, s.Logs())
		}
	}
}

// TestServeRESPHashes checks that a hash written over RESP shows through
// the CLI and HTTP as documented: each field a counter whose id is the
// hash's name, U+001F and the field, listed (quoted by the CLI) after the
// hash's name, read back by that id, and kept apart from the counter
// INCR a:b:c makes.
func TestServeRESPHashes(t *testing.T) {
	dir := t.TempDir()
	s := StartServer(t, dir, "--resp-listen", "127.0.0.1:0")
	h, p := s.respAddr(t)
	env := s.Env()
	redisCLI(t, h, p, "HINCRBY", "post:42", "likes", "5")
	redisCLI(t, h, p, "HINCRBY", "a", "b:c", "1")
	redisCLI(t, h, p, "INCRBY", "a:b:c", "2")
	list := Run(t, dir, env, "list").MustOK(t)
	for _, want := range []string{`"a\x1f" `, `"a\x1fb:c" `, "a:b:c ", `"post:42\x1f" `, `"post:42\x1flikes" `} {
		if !strings.Contains(list, "\n"+want) {
			t.Errorf("list printed\n%s\nwant a line starting %s", list, want)
		}
	}
	if got := Run(t, dir, env, "get", "post:42\x1flikes").MustOK(t); got != "5\n" {
		t.Errorf("get post:42␟likes printed %q, want 5", got)
	}
	if got := Run(t, dir, env, "get", "a\x1fb:c", "a:b:c").MustOK(t); !strings.Contains(got, `"a\x1fb:c"`) || !strings.Contains(got, "a:b:c") {
		t.Errorf("get of a field and a counter printed %q", got)
	}
	// HTTP, with the separator percent-encoded in the path.
	resp, err := http.Get(s.URL + "/v1/counters/post:42%1Flikes")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	if !strings.Contains(body, `"id":"post:42\u001flikes"`) || !strings.Contains(body, `"value":5`) {
		t.Errorf("GET /v1/counters/post:42%%1Flikes = %s", body)
	}
	if got := redisCLI(t, h, p, "HGET", "post:42", "likes"); got != "5" {
		t.Errorf("HGET after the CLI's reads = %q", got)
	}
}
