package main_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/internal/redistest"
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
	Run(t, dir, env, "expire", "stock", "2d").MustOK(t)
	Run(t, dir, env, "rank", "create", "top", "--size", "5").MustOK(t)
	for _, u := range []string{"ann", "bob", "cy"} {
		Run(t, dir, env, "add", "likes", u).MustOK(t)
	}
	srv.Stop(t, syscall.SIGTERM)

	exported := Run(t, dir, nil, "export", "--store", bolt, "--quiet").MustOK(t)
	if !strings.HasPrefix(exported, `{"type":"header","format":"shardcounter-export","version":2}`) || strings.Count(exported, "\n") != 7 ||
		!strings.Contains(exported, `"id":"stock","kind":"sum","shards":16,"value":-3,"expires_at":`) || !strings.Contains(exported, `{"type":"ranking","name":"top",`) {
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
	if out := Run(t, dir, pgSrv.Env(), "ttl", "stock").MustOK(t); !strings.HasPrefix(out, "stock expires in 47h") {
		t.Fatalf("ttl on PostgreSQL: %q", out)
	}

	// A cut file is an error with its line number, and a conflict is
	// reported, not overwritten.
	cut := filepath.Join(dir, "cut.jsonl")
	os.WriteFile(cut, []byte(exported[:len(exported)-20]), 0o644)
	if msg := Run(t, dir, nil, "import", "--store", bolt, "--in", cut, "--quiet").MustFail(t, 1); !strings.Contains(msg, "line 7: cut short") {
		t.Fatalf("cut import: %q", msg)
	}
	other := strings.Replace(exported, `"id":"stock","kind":"sum","shards":`, `"id":"stock","kind":"sum","shards":9`, 1)
	other = strings.Replace(other, `"size":5`, `"size":6`, 1)
	os.WriteFile(file, []byte(other), 0o644)
	r = Run(t, dir, nil, "import", "--store", bolt, "--in", file, "--quiet")
	if r.Code != 1 || !strings.Contains(r.Stderr, "counter stock exists with other options") || !strings.Contains(r.Stderr, "ranking top exists with other options (--prefix \"\" --size 5") {
		t.Fatalf("conflicting import: %+v", r)
	}
	// A member row and a window bucket lost behind the store's back are
	// drift: exit 1.
	db, err := bbolt.Open(filepath.Join(dir, "counters.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		c := tx.Bucket([]byte("members")).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if strings.HasSuffix(string(k), "cy") {
				return c.Delete()
			}
		}
		return errors.New("no member cy")
	})
	if err == nil { // and a window bucket
		err = db.Update(func(tx *bbolt.Tx) error {
			k, _ := tx.Bucket([]byte("window_buckets")).Cursor().First()
			if k == nil {
				return errors.New("no window bucket")
			}
			return tx.Bucket([]byte("window_buckets")).Delete(k)
		})
	}
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	r = Run(t, dir, nil, "verify", "--store", bolt, "--quiet")
	if r.Code != 1 || r.Stdout != "counter \"likes\": value 3, but its members sum to 2\ncounter \"views\": value 12, but its buckets sum to 0\n" {
		t.Fatalf("verify with a lost member and a lost bucket: %+v", r)
	}
	for _, sub := range []string{"export", "import", "verify", "import-redis", "backup"} {
		if out := Run(t, dir, nil, sub, "--help").MustOK(t); !strings.Contains(out, "Examples:\n") || !strings.Contains(out, "shardcounter "+sub+" --") {
			t.Fatalf("%s --help: %q", sub, out)
		}
	}
}

// TestServerExportBackup exports, imports and backs up through a running
// server's admin endpoints, with a token, and checks that a server
// started on each backup serves the same export.
func TestServerExportBackup(t *testing.T) {
	for _, kind := range []string{"pebble", "bolt"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			tokenFile := filepath.Join(dir, "token")
			os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600)
			srv := StartServerEnv(t, dir, nil, "--listen", "127.0.0.1:0", "--store", kind+":"+filepath.Join(dir, "live"), "--auth-token-file", tokenFile)
			env := srv.Env()
			auth := []string{"--token-file", tokenFile}
			Run(t, dir, env, append([]string{"create", "views", "--shards", "8", "--window", "1h:7d"}, auth...)...).MustOK(t)
			Run(t, dir, env, append([]string{"incr", "views", "--by", "5"}, auth...)...).MustOK(t)
			Run(t, dir, env, append([]string{"add", "likes", "ann"}, auth...)...).MustOK(t)
			Run(t, dir, env, append([]string{"incr", "plain"}, auth...)...).MustOK(t)
			Run(t, dir, env, append([]string{"collection", "create", "posts", "--shards", "2", "--index", "user"}, auth...)...).MustOK(t)
			Run(t, dir, env, append([]string{"put", "posts", `{"user":"ann","timestamp":"2026-01-02T03:04:05Z"}`, "--id", "p1"}, auth...)...).MustOK(t)

			if msg := Run(t, dir, env, "export", "--quiet").MustFail(t, 1); !strings.Contains(msg, "bearer token") {
				t.Fatalf("export without a token: %q", msg)
			}
			exported := Run(t, dir, env, append([]string{"export", "--quiet"}, auth...)...).MustOK(t)
			if strings.Count(exported, "\n") != 8 || !strings.Contains(exported, `{"type":"document","collection":"posts","id":"p1",`) {
				t.Fatalf("export:\n%s", exported)
			}
			out := filepath.Join(dir, "backup")
			r := Run(t, dir, env, append([]string{"backup", "--out", out}, auth...)...)
			if r.MustOK(t); !strings.Contains(r.Stderr, "backed up") {
				t.Fatalf("backup summary: %q", r.Stderr)
			}
			if msg := Run(t, dir, env, append([]string{"backup", "--out", out}, auth...)...).MustFail(t, 2); !strings.Contains(msg, "exists") {
				t.Fatalf("backup over a backup: %q", msg)
			}
			if r := Run(t, dir, env, append([]string{"verify"}, auth...)...); r.Code != 0 || !strings.Contains(r.Stderr, "verified 3 counters") || !strings.Contains(r.Stderr, "0 drifts") {
				t.Fatalf("verify through the server: %+v", r)
			}
			restored := StartServerEnv(t, dir, nil, "--listen", "127.0.0.1:0", "--store", kind+":"+out)
			if got := Run(t, dir, restored.Env(), "export", "--quiet").MustOK(t); got != exported {
				t.Fatalf("export of the backup:\n%s\nwant\n%s", got, exported)
			}

			// A backup taken while writes go on restores and verifies.
			stop := make(chan struct{})
			wrote := make(chan int)
			go func() {
				n := 0
				for {
					select {
					case <-stop:
						wrote <- n
						return
					default:
					}
					Run(t, dir, env, append([]string{"incr", "busy", "--by", "2"}, auth...)...)
					Run(t, dir, env, append([]string{"add", "busy-set", fmt.Sprint(n)}, auth...)...)
					n++
				}
			}()
			time.Sleep(300 * time.Millisecond)
			out2 := filepath.Join(dir, "backup2")
			Run(t, dir, env, append([]string{"backup", "--out", out2, "--quiet"}, auth...)...).MustOK(t)
			close(stop)
			if n := <-wrote; n == 0 {
				t.Fatal("no writes went on during the backup")
			}
			restored2 := StartServerEnv(t, dir, nil, "--listen", "127.0.0.1:0", "--store", kind+":"+out2)
			if r := Run(t, dir, restored2.Env(), "verify"); r.Code != 0 || !strings.Contains(r.Stderr, "0 drifts") {
				t.Fatalf("verify of a backup taken under writes: %+v", r)
			}

			// Import through a server: plain and distinct counters go in;
			// window buckets need --store, and the error says so.
			fresh := StartServerEnv(t, dir, nil, "--listen", "127.0.0.1:0", "--store", kind+":"+filepath.Join(dir, "fresh"))
			in := filepath.Join(dir, "in.jsonl")
			var kept []string
			for _, l := range strings.SplitAfter(exported, "\n") {
				if !strings.Contains(l, `"views"`) {
					kept = append(kept, l)
				}
			}
			os.WriteFile(in, []byte(strings.Replace(strings.Join(kept, ""), `"counters":3`, `"counters":2`, 1)), 0o644)
			Run(t, dir, fresh.Env(), "import", "--in", in, "--quiet").MustOK(t)
			if got := Run(t, dir, fresh.Env(), "get", "likes", "plain").MustOK(t); !strings.Contains(got, "1") {
				t.Fatalf("get after import through the server: %q", got)
			}
			if got := Run(t, dir, fresh.Env(), "query", "posts", "--where", "user==ann").MustOK(t); !strings.Contains(got, "p1") {
				t.Fatalf("query after import through the server: %q", got)
			}
			os.WriteFile(in, []byte(exported), 0o644)
			if msg := Run(t, dir, fresh.Env(), "import", "--in", in, "--quiet").MustFail(t, 1); !strings.Contains(msg, "--store") {
				t.Fatalf("windowed import through the server: %q", msg)
			}
		})
	}
}

// TestImportRedisCommand migrates a Redis fed by INCR and SADD with one
// command, through a server and into a store, and reads the same numbers
// with get.
func TestImportRedisCommand(t *testing.T) {
	dir := t.TempDir()
	rd := redistest.MustStart(t)
	for _, cmd := range [][]string{{"INCRBY", "page:home", "12"}, {"INCR", "page:about"}, {"SADD", "likes:1", "ann", "bob"}, {"RPUSH", "jobs", "x"}} {
		if _, err := rd.Do(cmd...); err != nil {
			t.Fatal(err)
		}
	}
	from := "redis://" + rd.Addr
	srv := StartServer(t, dir)
	r := Run(t, dir, srv.Env(), "import-redis", "--from", from, "--match", "*", "--shards", "4")
	r.MustOK(t)
	if !strings.Contains(r.Stderr, "skipped jobs (list)") || !strings.Contains(r.Stderr, "3 counters and 2 members moved, 1 keys skipped") {
		t.Fatalf("import-redis stderr: %q", r.Stderr)
	}
	out := Run(t, dir, srv.Env(), "get", "page:home", "page:about", "likes:1").MustOK(t)
	for _, want := range []string{"12", "1", "2"} {
		if !strings.Contains(out, want) {
			t.Fatalf("get: %q, want %s in it", out, want)
		}
	}
	Run(t, dir, nil, "import-redis", "--from", from, "--match", "page:*", "--store", "bolt:"+filepath.Join(dir, "b.db"), "--quiet").MustOK(t)
	if exp := Run(t, dir, nil, "export", "--store", "bolt:"+filepath.Join(dir, "b.db"), "--quiet").MustOK(t); strings.Count(exp, `"type":"counter"`) != 2 {
		t.Fatalf("export after import-redis --match page:*:\n%s", exp)
	}
	if msg := Run(t, dir, nil, "import-redis", "--from", "http://x", "--match", "*").MustFail(t, 2); !strings.Contains(msg, "redis://") {
		t.Fatalf("bad --from: %q", msg)
	}
}
