package main_test

import (
	"strconv"
	"strings"
	"testing"
)

// TestApproxCommands creates an approx counter with the CLI, adds members
// to it and to one `add --kind approx` creates, and reads them.
func TestApproxCommands(t *testing.T) {
	dir := t.TempDir()
	s := StartServer(t, dir)
	env := s.Env()
	if got := Run(t, dir, env, "create", "uv", "--kind", "approx", "--shards", "2").MustOK(t); got != "created uv with 2 shards (approx)\n" {
		t.Fatalf("create --kind approx printed %q", got)
	}
	for _, m := range []string{"alice", "bob", "carol"} {
		if got := Run(t, dir, env, "add", "uv", m).MustOK(t); got != "added "+m+" to uv\n" {
			t.Fatalf("add %s printed %q", m, got)
		}
	}
	if got := Run(t, dir, env, "add", "uv", "bob", "--kind", "approx").MustOK(t); !strings.Contains(got, "changed no sketch") {
		t.Fatalf("adding bob again printed %q", got)
	}
	if got := Run(t, dir, env, "get", "uv").MustOK(t); got != "3\n" {
		t.Fatalf("get printed %q, want 3", got)
	}
	Run(t, dir, env, "add", "made", "x", "--kind", "approx").MustOK(t)
	if got := Run(t, dir, env, "get", "made").MustOK(t); got != "1\n" {
		t.Fatalf("get of the counter add --kind approx made printed %q, want 1", got)
	}
	if list := Run(t, dir, env, "list", "--json").MustOK(t); !strings.Contains(list, `"kind":"approx"`) {
		t.Fatalf("list --json does not show the kind approx:\n%s", list)
	}
	if r := Run(t, dir, env, "remove", "uv", "alice"); r.Code == 0 {
		t.Fatalf("remove from an approx counter succeeded: %q", r.Stdout)
	}
	if r := Run(t, dir, env, "add", "uv", "dave", "--kind", "distinct"); r.Code == 0 {
		t.Fatalf("add --kind distinct to an approx counter succeeded: %q", r.Stdout)
	}
	if r := Run(t, dir, env, "create", "x", "--kind", "hll"); r.Code == 0 || !strings.Contains(r.Stderr, "sum, distinct or approx") {
		t.Fatalf("create --kind hll: %v, %q", r.Code, r.Stderr)
	}
	if got := Run(t, dir, env, "get", "uv").MustOK(t); got != strconv.Itoa(3)+"\n" {
		t.Fatalf("get after refused writes printed %q", got)
	}
}
