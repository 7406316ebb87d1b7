package readme_test

// TestReadme runs README.md's ```sh blocks in order, as written, in a
// fresh directory with the binary built from this tree at ./shardcounter,
// as the README's "Try it" has it. A command's comment says what it
// prints, and the test compares, by the rule the README states:
//
//   - the comment follows the command on its line, or stands alone on the
//     line below it;
//   - it is matched against the command's output line by line, " / "
//     separating lines; spaces count as one and blank lines not at all;
//     "..." stands for any text within a line, and a line of "..." alone
//     for any number of lines;
//   - "exit N: TEXT" means the command fails with status N and prints TEXT
//     on stderr; any other command must succeed;
//   - a comment wholly in parentheses is a remark, and is not compared.
//
// Every command runs in its own sh, after the variables the blocks set
// before it (S=..., J=...), as in one terminal. What the test changes, and
// only that: the README's ports (8080 for HTTP, 6380 for RESP) become free
// ones, so that it runs beside other servers; SHARDCOUNTER_* variables
// from the environment are dropped; and FAKETTY=1 makes redis-cli print
// replies as it does on a terminal. The server listens on an address of
// its own, and the README's HTTP address is a proxy to it that checks every
// request and reply against the API's OpenAPI document
// (internal/openapitest): a reply the document does not allow fails the
// test as a wrong output does. The commands that cannot run in a
// test as they stand (a server in the foreground, the whole test suite,
// commands that run until interrupted) are each handled as the table
// handled says, and the test fails when one of them is no longer in the
// README, so that the table cannot go stale.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/internal/openapitest"
	"github.com/shardcounter/shardcounter/internal/testbin"
)

// commandTimeout bounds one command (redis-benchmark takes the longest).
const commandTimeout = 2 * time.Minute

// handled are the README's commands that a test cannot run as they stand,
// and what the test does instead.
var handled = []struct {
	re  *regexp.Regexp
	how string
	run func(*runner, step)
}{
	{regexp.MustCompile(`^go run \./cmd/shardcounter serve$`),
		"serves in the foreground, built from source: the test starts the binary it built from this tree, ./shardcounter serve, in the background",
		func(r *runner, s step) { r.serve(s, "./shardcounter serve") }},
	{regexp.MustCompile(`^\./scripts/test\.sh$`),
		"runs the whole test suite, this test included: not run again from inside it",
		nil},
	{regexp.MustCompile(`^\./shardcounter serve\b.*&$`),
		"serves in the background: the test starts it so, once it has stopped the server before it (one process per bolt file), and stops it at the end",
		func(r *runner, s step) { r.serve(s, strings.TrimSpace(strings.TrimSuffix(s.cmd, "&"))) }},
	{regexp.MustCompile(`^(\./shardcounter watch|curl -N) `),
		"prints until interrupted: the test interrupts it (SIGINT) once it has printed what its comment shows",
		(*runner).interrupted},
}

func TestReadme(t *testing.T) {
	for _, tool := range []string{"sh", "go", "curl", "redis-cli", "redis-benchmark"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH: the README uses it (scripts/test.sh installs what is missing)", tool)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := parseSteps(string(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) < 20 {
		t.Fatalf("README.md has %d commands in sh blocks: the parser lost some", len(steps))
	}
	dir := t.TempDir()
	testbin.Build(t, root, dir)
	r := newRunner(t, dir)
	used := make([]bool, len(handled))
	for _, s := range steps {
		r.step(s, used)
	}
	r.stopServer()
	for i, h := range handled {
		if !used[i] {
			t.Errorf("no README command matches %s any more: update the table handled", h.re)
		}
	}
}

// step is one command of a README block.
type step struct {
	line    int    // its first line in README.md
	cmd     string // as written, continuation lines joined
	comment string // what follows its "#"; "" when it has none
}

func (s step) String() string { return fmt.Sprintf("README.md:%d: %s", s.line, s.cmd) }

// parseSteps returns the commands of the README's ```sh blocks, in order.
// A fence of another shell language is an error: it would not be run.
func parseSteps(text string) ([]step, error) {
	var steps []step
	in := false
	open := -1 // the step just before, when it has no comment yet
	var pending string
	pendingLine := 0
	for i, raw := range strings.Split(text, "\n") {
		n := i + 1
		fence := strings.TrimSpace(raw)
		if !in {
			switch fence {
			case "```sh":
				in, open = true, -1
			case "```bash", "```shell", "```console", "```shell-session":
				return nil, fmt.Errorf("README.md:%d: a %s block is not run by this test: write ```sh", n, fence)
			}
			continue
		}
		if fence == "```" {
			if pending != "" {
				return nil, fmt.Errorf("README.md:%d: the block ends in a continued line", pendingLine)
			}
			in = false
			continue
		}
		code, comment := splitComment(raw)
		code = strings.TrimSpace(code)
		if pending != "" {
			code = pending + " " + code
		} else {
			pendingLine = n
		}
		if strings.HasSuffix(code, `\`) {
			if comment != "" {
				return nil, fmt.Errorf("README.md:%d: a comment before a continued line", n)
			}
			pending = strings.TrimSpace(strings.TrimSuffix(code, `\`))
			continue
		}
		pending = ""
		switch {
		case code == "" && comment == "":
			open = -1
		case code == "":
			if open >= 0 {
				steps[open].comment = comment
			}
			open = -1
		default:
			steps = append(steps, step{line: pendingLine, cmd: code, comment: comment})
			open = -1
			if comment == "" {
				open = len(steps) - 1
			}
		}
	}
	if in {
		return nil, fmt.Errorf("README.md: a ```sh block is not closed")
	}
	return steps, nil
}

// splitComment splits a line at its first "#" that starts a shell comment:
// outside quotes, at the start or after a space.
func splitComment(line string) (code, comment string) {
	var quote rune
	for i, c := range line {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i], strings.TrimSpace(line[i+1:])
		}
	}
	return line, ""
}

// expect is what a comment says of its command.
type expect struct {
	remark bool     // in parentheses: nothing to compare
	code   int      // the exit status
	stderr bool     // lines are compared with stderr, not stdout
	lines  []string // nil: the output is not compared
}

var exitRE = regexp.MustCompile(`^exit (\d+): (.*)$`)

func parseExpect(comment string) expect {
	switch {
	case comment == "":
		return expect{}
	case strings.HasPrefix(comment, "(") && strings.HasSuffix(comment, ")"):
		return expect{remark: true}
	}
	if m := exitRE.FindStringSubmatch(comment); m != nil {
		code, _ := strconv.Atoi(m[1])
		return expect{code: code, stderr: true, lines: strings.Split(m[2], " / ")}
	}
	return expect{lines: strings.Split(comment, " / ")}
}

// match reports whether out matches the expected lines.
func match(want []string, out string) bool {
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if l = normalize(l); l != "" {
			got = append(got, l)
		}
	}
	return matchLines(want, got)
}

func matchLines(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if normalize(want[0]) == "..." {
		for i := range len(got) + 1 {
			if matchLines(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	parts := strings.Split(normalize(want[0]), "...")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	line := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
	return len(got) > 0 && line.MatchString(got[0]) && matchLines(want[1:], got[1:])
}

func normalize(s string) string { return strings.Join(strings.Fields(s), " ") }

// runner runs the steps in one directory, against at most one server at a
// time.
type runner struct {
	t          *testing.T
	dir        string
	env        []string
	httpAddr   string // the checking proxy, where the README's commands go
	serverAddr string // the server, behind it
	respAddr   string
	ports      *strings.Replacer
	vars       []string // the assignments run so far
	server     *exec.Cmd
	serverDone chan struct{}
	serverLog  *testbin.Output
}

func newRunner(t *testing.T, dir string) *runner {
	r := &runner{t: t, dir: dir, serverAddr: freeAddr(t), respAddr: freeAddr(t)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.httpAddr = ln.Addr().String()
	proxy := &http.Server{Handler: openapitest.MustNew(t).Proxy(t, &url.URL{Scheme: "http", Host: r.serverAddr})}
	go proxy.Serve(ln)
	t.Cleanup(func() { proxy.Close() })
	_, respPort, _ := net.SplitHostPort(r.respAddr)
	r.ports = strings.NewReplacer("127.0.0.1:8080", r.httpAddr, "127.0.0.1:6380", r.respAddr, "-p 6380", "-p "+respPort)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHARDCOUNTER_") {
			r.env = append(r.env, kv)
		}
	}
	r.env = append(r.env, "SHARDCOUNTER_LISTEN="+r.httpAddr, "SHARDCOUNTER_SERVER=http://"+r.httpAddr, "FAKETTY=1")
	t.Cleanup(r.killServer)
	return r
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// assignment is a line that only sets a variable, which later commands
// see as they would in one terminal.
var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=('[^']*'|"[^"]*"|[^\s'"]*)$`)

// step runs one step, or hands it to its entry in handled.
func (r *runner) step(s step, used []bool) {
	s.cmd = r.ports.Replace(s.cmd)
	if strings.Contains(s.cmd, "8080") || strings.Contains(s.cmd, "6380") {
		r.t.Fatalf("%s: a port the test does not move: write 127.0.0.1:8080, 127.0.0.1:6380 or -p 6380", s)
	}
	for i, h := range handled {
		if h.re.MatchString(s.cmd) {
			used[i] = true
			r.t.Logf("%s: %s", s, h.how)
			if h.run != nil {
				h.run(r, s)
			}
			return
		}
	}
	want := parseExpect(s.comment)
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := r.command(ctx, s.cmd)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if ctx.Err() != nil {
		r.t.Fatalf("%s: still running after %v: if it runs until interrupted, add it to handled", s, commandTimeout)
	} else if code < 0 {
		r.t.Fatalf("%s: %v", s, err)
	}
	out := stdout.String()
	if want.stderr {
		out = stderr.String()
	}
	var why string
	switch {
	case code != want.code:
		why = fmt.Sprintf("exit %d, want %d", code, want.code)
	case want.lines != nil && !match(want.lines, out):
		why = "the output does not match # " + s.comment
	default:
		if assignment.MatchString(s.cmd) {
			r.vars = append(r.vars, s.cmd)
		}
		return
	}
	r.t.Fatalf("%s\n%s\nstdout:\n%s\nstderr:\n%s\nserver log:\n%s", s, why, stdout.String(), stderr.String(), r.log())
}

// command is the sh that runs line after the assignments so far, in its
// own process group so that it and its children can be signalled.
func (r *runner) command(ctx context.Context, line string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "sh", "-c", strings.Join(append(r.vars[:len(r.vars):len(r.vars)], line), "\n"))
	cmd.Dir = r.dir
	cmd.Env = r.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd
}

// serve starts line, a `shardcounter serve`, in the background, after
// stopping the server before it, and waits until it answers.
func (r *runner) serve(s step, line string) {
	r.stopServer()
	r.serverLog = &testbin.Output{}
	if strings.Contains(line, "--listen") {
		r.t.Fatalf("%s: --listen: the test puts the server behind its OpenAPI check with SHARDCOUNTER_LISTEN; leave --listen out", s)
	}
	cmd := r.command(context.Background(), "exec "+line)
	cmd.Env = append(cmd.Env, "SHARDCOUNTER_LISTEN="+r.serverAddr)
	cmd.Stdout, cmd.Stderr = r.serverLog, r.serverLog
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("%s: %v", s, err)
	}
	r.server, r.serverDone = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(r.serverDone) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ready(r.serverAddr) && (!strings.Contains(line, "--resp-listen") || dials(r.respAddr)) {
			return
		}
		select {
		case <-r.serverDone:
			r.t.Fatalf("%s: the server exited:\n%s", s, r.serverLog)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: the server is not ready after 30 s:\n%s", s, r.serverLog)
		}
	}
}

// ready reports whether the server at addr answers /readyz with 200.
func ready(addr string) bool {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func dials(addr string) bool {
	c, err := net.Dial("tcp", addr)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// stopServer stops the running server as a user does, with SIGTERM, and
// checks that it shut down cleanly.
func (r *runner) stopServer() {
	if r.server == nil {
		return
	}
	r.server.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.serverDone:
	case <-time.After(60 * time.Second):
		r.t.Fatalf("the server did not stop within 60 s of SIGTERM:\n%s", r.serverLog)
	}
	if code := r.server.ProcessState.ExitCode(); code != 0 {
		r.t.Fatalf("the server exited %d after SIGTERM, want 0:\n%s", code, r.serverLog)
	}
	r.server = nil
}

func (r *runner) killServer() {
	if r.server != nil {
		syscall.Kill(-r.server.Process.Pid, syscall.SIGKILL)
		<-r.serverDone
	}
}

func (r *runner) log() string {
	if r.serverLog == nil {
		return "(no server)"
	}
	return r.serverLog.String()
}

// interrupted runs a command that prints until interrupted: it waits
// until the output matches the comment (or, without one to compare, has a
// line), then sends SIGINT, as Ctrl-C does, and compares the output.
func (r *runner) interrupted(s step) {
	want := parseExpect(s.comment)
	cmd := r.command(context.Background(), "exec "+s.cmd)
	out := &testbin.Output{}
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("%s: %v", s, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	printed := func() bool {
		if want.lines != nil {
			return match(want.lines, out.String())
		}
		return strings.Contains(out.String(), "\n")
	}
	for deadline := time.Now().Add(30 * time.Second); !printed(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			r.t.Fatalf("%s\nprinted in 30 s:\n%s\nwhich does not match # %s", s, out, s.comment)
		}
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		r.t.Fatalf("%s: still running 10 s after SIGINT", s)
	}
	if !printed() {
		r.t.Fatalf("%s\nprinted:\n%s\nwhich does not match # %s", s, out, s.comment)
	}
}

// TestConvention pins the rule by which TestReadme reads comments, on
// small cases, so that a matcher grown too lenient fails here.
func TestConvention(t *testing.T) {
	for _, tc := range []struct {
		comment, out string
		ok           bool
	}{
		{"4", "4\n", true},
		{"4", "5\n", false},
		{"4", "4\n5\n", false},
		{`{"id":"likes",...}`, `{"id":"likes","value":4}` + "\n", true},
		{`{"id":"likes",...}`, `{"id":"other","value":4}` + "\n", false},
		{"ID SHARDS CREATED / likes 32 ...", "ID     SHARDS  CREATED\nlikes  32      2026-11-22T03:55:01Z\n", true},
		{"SHARD VALUE NODE / ... / 2 shards, total 4, as of ...", "SHARD VALUE NODE\n0 1 f\n1 3 f\n2 shards, total 4, as of t\n", true},
		{"... / x", "", false},
		{"... 0 / ... 3", "a 0\nb 0\nc 3\n", false}, // "..." stays within a line
		{"retry: ... / id: 7 / ...", "retry: 1\n\nid: 7\ndata: {}\n\n", true},
		{"a / b", "a\n", false},
	} {
		if got := match(parseExpect(tc.comment).lines, tc.out); got != tc.ok {
			t.Errorf("# %s against %q: match %v, want %v", tc.comment, tc.out, got, tc.ok)
		}
	}
	if e := parseExpect("exit 1: shardcounter decr: ... (out_of_range)"); e.code != 1 || !e.stderr || !match(e.lines, "shardcounter decr: no (out_of_range)\n") {
		t.Errorf("exit 1: parsed as %+v", e)
	}
	if e := parseExpect("(204, nothing printed)"); !e.remark || e.lines != nil {
		t.Errorf("a remark parsed as %+v", e)
	}
	if e := parseExpect("(integer) 1"); e.remark || len(e.lines) != 1 {
		t.Errorf("(integer) 1 parsed as %+v, want an output", e)
	}

	readme := "text # not a command\n```sh\nA=1  # (a remark)\ncurl -d 'x # y' \\\n  -H z\n     # out\necho a   # a\n\n# a remark of the block\n```\n```go\nnot run\n```\n"
	steps, err := parseSteps(readme)
	want := []step{{3, "A=1", "(a remark)"}, {4, "curl -d 'x # y' -H z", "out"}, {7, "echo a", "a"}}
	if err != nil || fmt.Sprintf("%#v", steps) != fmt.Sprintf("%#v", want) {
		t.Errorf("parseSteps = %#v, %v; want %#v", steps, err, want)
	}
	for line, isAssignment := range map[string]bool{"S=http://127.0.0.1:8080": true, `J='Content-Type: application/json'`: true, "A=1 ./shardcounter get x": false, "echo A=1": false} {
		if assignment.MatchString(line) != isAssignment {
			t.Errorf("%s: taken as an assignment %v, want %v", line, !isAssignment, isAssignment)
		}
	}
	if _, err := parseSteps("```bash\necho\n```\n"); err == nil {
		t.Error("a ```bash block was taken without an error: it would not be run")
	}
}
