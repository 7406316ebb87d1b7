// Package pgtest gives tests a real PostgreSQL: a fresh database per test
// on a shared server, or a private server that a test may stop and start.
//
// The shared server is the one at $SHARDCOUNTER_TEST_POSTGRES, by default
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable; its user
// must be allowed to CREATE DATABASE. scripts/ensure-postgres.sh installs
// and starts one on a Debian machine. When the server cannot be reached,
// tests fail and say how to start one: they never skip.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvServer names the environment variable holding the shared test
// server's URL.
const EnvServer = "SHARDCOUNTER_TEST_POSTGRES"

// DefaultServer is the shared test server's URL when EnvServer is unset.
const DefaultServer = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// howToStart is the advice given when the shared server is unreachable.
const howToStart = "start one with `sudo scripts/ensure-postgres.sh` (Debian: installs the postgresql package, " +
	"starts it and allows user postgres from 127.0.0.1), or set " + EnvServer +
	" to the URL of a server whose user may CREATE DATABASE"

// ServerURL returns the shared test server's URL.
func ServerURL() string {
	if u := os.Getenv(EnvServer); u != "" {
		return u
	}
	return DefaultServer
}

var databases atomic.Int64

// CreateDatabase creates a database with a unique name on the shared test
// server. It returns the database's URL and a function that drops it.
func CreateDatabase(ctx context.Context) (dsn string, drop func() error, err error) {
	server := ServerURL()
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, fmt.Errorf("%s=%q is not a postgres:// URL", EnvServer, redact(server))
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	admin, err := connect(ctx, server)
	if err != nil {
		return "", nil, fmt.Errorf("PostgreSQL is not reachable at %s: %v: %s", redact(server), err, howToStart)
	}
	defer admin.Close(context.Background())

	dropAbandoned(ctx, admin)
	name := fmt.Sprintf("%s%d_%d_%d_%06x", namePrefix, time.Now().Unix(), os.Getpid(), databases.Add(1), rand.Uint32()&0xffffff)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("create test database on %s: %v: give the user CREATE DATABASE, or %s", redact(server), err, howToStart)
	}
	u.Path = "/" + name
	drop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := connect(ctx, server)
		if err != nil {
			return err
		}
		defer admin.Close(context.Background())
		// FORCE (PostgreSQL 13+) ends connections a failed test left open.
		_, err = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		return err
	}
	return u.String(), drop, nil
}

// namePrefix starts the name of every test database, followed by its
// creation time in Unix seconds.
const namePrefix = "shardcounter_test_"

// abandonedAfter is the age past which a test database is taken for one
// that a crashed or killed test run left behind.
const abandonedAfter = 6 * time.Hour

// dropAbandoned drops test databases older than abandonedAfter that nobody
// is connected to, which a test binary that panicked or was killed left
// behind. It is best effort: a failure only leaves them for next time.
func dropAbandoned(ctx context.Context, admin *pgx.Conn) {
	rows, err := admin.Query(ctx, `
SELECT datname FROM pg_database d
WHERE starts_with(datname, $1)
	AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datid = d.oid)`, namePrefix)
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, name := range names {
		stamp, _, _ := strings.Cut(strings.TrimPrefix(name, namePrefix), "_")
		created, err := strconv.ParseInt(stamp, 10, 64)
		if err != nil || time.Since(time.Unix(created, 0)) < abandonedAfter {
			continue
		}
		admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()) //nolint:errcheck // best effort
	}
}

// MustDatabase returns the URL of a fresh database on the shared test
// server, dropped when the test ends. It fails the test, saying how to
// start a server, when there is none.
func MustDatabase(tb testing.TB) string {
	tb.Helper()
	dsn, drop, err := CreateDatabase(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := drop(); err != nil {
			tb.Errorf("drop test database: %v", err)
		}
	})
	return dsn
}

func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// redact hides a URL's password.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// Server is a private PostgreSQL server in a temporary directory, for tests
// that stop and start their server without disturbing the shared one. It
// needs the PostgreSQL server binaries (initdb, pg_ctl); as root it runs
// them as user postgres, since PostgreSQL refuses to run as root.
type Server struct {
	bin      string // directory of initdb and pg_ctl
	dir      string // socket directory, log and data
	port     int
	as       *user.User // nil: the current user
	settings []string   // name=value, after the defaults
}

// StartServer initialises and starts a private server on a free port of
// 127.0.0.1 with trust authentication for user postgres. The test's
// cleanup stops it and removes its files.
//
// Each of settings is a configuration parameter as name=value, applied
// after the server's defaults (shared_buffers=16MB, max_connections=40),
// so a benchmark can give it more memory or load
// shared_preload_libraries=pg_stat_statements.
func StartServer(tb testing.TB, settings ...string) *Server {
	tb.Helper()
	bin, err := binDir()
	if err != nil {
		tb.Fatalf("%v: install the PostgreSQL server (scripts/ensure-postgres.sh does) or set SHARDCOUNTER_PG_BINDIR", err)
	}
	for _, kv := range settings {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" || strings.ContainsAny(kv, " '\\\"") {
			tb.Fatalf("pgtest: setting %q is not name=value without spaces or quotes", kv)
		}
	}
	s := &Server{bin: bin, settings: settings}
	if os.Geteuid() == 0 {
		if s.as, err = user.Lookup("postgres"); err != nil {
			tb.Fatalf("running as root, a private PostgreSQL needs the user postgres to run as: %v: install the postgresql package, which creates it", err)
		}
	}
	// Not t.TempDir: its parents are private to the current user, and the
	// server may run as another one.
	if s.dir, err = os.MkdirTemp("", "shardcounter-pg-"); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(s.dir, "data", "postmaster.pid")); err == nil {
			s.pgctl("stop", "-m", "immediate") //nolint:errcheck // best effort at the end of a test
		}
		os.RemoveAll(s.dir)
	})
	if s.as != nil {
		uid, _ := strconv.Atoi(s.as.Uid)
		gid, _ := strconv.Atoi(s.as.Gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			tb.Fatal(err)
		}
	}
	if out, err := s.run(filepath.Join(bin, "initdb"), "-D", s.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		tb.Fatalf("initdb: %v\n%s", err, out)
	}
	if s.port, err = freePort(); err != nil {
		tb.Fatal(err)
	}
	s.Start(tb)
	return s
}

// URL returns the URL of the server's postgres database.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Start starts the stopped server on its port and waits until it accepts
// connections.
func (s *Server) Start(tb testing.TB) {
	tb.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c shared_buffers=16MB -c max_connections=40", s.port, s.dir)
	for _, kv := range s.settings {
		opts += " -c " + kv
	}
	if out, err := s.pgctl("start", "-w", "-t", "60", "-l", filepath.Join(s.dir, "log"), "-o", opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		tb.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
}

// Stop shuts the server down the way an operator would (fast mode: open
// connections are ended, then a clean checkpoint) and waits until it is
// gone.
func (s *Server) Stop(tb testing.TB) {
	tb.Helper()
	if out, err := s.pgctl("stop", "-w", "-t", "60", "-m", "fast"); err != nil {
		tb.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

func (s *Server) pgctl(args ...string) ([]byte, error) {
	return s.run(filepath.Join(s.bin, "pg_ctl"), append([]string{"-D", s.data()}, args...)...)
}

// run runs a server binary as the server's user. pg_ctl start leaves the
// server running in the background with its output in the log file, so
// the command's output is collected in a buffer, not a pipe that the
// server would keep open.
func (s *Server) run(name string, args ...string) ([]byte, error) {
	if s.as != nil {
		args = append([]string{"-u", s.as.Username, "--", name}, args...)
		name = "runuser"
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// binDir finds the PostgreSQL server binaries: $SHARDCOUNTER_PG_BINDIR,
// pg_config's bindir, or the newest /usr/lib/postgresql/*/bin (Debian).
func binDir() (string, error) {
	if d := os.Getenv("SHARDCOUNTER_PG_BINDIR"); d != "" {
		return d, nil
	}
	var candidates []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(versions, func(a, b string) int { // newest first: 15 before 9.6
		va, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(a)), 64)
		vb, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(b)), 64)
		return int(vb*100 - va*100)
	})
	candidates = append(candidates, versions...)
	for _, d := range candidates {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, pg_ctl) found")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
