package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestServeUsers: serve --users-file with --auth-token-file, the CLI's
// --user, redis-cli as a user, the audit trail, and SIGHUP shrinking a
// user's rights; a file the parser refuses fails at start naming the line.
func TestServeUsers(t *testing.T) {
	dir := t.TempDir()
	users := filepath.Join(dir, "users")
	write := func(s string) {
		if err := os.WriteFile(users, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("user writer on >writer-pw ~views:* +@read +@write\nuser reader on >reader-pw %R~* +@read\n")
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte("root-token\n"), 0o600)
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("writer-pw\n"), 0o600)
	root := filepath.Join(dir, "root")
	os.WriteFile(root, []byte("root-token\n"), 0o600)

	s := StartServer(t, dir, "--resp-listen", "127.0.0.1:0", "--users-file", users, "--auth-token-file", tokens)
	Run(t, dir, s.Env(), "incr", "views:1", "--user", "writer", "--token-file", pw).MustOK(t)
	Run(t, dir, s.Env(), "incr", "views:1", "--token-file", pw).MustOK(t) // Bearer: the password names the user
	msg := Run(t, dir, s.Env(), "incr", "likes:1", "--user", "writer", "--token-file", pw).MustFail(t, 1)
	if !strings.Contains(msg, "permission_denied") {
		t.Fatalf("a write outside the writer's keys: %q", msg)
	}
	Run(t, dir, s.Env(), "delete", "views:1", "--user", "writer", "--token-file", pw).MustFail(t, 1)
	Run(t, dir, s.Env(), "create", "likes:1", "--token-file", root).MustOK(t) // the token file's default: everything
	Run(t, dir, s.Env(), "incr", "views:1", "--user", "writer").MustFail(t, 2)

	h, p := s.respAddr(t)
	if got := redisCLI(t, h, p, "--user", "writer", "--pass", "writer-pw", "INCR", "likes:1"); got != "NOPERM No permissions to access a key" {
		t.Fatalf("redis-cli INCR likes:1 as writer: %q", got)
	}
	if got := redisCLI(t, h, p, "--user", "writer", "--pass", "writer-pw", "INCR", "views:1"); got != "3" {
		t.Fatalf("redis-cli INCR views:1 as writer: %q", got)
	}
	if !strings.Contains(s.Logs(), `msg=audit proto=resp user=writer`) || !strings.Contains(s.Logs(), "op=createCounter") {
		t.Errorf("no audit lines in the log:\n%s", s.Logs())
	}

	write("user writer on >writer-pw ~views:* +@read\nuser reader on >reader-pw %R~* +@read\n")
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitLog(t, "users reloaded")
	if got := redisCLI(t, h, p, "--user", "writer", "--pass", "writer-pw", "INCR", "views:1"); got != "NOPERM User writer has no permissions to run the 'incr' command" {
		t.Fatalf("INCR after the writer lost @write: %q", got)
	}
	write("user writer on >writer-pw ~views:* +@read &chan\n")
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitLog(t, "keeping the previous users")
	if got := redisCLI(t, h, p, "--user", "reader", "--pass", "reader-pw", "GET", "views:1"); got != "3" {
		t.Fatalf("GET as reader after a refused reload: %q", got)
	}

	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("user a on >x\nuser b on >x\n"), 0o600)
	msg = Run(t, dir, nil, "serve", "--listen", "127.0.0.1:0", "--store", "bolt:"+filepath.Join(dir, "x.db"), "--users-file", bad).MustFail(t, 1)
	if !strings.Contains(msg, "line 2: user b has a password of user a") {
		t.Fatalf("a file with a shared password: %q", msg)
	}
}
