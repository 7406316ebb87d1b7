package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/shardcounter/shardcounter/internal/pgtest"
)

// TestExportImportVerify is the move a new user makes: counters written
// through a server on a bolt file, the server stopped, `export | import`
// into PostgreSQL, `verify` on both, and a server on PostgreSQL that shows
// the same numbers.
func TestExportImportVerify(t *testing.T) {
	dir := t.TempDir()
	bolt := "bolt:" + filepath.Join(dir, "counters.db")
	srv := StartServerEnv(t, dir, nil, "--listen", "127.0.0.1:0", "--store", bolt)
	env := srv.Env()
	Run(t, dir, env, "create", "likes", "--kind", "distinct", "--shards", "4").MustOK(t)
	Run(t, dir, env, "create", "views", "--shards", "8", "--window", "1h:7d").MustOK(t)
	Run(t, dir, env, "incr", "views", "--by", "12").MustOK(t)
	Run(t, dir, env, "decr", "stock", "--by", "3").MustOK(t)
	for _, u := range []string{"ann", "bob", "cy"} {
		Run(t, dir, env, "add", "likes", u).MustOK(t)
	}
	srv.Stop(t, syscall.SIGTERM)

	exported := Run(t, dir, nil, "export", "--store", bolt, "--quiet").MustOK(t)
	if !strings.HasPrefix(exported, `{"type":"header","format":"shardcounter-export","version":1}`) || strings.Count(exported, "\n") != 6 {
		t.Fatalf("export:\n%s", exported)
	}
	file := filepath.Join(dir, "export.jsonl")
	if err := os.WriteFile(file, []byte(exported), 0o644); err != nil {
		t.Fatal(err)
	}
	pg := pgtest.MustDatabase(t)
	r := Run(t, dir, nil, "import", "--store", pg, "--in", file)
	r.MustOK(t)
	if !strings.Contains(r.Stderr, "imported 3 counters") {
		t.Fatalf("import summary: %q", r.Stderr)
	}
	Run(t, dir, nil, "import", "--store", pg, "--in", file, "--quiet").MustOK(t) // again: nothing changes
	if got := Run(t, dir, nil, "export", "--store", pg, "--quiet").MustOK(t); got != exported {
		t.Fatalf("export of PostgreSQL:\n%s\nwant\n%s", got, exported)
	}
	for _, s := range []string{bolt, pg} {
		if r := Run(t, dir, nil, "verify", "--store", s); r.Code != 0 || !strings.Contains(r.Stderr, "verified 3 counters") || r.Stdout != "" {
			t.Fatalf("verify %s: %+v", s, r)
		}
	}
	pgSrv := StartServerEnv(t, dir, nil, "--listen", "127.0.0.1:0", "--store", pg)
	if out := Run(t, dir, pgSrv.Env(), "get", "likes", "views", "stock").MustOK(t); !strings.Contains(out, "3") || !strings.Contains(out, "12") || !strings.Contains(out, "-3") {
		t.Fatalf("get on PostgreSQL: %q", out)
	}

	// A cut file is an error with its line number, and a conflict is
	// reported, not overwritten.
	cut := filepath.Join(dir, "cut.jsonl")
	os.WriteFile(cut, []byte(exported[:len(exported)-20]), 0o644)
	if msg := Run(t, dir, nil, "import", "--store", bolt, "--in", cut, "--quiet").MustFail(t, 1); !strings.Contains(msg, "line 6: cut short") {
		t.Fatalf("cut import: %q", msg)
	}
	other := strings.Replace(exported, `"id":"stock","kind":"sum","shards":`, `"id":"stock","kind":"sum","shards":9`, 1)
	os.WriteFile(file, []byte(other), 0o644)
	r = Run(t, dir, nil, "import", "--store", bolt, "--in", file, "--quiet")
	if r.Code != 1 || !strings.Contains(r.Stderr, "counter stock exists with other options") {
		t.Fatalf("conflicting import: %+v", r)
	}
	for _, sub := range []string{"export", "import", "verify"} {
		if out := Run(t, dir, nil, sub, "--help").MustOK(t); !strings.Contains(out, "Examples:\n") || !strings.Contains(out, "shardcounter "+sub+" --store") {
			t.Fatalf("%s --help: %q", sub, out)
		}
	}
}
