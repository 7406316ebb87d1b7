package deploy_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/internal/testbin"
)

// root is the module's root, from this package's directory.
const root = ".."

// token is the token the servers here are started with.
const token = "deploy-test-token"

// server is a running `shardcounter serve` on a bolt file, with a token
// file and the RESP port, on free loopback ports.
type server struct {
	url, resp string
}

// buildDir holds the binary the tests of this package share.
var buildDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shardcounter-deploy")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binary    string
)

// built returns the shardcounter binary of this tree, built on first use.
func built(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() { binary = testbin.Build(t, root, buildDir) })
	if binary == "" {
		t.Fatal("the binary could not be built")
	}
	return binary
}

// start builds and starts the server; it is killed when the test ends.
func start(t *testing.T, args ...string) *server {
	t.Helper()
	dir := t.TempDir()
	bin := built(t)
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts, err := testbin.Start(bin, dir, time.Minute, append([]string{"--listen", "127.0.0.1:0", "--resp-listen", "127.0.0.1:0",
		"--auth-token-file", tokens, "--store", "bolt:" + filepath.Join(dir, "data.db")}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Kill)
	return &server{url: ts.URL, resp: ts.RESP}
}

// do makes one request and returns its status and body.
func (s *server) do(t *testing.T, tok, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricNameRE finds the names of the server's metrics in a PromQL
// expression: every one starts with shardcounter_, go_ or process_.
var metricNameRE = regexp.MustCompile(`\b(?:shardcounter|go|process)_[a-zA-Z0-9_]+`)

// dashboard is what the test reads of deploy/grafana/shardcounter.json.
type dashboard struct {
	Panels []struct {
		Title   string
		Targets []struct{ Expr string }
	}
	Templating struct {
		List []struct{ Definition string }
	}
}

// expressions returns every PromQL expression of the dashboard and the
// alert rules, each with where it comes from.
func expressions(t *testing.T) (map[string]string, dashboard) {
	t.Helper()
	exprs := map[string]string{}
	b, err := os.ReadFile("grafana/shardcounter.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs[tg.Expr] = "panel " + p.Title
		}
	}
	for _, v := range d.Templating.List {
		exprs[v.Definition] = "variable"
	}
	rules, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	// The rules' expressions, read without a YAML library: each is the
	// value of an expr key, on its line or in the block below it.
	lines := strings.Split(string(rules), "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		e, ok := strings.CutPrefix(l, "expr:")
		if !ok {
			continue
		}
		e = strings.TrimSpace(e)
		if e == "|" {
			indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
			e = ""
			for i+1 < len(lines) && len(lines[i+1])-len(strings.TrimLeft(lines[i+1], " ")) > indent {
				i++
				e += lines[i] + "\n"
			}
		}
		exprs[e] = "alert rule"
	}
	if len(exprs) < 20 {
		t.Fatalf("read only %d expressions", len(exprs))
	}
	return exprs, d
}

// TestDashboardMetricsServed runs a load against the built server (HTTP
// writes of every outcome, cached reads, a failed authentication, RESP
// commands), then checks that every metric the dashboard and the alert
// rules name is among the samples /metrics serves, and that the panels
// the operator's questions need are on the dashboard.
func TestDashboardMetricsServed(t *testing.T) {
	exprs, d := expressions(t)
	var titles []string
	for _, p := range d.Panels {
		titles = append(titles, p.Title)
	}
	for _, want := range []string{"Commits a second", "Commit time", "Batch size", "Writes by outcome code",
		"Store errors and unknown outcomes", "Cached-read hits and misses", "Pacing", "RESP clients",
		"Body budget in use", "Auth throttling"} {
		if !slices.ContainsFunc(titles, func(t string) bool { return strings.HasPrefix(t, want) }) {
			t.Errorf("no panel %q on the dashboard; its panels: %q", want, titles)
		}
	}

	s := start(t)
	load(t, s)
	status, body := s.do(t, "", "GET", "/metrics", "")
	if status != 200 {
		t.Fatalf("GET /metrics: %d", status)
	}
	served := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		name, _, _ := strings.Cut(l, " ")
		name, _, _ = strings.Cut(name, "{")
		served[name] = true
	}
	checked := 0
	for e, from := range exprs {
		for _, name := range metricNameRE.FindAllString(e, -1) {
			checked++
			if !served[name] {
				t.Errorf("%s names %s, which /metrics does not serve:\n%s", from, name, e)
			}
		}
	}
	t.Logf("%d metric names in %d expressions, all served", checked, len(exprs))
	// The load's own marks, in the metrics this issue added.
	for _, want := range []string{`shardcounter_write_errors_total{code="out_of_range"} 1`,
		`shardcounter_cached_reads_total{result="miss"} 1`, `shardcounter_cached_reads_total{result="hit"} 2`,
		"shardcounter_resp_connected_clients 1", `shardcounter_auth_failures_total{protocol="http"} 1`} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics does not hold %s", want)
		}
	}
}

// load makes the server count something of every kind the dashboard
// shows: writes applied, duplicate and failed (out_of_range), batches,
// cached reads that hit and miss, a failed authentication, and RESP
// commands from a connection that stays open.
func load(t *testing.T, s *server) {
	t.Helper()
	must := func(want int, method, path, body string) {
		t.Helper()
		if got, b := s.do(t, token, method, path, body); got != want {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, got, want, b)
		}
	}
	must(201, "PUT", "/v1/counters/stock", `{"min":0}`)
	for i := range 20 {
		must(200, "POST", "/v1/counters/likes/increment", fmt.Sprintf(`{"by":1,"request_id":"r%d"}`, i%10))
	}
	must(400, "POST", "/v1/counters/stock/decrement", `{"by":1}`)
	must(200, "POST", "/v1/writes", `{"writes":[{"counter":"a","delta":1},{"counter":"b","delta":2}]}`)
	for range 3 {
		must(200, "GET", "/v1/counters/likes?consistency=cached", "")
	}
	if got, _ := s.do(t, "wrong-token", "GET", "/v1/counters/likes", ""); got != 401 {
		t.Fatalf("a wrong token: %d, want 401", got)
	}
	nc, err := net.Dial("tcp", s.resp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	fmt.Fprintf(nc, "AUTH %s\r\nINCR likes\r\n", token)
	br := bufio.NewReader(nc)
	for _, want := range []string{"+OK", ":"} {
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, want) {
			t.Fatalf("RESP: %q, %v; want %s...", line, err, want)
		}
	}
}

// TestAlertRules checks the alert rules with promtool (Debian's
// prometheus package; scripts/ensure-promtool.sh installs it). A missing
// promtool fails the test: the rules would go unchecked.
func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if errors.Is(err, exec.ErrNotFound) {
		t.Fatal("promtool is not on PATH: run scripts/ensure-promtool.sh")
	}
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", "prometheus/alerts.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
