package main_test

import (
	"strings"
	"testing"
)

// TestRound2Commands runs the round-2 commands against a real server,
// as issue 14's and 15's "done when" try them.
func TestRound2Commands(t *testing.T) {
	dir := t.TempDir()
	s := StartServer(t, dir)
	env := s.Env()

	// Likes: a distinct counter.
	if got := Run(t, dir, env, "create", "post:1:likes", "--kind", "distinct").MustOK(t); got != "created post:1:likes with 16 shards (distinct)\n" {
		t.Fatalf("create printed %q", got)
	}
	if got := Run(t, dir, env, "add", "post:1:likes", "alice").MustOK(t); got != "added alice to post:1:likes\n" {
		t.Fatalf("add printed %q", got)
	}
	if got := Run(t, dir, env, "add", "post:1:likes", "alice").MustOK(t); got != "alice was already in post:1:likes\n" {
		t.Fatalf("second add printed %q", got)
	}
	Run(t, dir, env, "add", "post:1:likes", "bob").MustOK(t)
	if got := Run(t, dir, env, "remove", "post:1:likes", "alice").MustOK(t); got != "removed alice from post:1:likes\n" {
		t.Fatalf("remove printed %q", got)
	}
	if got := Run(t, dir, env, "remove", "post:1:likes", "alice").MustOK(t); got != "alice was not in post:1:likes\n" {
		t.Fatalf("second remove printed %q", got)
	}
	if got := Run(t, dir, env, "get", "post:1:likes").MustOK(t); got != "1\n" {
		t.Fatalf("get printed %q, want 1", got)
	}
	if got := Run(t, dir, env, "members", "post:1:likes").MustOK(t); got != "bob\n" {
		t.Fatalf("members printed %q, want bob", got)
	}
	var members struct{ Members []string }
	mustJSON(t, Run(t, dir, env, "members", "post:1:likes", "--json").MustOK(t), &members)
	if len(members.Members) != 1 || members.Members[0] != "bob" {
		t.Fatalf("members --json gave %+v", members)
	}
	if msg := Run(t, dir, env, "incr", "post:1:likes").MustFail(t, 1); !strings.Contains(msg, "invalid_argument") {
		t.Fatalf("incr of a distinct counter: %q", msg)
	}

	// A floor: no negative stock.
	if got := Run(t, dir, env, "create", "stock", "--min", "0", "--window", "1h:1d").MustOK(t); got != "created stock with 16 shards (min 0, window 1h:1d)\n" {
		t.Fatalf("create printed %q", got)
	}
	if msg := Run(t, dir, env, "decr", "stock").MustFail(t, 1); !strings.Contains(msg, "out_of_range") {
		t.Fatalf("decr below the floor: %q", msg)
	}
	Run(t, dir, env, "incr", "stock", "--by", "3").MustOK(t)
	if got := Run(t, dir, env, "get", "stock", "--last", "24h").MustOK(t); got != "3\n" {
		t.Fatalf("get --last printed %q, want 3", got)
	}
	series := Run(t, dir, env, "series", "stock", "--last", "3h").MustOK(t)
	if lines := strings.Split(strings.TrimSpace(series), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[0], "START (1h buckets)") || !strings.HasSuffix(lines[len(lines)-1], " 3") {
		t.Fatalf("series --last 3h printed %q; want a header and 3 hours, the current one last", series)
	}

	// Many at once, and the shards.
	Run(t, dir, env, "create", "views").MustOK(t)
	Run(t, dir, env, "incr", "views", "--by", "7").MustOK(t)
	out := Run(t, dir, env, "get", "views", "stock", "missing")
	out.MustFail(t, 1)
	if fields := strings.Fields(out.Stdout); strings.Join(fields, " ") != "views 7 stock 3 missing -" {
		t.Fatalf("get of three printed %q", out.Stdout)
	}
	if !strings.Contains(out.Stderr, `"missing"`) || !strings.Contains(out.Stderr, "not_found") {
		t.Fatalf("get of three: stderr %q", out.Stderr)
	}
	shards := Run(t, dir, env, "shards", "views").MustOK(t)
	if lines := strings.Split(strings.TrimSpace(shards), "\n"); len(lines) != 18 || !strings.HasPrefix(lines[0], "SHARD") || !strings.Contains(lines[17], "16 shards, total 7") {
		t.Fatalf("shards printed %q", shards)
	}
}
