package main_test

import (
	"strings"
	"testing"
	"time"
)

// TestExpireCommands runs create --ttl, expire, ttl and persist against a
// server, and reads a counter past its deadline.
func TestExpireCommands(t *testing.T) {
	dir := t.TempDir()
	s := StartServer(t, dir)
	env := s.Env()

	if got := Run(t, dir, env, "create", "daily", "--shards", "2", "--ttl", "1h").MustOK(t); !strings.HasPrefix(got, "created daily with 2 shards, expires at ") {
		t.Fatalf("create --ttl printed %q", got)
	}
	if got := Run(t, dir, env, "ttl", "daily").MustOK(t); !strings.HasPrefix(got, "daily expires in 59m59") && !strings.HasPrefix(got, "daily expires in 1h0m0s") {
		t.Fatalf("ttl printed %q", got)
	}
	if got := Run(t, dir, env, "persist", "daily").MustOK(t); got != "daily has no deadline\n" {
		t.Fatalf("persist printed %q", got)
	}
	if msg := Run(t, dir, env, "expire", "nothing", "30s").MustFail(t, 1); !strings.Contains(msg, "not_found") {
		t.Fatalf("expire of a missing counter: %q", msg)
	}
	for _, args := range [][]string{{"expire", "daily"}, {"expire", "daily", "soon"}, {"expire", "daily", "-5s"}, {"create", "x", "--ttl", "0s"}} {
		Run(t, dir, env, args...).MustFail(t, 2)
	}
	Run(t, dir, env, "incr", "daily", "--by", "5").MustOK(t)
	Run(t, dir, env, "expire", "daily", "1s").MustOK(t)
	if got := Run(t, dir, env, "get", "daily").MustOK(t); got != "5\n" {
		t.Fatalf("get before the deadline printed %q", got)
	}
	time.Sleep(1100 * time.Millisecond)
	if msg := Run(t, dir, env, "get", "daily").MustFail(t, 1); !strings.Contains(msg, "not_found") {
		t.Fatalf("get past the deadline: %q", msg)
	}
	if msg := Run(t, dir, env, "ttl", "daily").MustFail(t, 1); !strings.Contains(msg, "not_found") {
		t.Fatalf("ttl past the deadline: %q", msg)
	}
}

// TestResetCommand runs reset to a value, to 0, of a missing counter and
// with --delete.
func TestResetCommand(t *testing.T) {
	dir := t.TempDir()
	s := StartServer(t, dir)
	env := s.Env()
	Run(t, dir, env, "incr", "hits", "--by", "12").MustOK(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"reset", "hits", "--value", "3"}, "reset hits from 12 to 3\n"},
		{[]string{"reset", "hits"}, "reset hits from 3 to 0\n"},
		{[]string{"reset", "new", "--value", "-2"}, "created new at -2\n"},
		{[]string{"reset", "new", "--delete"}, "deleted new, which was -2\n"},
		{[]string{"reset", "new", "--delete"}, "new did not exist\n"},
	} {
		if got := Run(t, dir, env, tc.args...).MustOK(t); got != tc.want {
			t.Fatalf("%q printed %q, want %q", tc.args, got, tc.want)
		}
	}
	Run(t, dir, env, "reset", "hits", "--delete", "--value", "1").MustFail(t, 2)
	if got := Run(t, dir, env, "get", "hits").MustOK(t); got != "0\n" {
		t.Fatalf("get after reset printed %q", got)
	}
}
