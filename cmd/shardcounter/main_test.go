package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/internal/testbin"
)

// binary is the shardcounter binary built for these tests: they drive the
// real program, its flags, exit codes and signals, through its CLI.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shardcounter-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "shardcounter")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
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

// Result is one finished run of the binary.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs the binary with args and the environment variables in env
// (NAME=VALUE), in dir, and waits for it.
func Run(tb testing.TB, dir string, env []string, args ...string) Result {
	tb.Helper()
	readSources()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		tb.Fatal(err)
	}
	return Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: code}
}

// cleanEnv is the test process's environment without SHARDCOUNTER_
// variables, so a developer's settings cannot change the results.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHARDCOUNTER_") {
			env = append(env, kv)
		}
	}
	return env
}

// MustOK checks that the run succeeded and returns its stdout.
func (r Result) MustOK(tb testing.TB) string {
	tb.Helper()
	if r.Code != 0 {
		tb.Fatalf("exit %d, want 0; stderr %q", r.Code, r.Stderr)
	}
	return r.Stdout
}

// MustFail checks the exit code and that stderr is one line naming the
// subcommand, and returns that line.
func (r Result) MustFail(tb testing.TB, code int) string {
	tb.Helper()
	if r.Code != code {
		tb.Fatalf("exit %d, want %d; stdout %q stderr %q", r.Code, code, r.Stdout, r.Stderr)
	}
	if lines := strings.Split(strings.TrimSuffix(r.Stderr, "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "shardcounter") {
		tb.Fatalf("stderr %q, want one line starting with shardcounter", r.Stderr)
	}
	return r.Stderr
}

// Server is a running `shardcounter serve`.
type Server struct {
	URL  string
	Dir  string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	logs bytes.Buffer
	code int
}

// addrRE finds the listen address in serve's start line, in the text or
// the JSON log format.
var addrRE = regexp.MustCompile(`msg="shardcounter serving" addr=(\S+)|"msg":"shardcounter serving","addr":"([^"]+)"`)

// StartServer runs serve on a free port with a store of the default kind
// (Pebble) in dir, adding args, and waits until it listens. It is killed
// at the end of the test.
func StartServer(tb testing.TB, dir string, args ...string) *Server {
	tb.Helper()
	store := "pebble:" + filepath.Join(dir, "data", "pebble")
	return StartServerEnv(tb, dir, nil, append([]string{"--listen", "127.0.0.1:0", "--store", store}, args...)...)
}

// StartServerEnv runs serve with exactly args and env added to the
// environment, and waits until it listens.
func StartServerEnv(tb testing.TB, dir string, env []string, args ...string) *Server {
	tb.Helper()
	readSources()
	cmd := exec.Command(binary, append([]string{"serve"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	s := &Server{Dir: dir, cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.mu.Lock()
			s.logs.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1] + m[2]
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		s.code = cmd.ProcessState.ExitCode()
		close(s.done)
	}()
	tb.Cleanup(func() {
		cmd.Process.Kill()
		<-s.done
	})
	select {
	case a := <-addr:
		s.URL = "http://" + a
	case <-s.done:
		tb.Fatalf("serve exited with %d before listening:\n%s", s.code, s.Logs())
	case <-time.After(30 * time.Second):
		tb.Fatalf("serve did not start:\n%s", s.Logs())
	}
	return s
}

// Logs returns what the server has written to stderr so far.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// Stop sends sig and waits for the server to exit, returning its code.
func (s *Server) Stop(tb testing.TB, sig syscall.Signal) int {
	tb.Helper()
	s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		tb.Fatalf("serve did not exit after %v:\n%s", sig, s.Logs())
	}
	return s.code
}

// Env returns the environment for client commands to reach s.
func (s *Server) Env() []string { return []string{"SHARDCOUNTER_SERVER=" + s.URL} }

// TestServeCacheFlags starts serve with --max-staleness 1m: a cached
// reading says it may be 60,000 ms old. On bolt it is served from the
// rollup while it is younger, so a write made since does not show in it;
// on Pebble, whose totals are in memory, the engine reads the store
// directly, so it does.
func TestServeCacheFlags(t *testing.T) {
	for _, tc := range []struct {
		name, store string
		want        int64 // the cached value after the second write
	}{{"Bolt", "bolt:data/c.db", 1}, {"Pebble", "pebble:data/pebble", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := StartServer(t, dir, "--store", tc.store, "--max-staleness", "1m", "--cache-size", "10", "--max-reads-in-flight", "1")
			env := s.Env()
			Run(t, dir, env, "incr", "views").MustOK(t)
			var r struct {
				ID             string `json:"id"`
				Value          int64  `json:"value"`
				Shards         int    `json:"shards"`
				Consistency    string `json:"consistency"`
				AsOf           string `json:"as_of"`
				MaxStalenessMS int64  `json:"max_staleness_ms"`
			}
			mustJSON(t, Run(t, dir, env, "get", "views", "--cached", "--json").MustOK(t), &r)
			if r.Value != 1 || r.MaxStalenessMS != 60000 || r.Consistency != "cached" {
				t.Fatalf("cached reading %+v, want value 1, cached, max_staleness_ms 60000", r)
			}
			Run(t, dir, env, "incr", "views").MustOK(t)
			mustJSON(t, Run(t, dir, env, "get", "views", "--cached", "--json").MustOK(t), &r)
			if r.Value != tc.want || r.MaxStalenessMS != 60000 {
				t.Fatalf("cached reading within a minute of the last: %+v, want value %d", r, tc.want)
			}
		})
	}
}

func TestClientCommands(t *testing.T) {
	dir := t.TempDir()
	s := StartServer(t, dir)
	env := s.Env()

	if got := Run(t, dir, env, "create", "likes", "--shards", "4").MustOK(t); got != "created likes with 4 shards\n" {
		t.Fatalf("create printed %q", got)
	}
	Run(t, dir, env, "incr", "likes").MustOK(t)
	Run(t, dir, env, "incr", "likes", "--by", "5").MustOK(t)  // flags after the id, as SPEC.md writes them
	Run(t, dir, env, "incr", "--by", "10", "likes").MustOK(t) // and before
	Run(t, dir, env, "decr", "likes", "--by=3").MustOK(t)
	if got := Run(t, dir, env, "incr", "likes", "--by", "7", "--request-id", "r1").MustOK(t); got != "incremented likes by 7\n" {
		t.Fatalf("incr printed %q", got)
	}
	if got := Run(t, dir, env, "incr", "likes", "--by", "7", "--request-id", "r1").MustOK(t); !strings.Contains(got, "already applied") {
		t.Fatalf("repeated incr printed %q", got)
	}
	if got := Run(t, dir, env, "get", "likes").MustOK(t); got != "20\n" {
		t.Fatalf("get printed %q, want 20", got)
	}
	Run(t, dir, env, "get", "likes", "--cached").MustOK(t)

	var reading struct {
		ID          string `json:"id"`
		Value       int64  `json:"value"`
		Shards      int    `json:"shards"`
		Consistency string `json:"consistency"`
		AsOf        string `json:"as_of"`
	}
	mustJSON(t, Run(t, dir, env, "get", "likes", "--json").MustOK(t), &reading)
	if reading.ID != "likes" || reading.Value != 20 || reading.Shards != 4 || reading.Consistency != "strong" || reading.AsOf == "" {
		t.Fatalf("get --json gave %+v", reading)
	}
	var wr map[string]any
	mustJSON(t, Run(t, dir, env, "decr", "likes", "--json").MustOK(t), &wr)
	if fmt.Sprint(wr) != "map[applied:true counter:likes]" {
		t.Fatalf("decr --json gave %v", wr)
	}

	if got := Run(t, dir, env, "reshard", "likes", "--shards", "32").MustOK(t); got != "likes now has 32 shards\n" {
		t.Fatalf("reshard printed %q", got)
	}
	if got := Run(t, dir, env, "get", "likes").MustOK(t); got != "19\n" {
		t.Fatalf("get after reshard printed %q, want 19", got)
	}

	Run(t, dir, env, "create", "a/b c", "--json").MustOK(t)
	Run(t, dir, env, "create", "views").MustOK(t)
	list := Run(t, dir, env, "list").MustOK(t)
	if lines := strings.Split(strings.TrimSpace(list), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") ||
		!strings.HasPrefix(lines[1], "a/b c ") || !strings.HasPrefix(lines[2], "likes ") || !strings.HasPrefix(lines[3], "views ") {
		t.Fatalf("list printed %q", list)
	}
	var page struct {
		Counters []struct {
			ID        string `json:"id"`
			Shards    int    `json:"shards"`
			Kind      string `json:"kind"`
			CreatedAt string `json:"created_at"`
		} `json:"counters"`
	}
	mustJSON(t, Run(t, dir, env, "list", "--prefix", "li", "--json").MustOK(t), &page)
	if len(page.Counters) != 1 || page.Counters[0].ID != "likes" || page.Counters[0].Shards != 32 || page.Counters[0].Kind != "sum" {
		t.Fatalf("list --prefix li --json gave %+v", page)
	}
	mustJSON(t, Run(t, dir, env, "list", "--limit", "2", "--json").MustOK(t), &page)
	if len(page.Counters) != 2 {
		t.Fatalf("list --limit 2 gave %d counters", len(page.Counters))
	}

	if got := Run(t, dir, env, "delete", "likes").MustOK(t); got != "deleted likes\n" {
		t.Fatalf("delete printed %q", got)
	}
	msg := Run(t, dir, env, "get", "likes").MustFail(t, 1)
	if !strings.Contains(msg, "not_found") {
		t.Fatalf("get after delete: %q", msg)
	}
	// A create retried with the same options succeeds; other options conflict.
	if got := Run(t, dir, env, "create", "views").MustOK(t); got != "views already exists with 16 shards\n" {
		t.Fatalf("create of an existing counter printed %q", got)
	}
	if msg := Run(t, dir, env, "create", "views", "--shards", "3").MustFail(t, 1); !strings.Contains(msg, "already_exists") {
		t.Fatalf("create with other options: %q", msg)
	}

	// --server wins over SHARDCOUNTER_SERVER.
	Run(t, dir, []string{"SHARDCOUNTER_SERVER=http://127.0.0.1:1"}, "get", "views", "--server", s.URL).MustOK(t)
}

func mustJSON(tb testing.TB, s string, v any) {
	tb.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		tb.Fatalf("output %q: %v", s, err)
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{},
		{"bogus"},
		{"incr"},
		{"incr", "a", "b"},
		{"incr", "a", "--by", "0"},
		{"decr", "a", "--by", "-2"},
		{"incr", "a", "--by", "x"},
		{"incr", "a", "--bogus"},
		{"incr", "a\x01"},
		{"incr", strings.Repeat("x", 257)},
		{"incr", "a", "--request-id", "r\n"},
		{"create", "a", "--shards", "2000"},
		{"reshard", "a"},
		{"reshard", "a", "--shards", "0"},
		{"reshard", "a", "--shards", "1025"},
		{"get"},
		{"delete"},
		{"list", "extra"},
		{"list", "--limit", "-1"},
		{"get", "a", "--server", "not a url"},
		{"version", "x"},
		{"serve", "--durability", "fast"},
		{"serve", "--durability", ""},
		{"serve", "--flush-interval", "0s"},
		{"serve", "--flush-interval", "soon"},
		{"serve", "--dedupe-window", "-1h"},
		{"serve", "--default-shards", "0"},
		{"serve", "--max-body", "0"},
		{"serve", "--auto-create", "maybe"},
		{"serve", "extra"},
		{"serve", "--body-timeout", "0s"},
		{"serve", "--max-staleness", "0s"},
		{"serve", "--max-staleness", "later"},
		{"serve", "--cache-size", "0"},
		{"serve", "--max-reads-in-flight", "0"},
		{"serve", "--max-body-total", "10"},
		{"serve", "--resp-read-timeout", "0s"},
		{"serve", "--resp-max-clients", "0"},
		{"serve", "--resp-max-input-memory", "5"},
		{"create", "a", "--kind", "set"},
		{"create", "a", "--min", "1"},
		{"create", "a", "--max", "-1"},
		{"create", "a", "--min", "x"},
		{"create", "a", "--max", "9223372036854775808"},
		{"create", "a", "--window", "1h"},
		{"create", "a", "--window", "90s:1h"},
		{"create", "a", "--window", "1h:90m"},
		{"create", "a", "--window", "1m:365d"},
		{"create", "a", "--kind", "distinct", "--min", "0"},
		{"create", "a", "--kind", "distinct", "--window", "1h:1d"},
		{"get", "a", "--last", "0s"},
		{"get", "a", "--last", "yesterday"},
		{"get", "a", "--last", "24h", "--cached"},
		{"get", "a", "b\x01"},
		{"series"},
		{"series", "a", "b"},
		{"series", "a", "--bucket", "-1h"},
		{"series", "a", "--last", "1x"},
		{"shards"},
		{"shards", "a", "--cached"},
		{"add", "a"},
		{"add", "a", "m", "extra"},
		{"add", "a", ""},
		{"remove", "a", "m\n"},
		{"members"},
		{"members", "a", "--limit", "-1"},
		{"members", "a", "--limit", "many"},
	} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			Run(t, dir, nil, args...).MustFail(t, 2)
		})
	}
}

func TestHelp(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"serve", "create", "incr", "decr", "get", "series", "shards", "add", "remove", "members", "reshard", "delete", "list", "version"} {
		for _, flag := range []string{"--help", "-h"} {
			out := Run(t, dir, nil, sub, flag).MustOK(t)
			if !strings.HasPrefix(out, "usage: shardcounter "+sub) {
				t.Fatalf("%s %s printed %q", sub, flag, out)
			}
		}
	}
	out := Run(t, dir, nil, "--help").MustOK(t)
	for _, sub := range []string{"serve", "incr", "list", "version"} {
		if !strings.Contains(out, sub) {
			t.Fatalf("--help does not list %s: %q", sub, out)
		}
	}
	if out := Run(t, dir, nil, "serve", "--help").MustOK(t); !strings.Contains(out, "--auto-create") || !strings.Contains(out, "SHARDCOUNTER_STORE") {
		t.Fatalf("serve --help lacks flags: %q", out)
	}
}

func TestVersion(t *testing.T) {
	if got := Run(t, t.TempDir(), nil, "version").MustOK(t); !strings.HasPrefix(got, "shardcounter ") || !strings.HasSuffix(got, "\n") {
		t.Fatalf("version printed %q", got)
	}
}

func TestRuntimeErrors(t *testing.T) {
	dir := t.TempDir()
	t.Run("Unreachable", func(t *testing.T) {
		msg := Run(t, dir, nil, "get", "a", "--server", "http://127.0.0.1:1").MustFail(t, 1)
		if !strings.Contains(msg, "cannot be reached") {
			t.Fatalf("stderr %q", msg)
		}
	})
	t.Run("UnknownStore", func(t *testing.T) {
		Run(t, dir, nil, "serve", "--listen", "127.0.0.1:0", "--store", "nosuch://x").MustFail(t, 1)
	})
	t.Run("PortInUse", func(t *testing.T) {
		s := StartServer(t, t.TempDir())
		addr := strings.TrimPrefix(s.URL, "http://")
		Run(t, dir, nil, "serve", "--listen", addr, "--store", "bolt:"+filepath.Join(t.TempDir(), "db")).MustFail(t, 1)
	})
	t.Run("MissingTokenFile", func(t *testing.T) {
		Run(t, dir, nil, "get", "a", "--token-file", filepath.Join(dir, "nope")).MustFail(t, 1)
	})
}

func TestDefaultStore(t *testing.T) {
	dir := t.TempDir()
	s := StartServerEnv(t, dir, []string{"SHARDCOUNTER_LISTEN=127.0.0.1:0"})
	Run(t, dir, s.Env(), "incr", "c", "--by", "3").MustOK(t)
	if code := s.Stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.Logs())
	}
	if fi, err := os.Stat(filepath.Join(dir, "shardcounter-data", "pebble")); err != nil || !fi.IsDir() {
		t.Fatalf("default store not created as a directory: %v", err)
	}
	if !strings.Contains(s.Logs(), "store=pebble:./shardcounter-data/pebble") || strings.Contains(s.Logs(), "level=WARN") {
		t.Fatalf("start line does not name the store, or warns: %s", s.Logs())
	}
}

// TestDefaultStoreLegacy checks the upgrade from a version whose default
// was a bolt file: while that file exists and no Pebble store does, serve
// without --store keeps serving it and says how to move it; once a Pebble
// store exists, that is the default; a store given is always used.
func TestDefaultStoreLegacy(t *testing.T) {
	dir := t.TempDir()
	legacy := filepath.Join(dir, "shardcounter-data", "shardcounter.db")
	s := StartServer(t, dir, "--store", "bolt:"+legacy)
	Run(t, dir, s.Env(), "incr", "old", "--by", "41").MustOK(t)
	if code := s.Stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.Logs())
	}

	s = StartServerEnv(t, dir, nil, "--listen", "127.0.0.1:0")
	if got := Run(t, dir, s.Env(), "get", "old").MustOK(t); got != "41\n" {
		t.Fatalf("get old on the legacy default = %q, want 41", got)
	}
	logs := s.Logs()
	if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "store=bolt:./shardcounter-data/shardcounter.db") ||
		!strings.Contains(logs, "shardcounter export --store bolt:./shardcounter-data/shardcounter.db | shardcounter import --store pebble:./shardcounter-data/pebble") {
		t.Fatalf("serve on the legacy file does not warn with the command that moves it:\n%s", logs)
	}
	if _, err := os.Stat(filepath.Join(dir, "shardcounter-data", "pebble")); !os.IsNotExist(err) {
		t.Fatalf("serve on the legacy file made a Pebble store beside it: %v", err)
	}
	s.Stop(t, syscall.SIGTERM)

	// Given explicitly, the default DSN is used even beside the bolt file;
	// from then on the Pebble directory exists and is the default.
	s = StartServerEnv(t, dir, nil, "--listen", "127.0.0.1:0", "--store", "pebble:./shardcounter-data/pebble")
	Run(t, dir, s.Env(), "get", "old").MustFail(t, 1)
	s.Stop(t, syscall.SIGTERM)
	s = StartServerEnv(t, dir, nil, "--listen", "127.0.0.1:0")
	if logs := s.Logs(); !strings.Contains(logs, "store=pebble:./shardcounter-data/pebble") || strings.Contains(logs, "level=WARN") {
		t.Fatalf("with both stores present, serve does not default to Pebble quietly:\n%s", logs)
	}
	Run(t, dir, s.Env(), "get", "old").MustFail(t, 1)
}

// TestListenEnv checks that --listen wins over SHARDCOUNTER_LISTEN.
func TestListenEnv(t *testing.T) {
	dir := t.TempDir()
	s := StartServerEnv(t, dir, []string{"SHARDCOUNTER_LISTEN=127.0.0.1:1", "SHARDCOUNTER_STORE=bolt:" + filepath.Join(dir, "env.db")},
		"--listen", "127.0.0.1:0")
	Run(t, dir, s.Env(), "incr", "a").MustOK(t)
	if _, err := os.Stat(filepath.Join(dir, "env.db")); err != nil {
		t.Fatalf("SHARDCOUNTER_STORE not used: %v", err)
	}
}

// TestSignal checks that SIGTERM and SIGINT stop the server with exit 0
// and keep every acknowledged write.
func TestSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := StartServer(t, dir)
			Run(t, dir, s.Env(), "incr", "c", "--by", "41").MustOK(t)
			Run(t, dir, s.Env(), "incr", "c").MustOK(t)
			if code := s.Stop(t, sig); code != 0 {
				t.Fatalf("exit %d after %v, want 0:\n%s", code, sig, s.Logs())
			}
			s = StartServer(t, dir)
			if got := Run(t, dir, s.Env(), "get", "c").MustOK(t); got != "42\n" {
				t.Fatalf("after restart get printed %q, want 42", got)
			}
		})
	}
}

// TestAsync runs the server in async mode: writes are answered once
// queued, and SIGTERM commits what is queued before the process exits.
func TestAsync(t *testing.T) {
	dir := t.TempDir()
	s := StartServer(t, dir, "--durability", "async", "--flush-interval", "20ms")
	if !strings.Contains(s.Logs(), "durability=async") {
		t.Fatalf("start line does not name the mode:\n%s", s.Logs())
	}
	for range 10 {
		Run(t, dir, s.Env(), "incr", "c", "--by", "2").MustOK(t)
	}
	var res struct {
		Counter   string `json:"counter"`
		Applied   bool   `json:"applied"`
		Duplicate bool   `json:"duplicate"`
	}
	mustJSON(t, Run(t, dir, s.Env(), "incr", "c", "--request-id", "r", "--json").MustOK(t), &res)
	if !res.Applied || res.Duplicate {
		t.Fatalf("async write with a request id = %+v, want applied (accepted)", res)
	}
	if code := s.Stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, s.Logs())
	}
	s = StartServer(t, dir)
	if got := Run(t, dir, s.Env(), "get", "c").MustOK(t); got != "21\n" {
		t.Fatalf("after restart get printed %q, want 21", got)
	}
}

// TestCrash kills the server with SIGKILL right after a write was
// acknowledged: with the durable default, the write must survive.
func TestCrash(t *testing.T) {
	dir := t.TempDir()
	s := StartServer(t, dir)
	for range 5 {
		Run(t, dir, s.Env(), "incr", "views", "--by", "3").MustOK(t)
	}
	Run(t, dir, s.Env(), "decr", "views").MustOK(t)
	if code := s.Stop(t, syscall.SIGKILL); code == 0 {
		t.Fatalf("exit %d after SIGKILL", code)
	}
	s = StartServer(t, dir)
	if got := Run(t, dir, s.Env(), "get", "views").MustOK(t); got != "14\n" {
		t.Fatalf("after crash and restart get printed %q, want 14", got)
	}
}

func TestAuth(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("first-token\n\nsecond-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := StartServer(t, dir, "--auth-token-file", tokens)
	msg := Run(t, dir, s.Env(), "incr", "a").MustFail(t, 1)
	if !strings.Contains(msg, "unauthenticated") {
		t.Fatalf("stderr %q", msg)
	}
	mine := filepath.Join(dir, "mine")
	os.WriteFile(mine, []byte("second-token\n"), 0o600)
	Run(t, dir, s.Env(), "incr", "a", "--token-file", mine).MustOK(t)
	if got := Run(t, dir, s.Env(), "get", "a", "--token-file", mine).MustOK(t); got != "1\n" {
		t.Fatalf("get printed %q", got)
	}
	os.WriteFile(mine, []byte("wrong\n"), 0o600)
	Run(t, dir, s.Env(), "get", "a", "--token-file", mine).MustFail(t, 1)

	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	Run(t, dir, nil, "serve", "--listen", "127.0.0.1:0", "--store", "bolt:"+filepath.Join(dir, "x.db"), "--auth-token-file", empty).MustFail(t, 1)
}

func TestNoAutoCreate(t *testing.T) {
	dir := t.TempDir()
	s := StartServer(t, dir, "--auto-create=false", "--default-shards", "3")
	msg := Run(t, dir, s.Env(), "incr", "ghost").MustFail(t, 1)
	if !strings.Contains(msg, "not_found") {
		t.Fatalf("stderr %q", msg)
	}
	if got := Run(t, dir, s.Env(), "create", "ghost").MustOK(t); got != "created ghost with 3 shards\n" {
		t.Fatalf("create printed %q, want the --default-shards count", got)
	}
	Run(t, dir, s.Env(), "incr", "ghost").MustOK(t)
}

// TestShutdownUnderLoad sends SIGTERM while clients are writing: the
// server must exit 0, and after a restart every acknowledged write must
// be in the value, and no write that was never sent.
func TestShutdownUnderLoad(t *testing.T) {
	dir := t.TempDir()
	s := StartServer(t, dir)
	client := shttp.NewClient(s.URL)
	ctx := context.Background()
	var acked, sent atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				sent.Add(1)
				if _, err := client.WriteCounter(ctx, shardcounter.Write{Counter: "load", Delta: 1}); err != nil {
					return // the server is going away
				}
				acked.Add(1)
			}
		}()
	}
	for acked.Load() < 200 {
		time.Sleep(10 * time.Millisecond)
	}
	if code := s.Stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d after SIGTERM under load:\n%s", code, s.Logs())
	}
	wg.Wait()

	s = StartServer(t, dir)
	r, err := shttp.NewClient(s.URL).ReadCounter(ctx, "load", shardcounter.Strong)
	if err != nil {
		t.Fatal(err)
	}
	if r.Value < acked.Load() || r.Value > sent.Load() {
		t.Fatalf("value %d after restart, want between %d acknowledged and %d sent", r.Value, acked.Load(), sent.Load())
	}
}

func TestBench(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "report.json")
	out := Run(t, dir, nil, "bench", "--shards", "1,4", "--clients", "8", "--duration", "200ms", "--path", "naive", "--path", "engine", "--json", report).MustOK(t)
	for _, name := range []string{"pebble/naive/shards=1", "pebble/naive/shards=4", "pebble/engine/shards=1", "pebble/engine/shards=4"} {
		if !strings.Contains(out, name) {
			t.Errorf("table lacks run %s:\n%s", name, out)
		}
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Machine map[string]any   `json:"machine"`
		Runs    []map[string]any `json:"runs"`
	}
	mustJSON(t, string(data), &rep)
	if cpus, _ := rep.Machine["cpus"].(float64); cpus < 1 || rep.Machine["go"] == "" || len(rep.Runs) != 4 {
		t.Fatalf("report = %s", data)
	}
	for _, r := range rep.Runs {
		for _, field := range []string{"name", "store", "path", "shards", "clients", "duration_s", "ops", "ops_per_sec", "p50_ms", "p99_ms", "errors", "verified"} {
			if _, ok := r[field]; !ok {
				t.Errorf("run %v lacks the SPEC's field %q", r["name"], field)
			}
		}
		if r["verified"] != true || r["errors"] != float64(0) {
			t.Errorf("run %v: verified %v, errors %v", r["name"], r["verified"], r["errors"])
		}
	}
	for _, args := range [][]string{
		{"--shards", "1,x"},
		{"--path", "warp"},
		{"--store", "mysql://x"},
		{"--peer", "memcached"},
		{"--peer", "redis-incr"}, // no Redis server: not --store, no --peer-redis
		{"--peer", "postgres-update", "--store", "bolt:x.db"},
		{"--peer", "redis-incr", "--peer-redis", "postgres://x"},
		{"--zipf", "0.9", "--counters", "10"},
		{"--read-ratio", "1.5"},
		{"--read-consistency", "eventual"},
		{"--token-file", "t"},
		{"--server", "http://127.0.0.1:1", "--path", "naive"},
		{"--clients", "0"},
		{"--max-in-flight", "1,0"},
		{"--max-reads-in-flight", "-1"},
	} {
		Run(t, dir, nil, append([]string{"bench"}, args...)...).MustFail(t, 2)
	}

	out = Run(t, dir, nil, "bench", "--shards", "1", "--clients", "4", "--duration", "100ms", "--path", "engine", "--max-in-flight", "1,2", "--max-reads-in-flight", "1").MustOK(t)
	for _, name := range []string{"pebble/engine/shards=1/in-flight=1", "pebble/engine/shards=1/in-flight=2"} {
		if !strings.Contains(out, name) {
			t.Errorf("table lacks run %s:\n%s", name, out)
		}
	}
}

// TestBenchPeersSVG runs the http path and the http-bare peer, which need
// no server, with --svg: the table has the ratios and the chart is SVG.
func TestBenchPeersSVG(t *testing.T) {
	dir := t.TempDir()
	report, chart := filepath.Join(dir, "report.json"), filepath.Join(dir, "chart.svg")
	out := Run(t, dir, nil, "bench", "--path", "http", "--peer", "http-bare", "--shards", "2", "--clients", "4",
		"--duration", "200ms", "--counters", "20", "--zipf", "1.5", "--read-ratio", "0.5", "--read-consistency", "cached",
		"--json", report, "--svg", chart).MustOK(t)
	for _, want := range []string{"pebble/http/shards=2", "peer/http-bare", "vs http-bare", "20 counters (Zipf s=1.5), 50% cached reads"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var rep struct {
		Runs []struct {
			Name, Path, Peer string
			Reads, Writes    int64
			Verified         bool
		} `json:"runs"`
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil { // a subset of the fields
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || rep.Runs[1].Path != "peer" || rep.Runs[1].Peer != "http-bare" {
		t.Fatalf("report = %s, want the http run and the http-bare peer", data)
	}
	for _, r := range rep.Runs {
		if !r.Verified || r.Reads == 0 || r.Writes == 0 {
			t.Errorf("run %s: verified %v, %d reads, %d writes", r.Name, r.Verified, r.Reads, r.Writes)
		}
	}
	svg, err := os.ReadFile(chart)
	if err != nil {
		t.Fatal(err)
	}
	var root struct {
		XMLName xml.Name
	}
	if err := xml.Unmarshal(svg, &root); err != nil || root.XMLName.Local != "svg" {
		t.Fatalf("--svg wrote %d bytes that are not an SVG document (%v, root %q)", len(svg), err, root.XMLName.Local)
	}
	// Not a terminal: no progress line, no control characters.
	if r := Run(t, dir, nil, "bench", "--peer", "http-bare", "--duration", "100ms", "--clients", "2"); r.Code != 0 || strings.Contains(r.Stderr, "\r") {
		t.Errorf("bench with stderr not a terminal: exit %d, stderr %q", r.Code, r.Stderr)
	}
}
