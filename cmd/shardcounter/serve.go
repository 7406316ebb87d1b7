package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/acl"
	"github.com/shardcounter/shardcounter/engine"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/internal/authtoken"
	"github.com/shardcounter/shardcounter/resp"
	respserver "github.com/shardcounter/shardcounter/resp/server"
)

// Defaults of `shardcounter serve`, as in SPEC.md.
const (
	DefaultListen = "127.0.0.1:8080"
	DefaultStore  = "pebble:./shardcounter-data/pebble"
	// LegacyStore is the default of the versions before Pebble: serve
	// without --store keeps serving it while it exists and no Pebble
	// store does (defaultStore).
	LegacyStore = "bolt:./shardcounter-data/shardcounter.db"
	// MoveLegacyCommand moves the data of LegacyStore to DefaultStore.
	MoveLegacyCommand = "shardcounter export --store " + LegacyStore + " | shardcounter import --store " + DefaultStore
)

// defaultStore is the store of serve without --store or
// SHARDCOUNTER_STORE: DefaultStore, unless the file of LegacyStore exists
// and the directory of DefaultStore does not, when it is LegacyStore, so
// that an upgrade never starts an empty store beside the user's data.
// exists reports whether a path exists, relative to the working directory.
func defaultStore(exists func(path string) bool) (store string, legacy bool) {
	if exists(strings.TrimPrefix(LegacyStore, "bolt:")) && !exists(strings.TrimPrefix(DefaultStore, "pebble:")) {
		return LegacyStore, true
	}
	return DefaultStore, false
}

// storeFlag is --store: a string that remembers whether it was given.
type storeFlag struct {
	dsn   *string
	given *bool
}

func (f storeFlag) String() string {
	if f.dsn == nil {
		return ""
	}
	return *f.dsn
}

func (f storeFlag) Set(v string) error {
	*f.dsn, *f.given = v, true
	return nil
}

// shutdownTimeout bounds how long serve waits for requests in flight
// after a signal before it closes their connections.
const shutdownTimeout = 30 * time.Second

// serveCommand is `shardcounter serve`: the HTTP API over the engine over
// a store. On SIGINT or SIGTERM it stops accepting, lets requests in
// flight finish, commits queued writes (engine.Close), closes the store
// and returns nil, so the process exits 0.
type serveCommand struct {
	m             *Main
	listen        string
	store         string
	storeGiven    bool // by --store or SHARDCOUNTER_STORE
	defaultShards int
	autoCreate    bool
	durability    string
	flushInterval time.Duration
	dedupeWindow  time.Duration
	maxBody       int64
	authTokenFile string
	usersFile     string
	tlsCert       string
	tlsKey        string
	respTLSCert   string
	respTLSKey    string
	tlsClientCA   string
	logFormat     string
	logLevel      string
	reqTimeout    time.Duration
	bodyTimeout   time.Duration
	maxConcurrent int
	maxBodyTotal  int64
	respListen    string
	// respGoroutine is --resp-conn-goroutines; nil: the server's choice,
	// the event loop unless the engine's commits of one hot counter
	// overlap (respserver.Options.EventLoop).
	respGoroutine *bool
	respFlush     bool
	respTimeout   time.Duration
	respClients   int
	respInputMem  int64
	maxStaleness  time.Duration
	cacheSize     int
	readsInFlight int
	// shardInterval is --shard-write-interval; nil: the store's default.
	shardInterval *time.Duration
	// rankingRescan is --ranking-rescan; nil: the store's default (rank.go).
	rankingRescan *bool
	rls           rlsOptions // serve_rls.go
	pprofListen   string     // serve_pprof.go
}

func newServeCommand(m *Main) command { return &serveCommand{m: m} }

func (c *serveCommand) flags(fs *flag.FlagSet) {
	// Environment variables are flag defaults, so a flag always wins.
	fs.StringVar(&c.listen, "listen", c.env("SHARDCOUNTER_LISTEN", DefaultListen), "HTTP `ADDR` to listen on (env SHARDCOUNTER_LISTEN)")
	c.store, c.storeGiven = DefaultStore, false
	if v := c.m.Getenv("SHARDCOUNTER_STORE"); v != "" {
		c.store, c.storeGiven = v, true
	}
	fs.Var(storeFlag{&c.store, &c.storeGiven}, "store", "store `DSN`: pebble:DIR, bolt:PATH, postgres://..., redis://..., firestore://PROJECT, datastore://PROJECT (env SHARDCOUNTER_STORE; "+
		"without either, "+LegacyStore+" while that file exists and "+strings.TrimPrefix(DefaultStore, "pebble:")+" does not)")
	fs.IntVar(&c.defaultShards, "default-shards", 16, "`N` shards for counters created without a shard count")
	fs.BoolVar(&c.autoCreate, "auto-create", true, "a write to an unknown counter creates it")
	fs.StringVar(&c.durability, "durability", "durable", "`MODE` durable: answer a write once it is committed; async: answer once queued, commit within --flush-interval (a crash loses what is queued)")
	fs.DurationVar(&c.flushInterval, "flush-interval", engine.DefaultFlushInterval, "with --durability async, commit a queued write within this `DURATION`")
	fs.DurationVar(&c.dedupeWindow, "dedupe-window", shardcounter.DefaultDedupeWindow, "a request id repeated within this `DURATION` is not applied again")
	fs.Int64Var(&c.maxBody, "max-body", shttp.DefaultMaxBodyBytes, "larger request bodies get 413 (`BYTES`)")
	fs.Int64Var(&c.maxBodyTotal, "max-body-total", shttp.DefaultMaxBodyTotal, "hold at most `BYTES` of request bodies at once, with what they hold decoded, across all requests; past it a request gets 503")
	fs.StringVar(&c.authTokenFile, "auth-token-file", c.env("SHARDCOUNTER_AUTH_TOKEN_FILE", ""),
		"require a bearer token on /v1 from `PATH`, one token a line, reread on SIGHUP (env SHARDCOUNTER_AUTH_TOKEN_FILE)")
	fs.StringVar(&c.usersFile, "users-file", c.env("SHARDCOUNTER_USERS_FILE", ""),
		"the users, what each may run and the keys it may touch, from `PATH` in Redis's ACL-file syntax, reread on SIGHUP (env SHARDCOUNTER_USERS_FILE; docs/OPERATIONS.md)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "serve HTTPS with the certificate chain in `PATH` (PEM; needs --tls-key; reread on SIGHUP)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "the private key of --tls-cert, in `PATH` (PEM)")
	c.tlsFlags(fs)
	fs.StringVar(&c.logFormat, "log-format", "text", "`FORMAT` of the log on stderr: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "`LEVEL` of the log: debug (adds a line per request), info, warn or error")
	fs.DurationVar(&c.reqTimeout, "request-timeout", shttp.DefaultRequestTimeout, "deadline of each API request, down to the store (`DURATION`)")
	fs.DurationVar(&c.bodyTimeout, "body-timeout", shttp.DefaultBodyTimeout, "a request body must arrive within this `DURATION`, read before the request takes a --max-concurrent slot")
	fs.IntVar(&c.maxConcurrent, "max-concurrent", shttp.DefaultMaxConcurrent, "serve at most `N` API requests at once; past it a request waits briefly, then gets 503")
	fs.DurationVar(&c.maxStaleness, "max-staleness", engine.DefaultMaxStaleness, "a cached read may be this `DURATION` old; longer means fewer store reads for pages of many counters")
	fs.IntVar(&c.cacheSize, "cache-size", engine.DefaultCacheSize, "keep the cached readings of at most `N` counters, the least recently read dropped first")
	fs.IntVar(&c.readsInFlight, "max-reads-in-flight", engine.DefaultMaxReadsInFlight, "at most `N` store reads at once for cached-read misses, and N for strong reads; reads that wait go together in the next")
	fs.Func("shard-write-interval", "commit each shard record at most once per `DURATION`, the shards of a counter taking turns; 0 turns it off (default 1s on firestore:// and datastore://, whose documents take about one write a second, and off elsewhere)", func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("give a duration such as 1s, or 0 to turn pacing off")
		}
		c.shardInterval = &d
		return nil
	})
	c.rankingRescanFlag(fs)
	c.rlsFlags(fs)
	c.pprofFlags(fs)
	fs.StringVar(&c.respListen, "resp-listen", c.env("SHARDCOUNTER_RESP_LISTEN", ""),
		"also serve the Redis protocol (RESP2, RESP3) on `ADDR`, such as 127.0.0.1:6380; off unless given (env SHARDCOUNTER_RESP_LISTEN)")
	fs.DurationVar(&c.respTimeout, "resp-read-timeout", respserver.DefaultReadTimeout,
		"a RESP command must arrive in full within this `DURATION` of its first byte, else its connection is closed (idle connections have no deadline)")
	fs.IntVar(&c.respClients, "resp-max-clients", respserver.DefaultMaxClients, "serve at most `N` RESP connections at once; past it a new one gets -ERR max number of clients reached")
	fs.Int64Var(&c.respInputMem, "resp-max-input-memory", respserver.DefaultMaxInputMemory,
		"hold at most `BYTES` of unparsed RESP input across all connections; a connection that needs more gets a protocol error and is closed")
	fs.BoolFunc("resp-conn-goroutines",
		"serve each RESP connection on its own goroutine instead of one event loop: a command waiting for the store then holds up only its own connection, and other connections' writes reach the engine while a batch commits (slower for many small commands; docs/RESP.md). Default: on for redis:// and redis+cluster:// in durable mode, whose commits of one hot counter overlap; =false keeps the loop there",
		func(v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("give true or false")
			}
			c.respGoroutine = &b
			return nil
		})
	fs.BoolVar(&c.respFlush, "resp-allow-flush", false,
		"let RESP's FLUSHDB and FLUSHALL delete every counter of the store (for test set-ups; refused without it)")
}

func (c *serveCommand) env(name, def string) string {
	if v := c.m.Getenv(name); v != "" {
		return v
	}
	return def
}

// check refuses flags serve cannot use, with a usage error that says what
// to give instead, and returns the engine's configuration from them.
func (c *serveCommand) check(args []string) (engine.Config, error) {
	if len(args) != 0 {
		return engine.Config{}, usagef("serve takes no arguments, got %q", args)
	}
	if err := shardcounter.ValidateShards(c.defaultShards); err != nil {
		return engine.Config{}, usagef("--default-shards: %s", shardcounter.ErrorMessage(err))
	}
	durability, err := engine.ParseDurability(c.durability)
	if err != nil || c.durability == "" {
		return engine.Config{}, usagef("--durability is %q: give durable or async", c.durability)
	}
	if c.flushInterval <= 0 {
		return engine.Config{}, usagef("--flush-interval is %v: give a positive duration such as 10ms", c.flushInterval)
	}
	if c.dedupeWindow <= 0 {
		return engine.Config{}, usagef("--dedupe-window is %v: give a positive duration such as 24h", c.dedupeWindow)
	}
	if c.maxBody < 1 {
		return engine.Config{}, usagef("--max-body is %d: give a size in bytes, at least 1", c.maxBody)
	}
	if c.maxBodyTotal < c.maxBody {
		return engine.Config{}, usagef("--max-body-total is %d, less than --max-body %d: give at least --max-body, or no body of that size is ever taken", c.maxBodyTotal, c.maxBody)
	}
	if c.respTimeout <= 0 {
		return engine.Config{}, usagef("--resp-read-timeout is %v: give a positive duration such as 10s", c.respTimeout)
	}
	if c.respClients < 1 {
		return engine.Config{}, usagef("--resp-max-clients is %d: give at least 1", c.respClients)
	}
	if c.respInputMem < resp.DefaultMaxBuffer {
		return engine.Config{}, usagef("--resp-max-input-memory is %d: give at least %d, the largest command one connection may send", c.respInputMem, resp.DefaultMaxBuffer)
	}
	if c.store == "" {
		return engine.Config{}, usagef("--store is empty: give a DSN such as %s", DefaultStore)
	}
	if c.reqTimeout <= 0 {
		return engine.Config{}, usagef("--request-timeout is %v: give a positive duration such as 5s", c.reqTimeout)
	}
	if c.bodyTimeout <= 0 {
		return engine.Config{}, usagef("--body-timeout is %v: give a positive duration such as 10s", c.bodyTimeout)
	}
	if c.maxConcurrent < 1 {
		return engine.Config{}, usagef("--max-concurrent is %d: give at least 1", c.maxConcurrent)
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return engine.Config{}, usagef("--tls-cert and --tls-key go together: give both, or neither for plain HTTP")
	}
	if err := c.checkTLS(); err != nil {
		return engine.Config{}, err
	}
	if err := c.checkRLS(); err != nil {
		return engine.Config{}, err
	}
	if c.maxStaleness <= 0 {
		return engine.Config{}, usagef("--max-staleness is %v: give a positive duration such as 1s", c.maxStaleness)
	}
	if c.cacheSize < 1 {
		return engine.Config{}, usagef("--cache-size is %d: give at least 1", c.cacheSize)
	}
	if c.readsInFlight < 1 {
		return engine.Config{}, usagef("--max-reads-in-flight is %d: give at least 1", c.readsInFlight)
	}
	return engine.Config{
		DefaultShards:    c.defaultShards,
		NoAutoCreate:     !c.autoCreate,
		Durability:       durability,
		FlushInterval:    c.flushInterval,
		DedupeWindow:     c.dedupeWindow,
		MaxStaleness:     c.maxStaleness,
		CacheSize:        c.cacheSize,
		MaxReadsInFlight: c.readsInFlight,
		// Half the request deadline: a writer that queues just after a
		// commit started waits for that commit and then its own, so both
		// fit within its deadline and it hears the store's answer
		// (unavailable: not applied) rather than its own deadline's
		// (outcome unknown).
		FlushTimeout: c.reqTimeout / 2,
	}, nil
}

// respServer returns the Redis protocol server over eng, as the flags
// configure it, with eng's configuration cfg.
func (c *serveCommand) respServer(eng *engine.Engine, cfg engine.Config, users *acl.Users, guard *authtoken.Guard, log *slog.Logger, tc *tls.Config) *respserver.Server {
	return respserver.New(eng, respserver.Options{
		TLSConfig:      tc,
		Users:          users,
		Audit:          &acl.Audit{Logger: log},
		AuthGuard:      guard,
		ReadTimeout:    c.respTimeout,
		MaxClients:     c.respClients,
		MaxInputMemory: c.respInputMem,
		CommandTimeout: c.reqTimeout,
		ConnGoroutines: c.respGoroutine != nil && *c.respGoroutine,
		EventLoop:      c.respGoroutine != nil && !*c.respGoroutine,
		AllowFlush:     c.respFlush,
		Engine:         eng.Stats(),
		Durability:     cfg.Durability,
		Tracer:         cfg.Tracer,
		Version:        Version(),
		Logger:         log,
	})
}

// authGuard returns the Guard of both front ends, so that failed
// authentications from an address count together whichever protocol they
// come by; it logs each address's burst once.
func authGuard(log *slog.Logger) *authtoken.Guard {
	return &authtoken.Guard{OnBurst: func(addr string, p authtoken.Protocol, n int64) {
		log.Warn("failed authentications: slowing this address down until it stops failing for 10s",
			"addr", addr, "protocol", p.String(), "failures", n)
	}}
}

// reload handles SIGHUP: it rereads the users file, the token file and
// the certificate. A file that cannot be read or parsed is logged and the
// previous users or certificate stay in force, so a botched edit never
// turns authentication off or breaks TLS.
func (c *serveCommand) reload(log *slog.Logger, api *shttp.Server, rs *respserver.Server, cert *atomic.Pointer[tls.Certificate]) {
	if c.authTokenFile == "" && c.usersFile == "" && c.tlsCert == "" && c.respTLSCert == "" && c.tlsClientCA == "" && c.rls.config == "" {
		log.Info("SIGHUP: nothing to reload (no --auth-token-file, no --users-file, no --tls-cert, no --resp-tls-cert, no --tls-client-ca, no --rls-config)")
		return
	}
	what := "auth tokens"
	if c.usersFile != "" {
		what = "users"
	}
	if c.authTokenFile != "" || c.usersFile != "" {
		if users, err := c.readUsers(); err != nil {
			log.Error("SIGHUP: keeping the previous "+what, "error", err)
		} else {
			api.SetUsers(users)
			if rs != nil {
				rs.SetUsers(users)
			}
			log.Info("SIGHUP: "+what+" reloaded", "users", len(users.List()))
		}
	}
	if c.tlsCert != "" {
		if err := c.loadCert(cert); err != nil {
			log.Error("SIGHUP: keeping the previous TLS certificate", "error", err)
		} else {
			log.Info("SIGHUP: TLS certificate reloaded", "cert", c.tlsCert)
		}
	}
}

// loadCert reads --tls-cert and --tls-key into cert.
func (c *serveCommand) loadCert(cert *atomic.Pointer[tls.Certificate]) error {
	kp, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
	if err != nil {
		return fmt.Errorf("cannot load --tls-cert %s and --tls-key %s: %v: give PEM files of a certificate chain and its private key", c.tlsCert, c.tlsKey, err)
	}
	cert.Store(&kp)
	return nil
}

// readUsers reads the users of --users-file and --auth-token-file, whose
// tokens are the passwords of the user default (acl.Users.WithTokens);
// nil when neither is given.
func (c *serveCommand) readUsers() (*acl.Users, error) {
	var tokens []string
	if c.authTokenFile != "" {
		var err error
		if tokens, err = readTokens(c.authTokenFile); err != nil {
			return nil, err
		}
	}
	if c.usersFile == "" {
		if tokens == nil {
			return nil, nil
		}
		return acl.FromTokens(tokens), nil
	}
	b, err := os.ReadFile(c.usersFile)
	if err != nil {
		return nil, fmt.Errorf("cannot read --users-file: %w", err)
	}
	users, err := acl.Parse(b, permissionTable())
	if err == nil && tokens != nil {
		users, err = users.WithTokens(tokens)
	}
	if err != nil {
		return nil, fmt.Errorf("--users-file %s: %s", c.usersFile, shardcounter.ErrorMessage(err))
	}
	return users, nil
}

// permissionTable is every RESP command's and HTTP route's categories, by
// the names +command rules give them.
func permissionTable() map[string]acl.Category {
	t := respserver.Permissions()
	maps.Copy(t, shttp.Permissions())
	return t
}

// readTokens reads an --auth-token-file (see http.ParseTokens).
func readTokens(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read --auth-token-file: %w", err)
	}
	tokens, err := shttp.ParseTokens(b)
	if err != nil {
		return nil, fmt.Errorf("--auth-token-file %s: %s", path, shardcounter.ErrorMessage(err))
	}
	return tokens, nil
}

// newLogger returns the server's logger on w in the given format and at
// the given level.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level is %q: give debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("--log-format is %q: give text or json", format)
}

// chooseStore sets the store of serve without --store or
// SHARDCOUNTER_STORE (defaultStore), and warns when that is the bolt file
// of an earlier version's default.
func (c *serveCommand) chooseStore(log *slog.Logger) {
	if c.storeGiven {
		return
	}
	var legacy bool
	if c.store, legacy = defaultStore(exists); legacy {
		log.Warn("serving the bolt file of an earlier version's default store: the default is now "+DefaultStore+
			"; to move your data there, stop the server and run: "+MoveLegacyCommand+
			" (then move the bolt file away; until you do, serve keeps serving it)", "store", c.store)
	}
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// loopback reports whether addr can be reached only from this machine.
// An unspecified address (0.0.0.0, ::) listens on every interface.
func loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
