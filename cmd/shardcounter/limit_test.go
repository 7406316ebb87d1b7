package main_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter"
)

// TestLimitCommands walks `shardcounter limit` against a server on
// Pebble: define, read and list limits, take until refused (exit 1, the
// decision printed), retry a request id, peek, reset a key, delete;
// bad input is a usage error before any request.
func TestLimitCommands(t *testing.T) {
	dir := t.TempDir()
	s := StartServer(t, dir)
	env := s.Env()
	limit := func(args ...string) Result { return Run(t, dir, env, append([]string{"limit"}, args...)...) }

	if got := limit("create", "api", "fixed", "2/366d").MustOK(t); got != "created limit api: fixed 2/366d\n" {
		t.Fatalf("create printed %q", got)
	}
	if got := limit("create", "api", "fixed 2/366d").MustOK(t); got != "limit exists: limit api: fixed 2/366d\n" {
		t.Fatalf("create again printed %q", got)
	}
	limit("create", "burst", "gcra", "1/1h", "burst", "3").MustOK(t)
	if got := limit("get", "api").MustOK(t); !strings.HasPrefix(got, "limit api: fixed 2/366d, defined 20") {
		t.Fatalf("get printed %q", got)
	}
	got := limit("get").MustOK(t)
	if lines := strings.Split(strings.TrimSpace(got), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "api ") ||
		!strings.Contains(lines[2], "gcra 1/1h burst 3") {
		t.Fatalf("get printed %q", got)
	}

	allowed := regexp.MustCompile(`^allowed: 1 remaining, whole again in \S+\n$`)
	if got := limit("take", "api", "u1", "--request-id", "r1").MustOK(t); !allowed.MatchString(got) {
		t.Fatalf("take printed %q", got)
	}
	if got := limit("take", "api", "u1", "--request-id", "r1").MustOK(t); !strings.Contains(got, "(a retry: the decision first recorded, nothing taken now)") ||
		!strings.HasPrefix(got, "allowed: 1 remaining") {
		t.Fatalf("retry printed %q", got)
	}
	if got := limit("peek", "api", "u1").MustOK(t); !strings.HasPrefix(got, "would be allowed: 1 remaining") {
		t.Fatalf("peek printed %q", got)
	}
	limit("take", "api", "u1").MustOK(t)
	r := limit("take", "api", "u1")
	if line := r.MustFail(t, 1); !strings.Contains(line, "refused: take of 1 from u1 of limit api would exceed its quota") {
		t.Fatalf("refused take: stderr %q", line)
	}
	if !regexp.MustCompile(`^refused: 0 remaining, retry in \S+, whole again in \S+\n$`).MatchString(r.Stdout) {
		t.Fatalf("refused take printed %q", r.Stdout)
	}
	r = limit("peek", "api", "u2", "--cost", "5")
	r.MustFail(t, 1)
	if !strings.HasPrefix(r.Stdout, "would be refused: 2 remaining, never allowed: the cost is above the quota") {
		t.Fatalf("peek of a cost above the quota printed %q", r.Stdout)
	}
	var res shardcounter.LimitResult
	out := limit("peek", "api", "u2", "--json").MustOK(t)
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.Allowed || res.Remaining != 2 {
		t.Fatalf("peek --json printed %q (%v)", out, err)
	}

	if got := limit("reset", "api", "u1").MustOK(t); got != "reset u1 of limit api: its whole quota is available\n" {
		t.Fatalf("reset printed %q", got)
	}
	if got := limit("peek", "api", "u1", "--cost", "2").MustOK(t); !strings.HasPrefix(got, "would be allowed: 2 remaining") {
		t.Fatalf("peek after the reset printed %q", got)
	}

	// Usage errors: exit 2, nothing sent.
	for _, args := range [][]string{
		{}, {"frobnicate"}, {"create", "api"}, {"create", "x", "leaky", "1/1s"}, {"create", "x", "fixed", "3/500ms"},
		{"take", "api"}, {"take", "api", "u1", "--cost", "0"}, {"peek", "api", "u1", "--request-id", "r"},
		{"reset", "api", "u1", "--cost", "2"}, {"get", "a", "b"}, {"delete"}, {"take", "api", "u1", "extra"},
	} {
		limit(args...).MustFail(t, 2)
	}
	if got := limit("peek", "api", "u1").MustOK(t); !strings.HasPrefix(got, "would be allowed: 2 remaining") {
		t.Fatalf("a usage error took something: %q", got)
	}

	if got := limit("delete", "api").MustOK(t); got != "deleted limit api and its keys' state\n" {
		t.Fatalf("delete printed %q", got)
	}
	if line := limit("take", "api", "u1").MustFail(t, 1); !strings.Contains(line, "(not_found)") {
		t.Fatalf("take of a deleted limit: %q", line)
	}
	limit("delete", "api").MustFail(t, 1)
}
