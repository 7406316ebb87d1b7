package server_test

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter/resp/server"
)

// This file drives the server with Redis's own tools, redis-cli and
// redis-benchmark (Debian's redis-tools: scripts/ensure-redis-tools.sh).
// A missing tool fails the test.

// tool returns the path of a redis-tools binary, failing the test when it
// is missing.
func tool(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		tb.Fatalf("%s is not on PATH: run scripts/ensure-redis-tools.sh (installs Debian's redis-tools)", name)
	}
	return p
}

// run runs a tool and returns its standard output, failing the test when
// it fails.
func run(tb testing.TB, name string, args ...string) string {
	tb.Helper()
	cmd := exec.Command(tool(tb, name), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

func hostPort(tb testing.TB, addr string) (string, string) {
	tb.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		tb.Fatal(err)
	}
	return h, p
}

func TestRedisCLI(t *testing.T) {
	_, addr := MustServe(t, MustEngine(t), server.Options{AuthTokens: []string{"tok"}})
	h, p := hostPort(t, addr)
	cli := func(args ...string) string {
		t.Helper()
		return strings.TrimRight(run(t, "redis-cli", append([]string{"-h", h, "-p", p, "--no-auth-warning"}, args...)...), "\n")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"INCR", "likes"}, "NOAUTH Authentication required."},
		{[]string{"-a", "tok", "INCR", "likes"}, "1"},
		{[]string{"-a", "tok", "INCRBY", "likes", "41"}, "42"},
		{[]string{"-a", "tok", "GET", "likes"}, "42"},
		{[]string{"-a", "tok", "-3", "GET", "likes"}, "42"},
		{[]string{"-a", "tok", "GET", "nothing"}, ""},
		{[]string{"-a", "tok", "--user", "default", "--pass", "tok", "PING"}, "PONG"},
		{[]string{"-a", "wrong", "PING"}, "NOAUTH Authentication required."}, // "AUTH failed: WRONGPASS ..." on stderr
		{[]string{"-a", "tok", "-3", "SC.GET", "likes"}, ""},                 // checked below
		{[]string{"-a", "tok", "INCR", "x y"}, "1"},
		{[]string{"-a", "tok", "INCRBY", "likes", "x"}, "ERR value is not an integer or out of range"},
		// redis-cell's README's example: 30 a minute, a burst of 16.
		{[]string{"-a", "tok", "CL.THROTTLE", "user123", "15", "30", "60", "1"}, "0\n16\n15\n-1\n2"},
	} {
		got := cli(tc.args...)
		if tc.args[len(tc.args)-2] == "SC.GET" {
			if !strings.Contains(got, "value\n42\n") && !strings.Contains(got, "value 42") {
				t.Errorf("redis-cli %v: %q, want a map with value 42", tc.args, got)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("redis-cli %v: %q, want %q", tc.args, got, tc.want)
		}
	}
	// Interactive-style input on stdin, as a person pipes it: redis-cli
	// sends each line as a command, and in a terminal first asks COMMAND
	// DOCS, which the server answers.
	cmd := exec.Command(tool(t, "redis-cli"), "-h", h, "-p", p, "-a", "tok", "--no-auth-warning")
	cmd.Stdin = strings.NewReader("COMMAND DOCS\nINCR likes\nMGET likes nothing\n")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "43\n43\n\n") {
		t.Errorf("redis-cli with commands on stdin: %q, %v", out, err)
	}
}

func TestRedisBenchmark(t *testing.T) {
	eng := MustEngine(t)
	_, addr := MustServe(t, eng, server.Options{})
	h, p := hostPort(t, addr)
	const n = 2000
	for _, pipeline := range []string{"1", "16"} {
		for _, proto := range [][]string{nil, {"-3"}} {
			args := append([]string{"-h", h, "-p", p, "-t", "incr,get", "-n", strconv.Itoa(n), "-c", "8", "-P", pipeline, "--csv"}, proto...)
			out := run(t, "redis-benchmark", args...)
			if !strings.Contains(out, `"INCR",`) || !strings.Contains(out, `"GET",`) {
				t.Errorf("redis-benchmark %v: %q, want rows for INCR and GET", args, out)
			}
		}
	}
	// Every INCR was applied: redis-benchmark's key, four runs of n.
	rdb := MustClient(t, addr, 3, "")
	if v, err := rdb.Get(context.Background(), "counter:__rand_int__").Int(); err != nil || v != 4*n {
		t.Errorf("after the benchmarks the counter is %d, %v; want %d", v, err, 4*n)
	}
}
