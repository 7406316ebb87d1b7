package dsn_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/dsn"
	"github.com/shardcounter/shardcounter/internal/pgtest"
)

func TestScheme(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"bolt:./shardcounter-data/shardcounter.db", dsn.Bolt},
		{"pebble:./shardcounter-data/pebble", dsn.Pebble},
		{"PEBBLE:/var/lib/shardcounter", dsn.Pebble},
		{"bolt:/var/lib/x.db", dsn.Bolt},
		{"postgres://u:p@localhost:5432/db?sslmode=disable", dsn.Postgres},
		{"postgresql://localhost/db", dsn.Postgres},
		{"redis://127.0.0.1:6379/0", dsn.Redis},
		{"redis+cluster://127.0.0.1:7000?addr=127.0.0.1:7001", dsn.RedisCluster},
		{"firestore://demo-project", dsn.Firestore},
		{"firestore://p/db?count_field=Count", dsn.Firestore},
		{"datastore://demo-project", dsn.Datastore},
		{"datastore://p?kind=IK_CounterShardEntity&shard_write_interval=0", dsn.Datastore},
	} {
		if got, err := dsn.Scheme(tc.dsn); err != nil || got != tc.want {
			t.Errorf("Scheme(%q) = %q, %v; want %q", tc.dsn, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "shardcounter.db", "bolt:", "bolt://x.db", "pebble:", "pebble://data", "mysql://localhost/db", ":x", "sqlite:x.db", "firestore://", "firestore://p?x=1", "datastore://", "datastore://p/db", "datastore://p?kind=a.b"} {
		if _, err := dsn.Scheme(bad); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
			t.Errorf("Scheme(%q) = %v, want invalid_argument", bad, err)
		}
	}
}

func TestOpenBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "c.db")
	s, err := dsn.Open(context.Background(), "bolt:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestOpenUnknown(t *testing.T) {
	_, err := dsn.Open(context.Background(), "mysql://root:secret@localhost/db")
	if shardcounter.ErrorCode(err) != shardcounter.EINVALID {
		t.Fatalf("Open of an unknown scheme = %v, want invalid_argument", err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Fatalf("error shows the password: %v", err)
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://user:secret@db:5432/x?sslmode=disable", "postgres://user:xxxxx@db:5432/x?sslmode=disable"},
		{"redis://:secret@127.0.0.1:6379/0", "redis://:xxxxx@127.0.0.1:6379/0"},
		{"bolt:./x.db", "bolt:./x.db"},
		{"postgres://user@db/x", "postgres://user@db/x"},
		// An "@" outside the authority: url.Parse reads no password, but
		// what precedes that "@" may be one.
		{"a://#:pw-secret@", "a://xxxxx@"},
		{"redis://u:x@h/:pw-secret@y", "redis://xxxxx@y"},
		{"postgres://db/x?password=s@h", "postgres://xxxxx@h"},
	} {
		if got := dsn.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzScheme(f *testing.F) {
	for _, s := range []string{"pebble:data", "pebble:", "bolt:x.db", "postgres://u:p@h:1/d", "redis://h:1/0", "redis+cluster://h:1?addr=h:2", "firestore://p/db?count_field=Count", "datastore://p?kind=K&namespace=n", "", ":", "bolt://", "x:y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kind, err := dsn.Scheme(s)
		if err != nil {
			if kind != "" || shardcounter.ErrorCode(err) != shardcounter.EINVALID {
				t.Fatalf("Scheme(%q) = %q, %v: errors must be invalid_argument with no kind", s, kind, err)
			}
		} else if !strings.HasPrefix(strings.ToLower(s), strings.SplitN(kind, "+", 2)[0]) {
			t.Fatalf("Scheme(%q) = %q: not the DSN's scheme", s, kind)
		}
		// Redact never shows the password of a URL it can parse.
		if r := dsn.Redact(s); strings.Contains(s, "://") && strings.Contains(s, ":pw-secret@") && strings.Contains(r, "pw-secret@") {
			t.Fatalf("Redact(%q) = %q shows the password", s, r)
		}
	})
}

func TestOpenRedisUnreachable(t *testing.T) {
	// Port 1 on loopback refuses connections: Open must fail, not hang.
	for _, d := range []string{"redis://127.0.0.1:1/0", "redis+cluster://127.0.0.1:1"} {
		if s, err := dsn.Open(context.Background(), d); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded with no server", d)
		}
	}
}

func TestOpenPostgres(t *testing.T) {
	ctx := context.Background()
	s, err := dsn.Open(ctx, pgtest.MustDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreateCounter(ctx, "c", shardcounter.Spec{Shards: 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, "c", 3, 1); err != nil {
		t.Fatal(err)
	}
	if r, err := s.ReadCounter(ctx, "c"); err != nil || r.Value != 3 {
		t.Fatalf("ReadCounter = %+v, %v; want 3", r, err)
	}

	// Port 1 on loopback refuses connections: Open fails at once, saying so.
	_, err = dsn.Open(ctx, "postgresql://postgres@127.0.0.1:1/x?sslmode=disable")
	if !errors.Is(err, shardcounter.ErrUnavailable) {
		t.Fatalf("Open of an unreachable PostgreSQL = %v, want ErrUnavailable", err)
	}
}

func TestCollectionsBolt(t *testing.T) {
	s, err := dsn.Open(context.Background(), "bolt:"+filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cs, err := dsn.Collections(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.GetCollection(context.Background(), "none"); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		t.Fatalf("GetCollection on a new file = %v, want not_found", err)
	}
}

func TestOpenPebble(t *testing.T) {
	ctx := context.Background()
	s, err := dsn.Open(ctx, "pebble:"+filepath.Join(t.TempDir(), "sub", "pebble"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Add(ctx, "c", 1, 0); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		t.Fatalf("Add to a missing counter = %v, want not_found", err)
	}
	cs, err := dsn.Collections(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.GetCollection(ctx, "none"); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		t.Fatalf("GetCollection on a new directory = %v, want not_found", err)
	}
}
