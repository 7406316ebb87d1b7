package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/dsn"
	"github.com/shardcounter/shardcounter/internal/bench"
)

// benchCommand is `shardcounter bench`: concurrent clients against fresh
// counters through shardcounter's paths over a store (naive, engine,
// http) and against the peers users would run instead (Redis INCR, a
// PostgreSQL UPDATE, a bare HTTP handler), in one session; a table with
// ratios to each peer on stdout and, with --json and --svg, SPEC.md's
// report and a chart.
//
// The http path, unless --server names a running server, serves the API
// from this process: the same http.Server over a durable engine that
// `serve` runs, on a loopback port. The http-bare peer is served the same
// way and both are driven by the same load generator, so their ratio is
// the cost of shardcounter's server, engine and store and nothing else.
// A separate server process would not give the server more of the
// machine: client and server share its cores either way.
type benchCommand struct {
	m            *Main
	store        string
	server       string
	tokenFile    string
	paths        stringList
	peers        stringList
	peerRedis    stringList
	peerPostgres stringList
	shards       string
	inFlight     string
	clients      int
	counters     int
	zipf         float64
	readRatio    float64
	readCons     string
	duration     time.Duration
	jsonFile     string
	svgFile      string
	title        string
	cpuProfile   string
	prog         *progress // nil when stderr is not a terminal
}

func newBenchCommand(m *Main) command { return &benchCommand{m: m} }

// stringList is a flag that may repeat.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func (c *benchCommand) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.store, "store", "", "the store of the naive, engine and http paths, as a `DSN` (default: a bolt file in a temporary directory, removed after)")
	fs.StringVar(&c.server, "server", "", "http path: drive the running server at this `URL` instead of starting one on --store")
	fs.StringVar(&c.tokenFile, "token-file", "", "with --server: send the bearer token in this `PATH`")
	fs.Var(&c.paths, "path", "`PATH` to measure: naive (the seed algorithm, one store write per increment), engine (group commit, in process), http (the HTTP API end to end) or peer (the peers of --peer, or all that have a server); repeat for several (default naive)")
	fs.Var(&c.peers, "peer", "`PEER` to measure with the same clients and duration: redis-incr (INCR on one key), postgres-update (single-row UPDATE) or http-bare (a net/http handler doing one atomic add); repeat for several")
	fs.Var(&c.peerRedis, "peer-redis", "redis-incr's server, a redis:// `URL` (default --store when it is one); repeat to measure several, such as appendfsync always and everysec")
	fs.Var(&c.peerPostgres, "peer-postgres", "postgres-update's database, a PostgreSQL `DSN` (default --store when it is one); repeat for several")
	fs.StringVar(&c.shards, "shards", "1,4,16,64", "comma-separated shard counts, one run each")
	fs.StringVar(&c.inFlight, "max-in-flight", "", "for --path engine: comma-separated values of the engine's MaxInFlight (flushes running at once), one run each (default: the engine's default)")
	fs.IntVar(&c.clients, "clients", bench.DefaultClients, "concurrent clients, one operation in flight each")
	fs.IntVar(&c.counters, "counters", bench.DefaultCounters, "counters written; 1 is one hot counter")
	fs.Float64Var(&c.zipf, "zipf", 0, "with --counters > 1, pick counters with this Zipf exponent `S` > 1, such as 1.1 (default: uniformly)")
	fs.Float64Var(&c.readRatio, "read-ratio", 0, "the `FRACTION` of operations that read instead of write, from 0 to 1")
	fs.StringVar(&c.readCons, "read-consistency", "strong", "the reads' consistency: strong or cached (the engine's rollup; the naive path and peers always read strong)")
	fs.DurationVar(&c.duration, "duration", bench.DefaultDuration, "length of each run")
	fs.StringVar(&c.jsonFile, "json", "", "also write the report as JSON to this `FILE`")
	fs.StringVar(&c.svgFile, "svg", "", "also draw throughput against shard count, with the peers as reference lines, as SVG to this `FILE`")
	fs.StringVar(&c.title, "title", "", "the chart's title (default: the workload)")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run, load generator and in-process servers alike, to this `FILE`, for go tool pprof")
}

func (c *benchCommand) run(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q: bench takes only flags", args[0])
	}
	shards, err := parseShardList(c.shards)
	if err != nil {
		return err
	}
	var inFlight []int
	if c.inFlight != "" {
		for _, f := range strings.Split(c.inFlight, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return usagef("--max-in-flight %q: give comma-separated positive counts, as in 1,2,4", c.inFlight)
			}
			inFlight = append(inFlight, n)
		}
	}
	switch {
	case c.clients < 1 || c.counters < 1 || c.duration <= 0:
		return usagef("--clients, --counters and --duration must be positive")
	case c.zipf != 0 && !(c.zipf > 1):
		return usagef("--zipf %v: give an exponent above 1, such as 1.1, or 0 for uniform", c.zipf)
	case !(c.readRatio >= 0 && c.readRatio <= 1):
		return usagef("--read-ratio %v: give a fraction from 0 to 1, such as 0.9", c.readRatio)
	case c.readCons != "strong" && c.readCons != "cached":
		return usagef("--read-consistency %q: give strong or cached", c.readCons)
	case c.tokenFile != "" && c.server == "":
		return usagef("--token-file goes with --server")
	}
	paths := []string(c.paths)
	if len(paths) == 0 && len(c.peers) == 0 {
		paths = []string{bench.PathNaive}
	}
	runPeers := len(c.peers) > 0
	var storePaths []string
	for _, p := range paths {
		switch p {
		case bench.PathNaive, bench.PathEngine, bench.PathHTTP:
			if !slices.Contains(storePaths, p) {
				storePaths = append(storePaths, p)
			}
		case bench.PathPeer:
			runPeers = true
		default:
			return usagef("--path %q is unknown: use naive, engine, http or peer", p)
		}
	}
	if c.server != "" && slices.ContainsFunc(storePaths, func(p string) bool { return p != bench.PathHTTP }) {
		return usagef("--server is the http path's target: measure naive and engine in another run, on --store")
	}

	storeDSN := c.store
	needStore := len(storePaths) > 0 && c.server == ""
	kind := ""
	if storeDSN != "" {
		if kind, err = dsn.Scheme(storeDSN); err != nil {
			return usagef("--store: %s", errorText(err))
		}
	}
	peers, err := c.peerList(kind, len(c.peers) == 0 && runPeers)
	if err != nil {
		return err
	}
	var token string
	if c.tokenFile != "" {
		tokens, err := readTokens(c.tokenFile)
		if err != nil {
			return err
		}
		token = tokens[0]
	}

	cfg := bench.Config{
		Server: c.server, Token: token,
		Clients: c.clients, Counters: c.counters, Duration: c.duration, Shards: shards,
		MaxInFlight: inFlight,
		Zipf:        c.zipf, ReadRatio: c.readRatio, ReadConsistency: shardcounter.Consistency(c.readCons),
	}
	if c.server != "" {
		cfg.StoreName = "server"
	}
	total := len(peers)
	for _, p := range storePaths {
		if p == bench.PathEngine && len(inFlight) > 0 {
			total += len(shards) * len(inFlight)
			continue
		}
		total += len(shards)
	}
	if c.prog = newProgress(c.m.Stderr, total); c.prog != nil {
		cfg.Progress = c.prog.update
		defer c.prog.done()
	}

	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	runs, err := c.runPaths(ctx, cfg, storeDSN, kind, needStore, storePaths)
	if err != nil {
		c.report(runs)
		return err
	}
	if len(peers) > 0 {
		rs, err := bench.Peers(ctx, cfg, peers)
		runs = append(runs, rs...)
		if err != nil {
			c.report(runs)
			return err
		}
	}
	if err := c.report(runs); err != nil {
		return err
	}
	if c.jsonFile != "" {
		if err := writeFile(c.jsonFile, bench.NewReport(runs).WriteJSON); err != nil {
			return err
		}
	}
	if c.svgFile != "" {
		title := c.title
		if title == "" {
			title = c.workload()
		}
		if err := writeFile(c.svgFile, func(w io.Writer) error { return bench.WriteSVG(w, title, runs) }); err != nil {
			return err
		}
	}
	return nil
}

// runPaths measures shardcounter's paths. It closes the store before it
// returns, so that the peers measured next do not compete with an idle
// pool for the server's connections (PostgreSQL's max_connections).
func (c *benchCommand) runPaths(ctx context.Context, cfg bench.Config, storeDSN, kind string, needStore bool, paths []string) ([]bench.Run, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	if needStore {
		if storeDSN == "" {
			dir, err := os.MkdirTemp("", "shardcounter-bench")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			storeDSN, kind = "bolt:"+filepath.Join(dir, "bench.db"), dsn.Bolt
		}
		store, err := dsn.Open(ctx, storeDSN)
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", dsn.Redact(storeDSN), err)
		}
		defer store.Close()
		cfg.Store, cfg.StoreName = store, kind
	}
	settings := storeSettings(ctx, kind, storeDSN)
	runs, err := bench.Paths(ctx, cfg, paths...)
	for i := range runs {
		runs[i].Settings = settings
	}
	return runs, err
}

// report prints the table and the ratios to the peers.
func (c *benchCommand) report(runs []bench.Run) error {
	if c.prog != nil {
		c.prog.done() // the table starts on a clean line
	}
	if len(runs) == 0 {
		return nil
	}
	fmt.Fprintf(c.m.Stdout, "# %s\n", c.workload())
	if err := bench.WriteTable(c.m.Stdout, runs); err != nil {
		return err
	}
	return bench.WriteRatios(c.m.Stdout, runs)
}

// workload describes the load in words, for the table's heading and the
// chart's default title.
func (c *benchCommand) workload() string {
	var b strings.Builder
	if c.counters == 1 {
		b.WriteString("one hot counter")
	} else {
		fmt.Fprintf(&b, "%d counters", c.counters)
		if c.zipf > 1 {
			fmt.Fprintf(&b, " (Zipf s=%g)", c.zipf)
		} else {
			b.WriteString(" (uniform)")
		}
	}
	if c.readRatio > 0 {
		fmt.Fprintf(&b, ", %g%% %s reads", c.readRatio*100, c.readCons)
	} else {
		b.WriteString(", +1 writes")
	}
	fmt.Fprintf(&b, ", %d clients, %v per run", c.clients, c.duration)
	return b.String()
}

// peerList resolves --peer and its servers. With all set (--path peer and
// no --peer), every peer that has a server is measured: http-bare always.
func (c *benchCommand) peerList(storeKind string, all bool) ([]bench.Peer, error) {
	redisURLs, pgDSNs := []string(c.peerRedis), []string(c.peerPostgres)
	if len(redisURLs) == 0 && storeKind == dsn.Redis {
		redisURLs = []string{c.store}
	}
	if len(pgDSNs) == 0 && storeKind == dsn.Postgres {
		pgDSNs = []string{c.store}
	}
	kinds := []string(c.peers)
	if all {
		if len(redisURLs) > 0 {
			kinds = append(kinds, bench.PeerRedisIncr)
		}
		if len(pgDSNs) > 0 {
			kinds = append(kinds, bench.PeerPostgresUpdate)
		}
		kinds = append(kinds, bench.PeerHTTPBare)
	}
	var peers []bench.Peer
	for _, k := range kinds {
		switch k {
		case bench.PeerRedisIncr:
			if len(redisURLs) == 0 {
				return nil, usagef("--peer redis-incr needs a Redis server: give --peer-redis redis://HOST:PORT, or a redis:// --store")
			}
			for _, u := range redisURLs {
				if kind, err := dsn.Scheme(u); err != nil || kind != dsn.Redis {
					return nil, usagef("--peer-redis %q: give a redis://HOST:PORT URL", dsn.Redact(u))
				}
				peers = append(peers, bench.Peer{Kind: k, Target: u})
			}
		case bench.PeerPostgresUpdate:
			if len(pgDSNs) == 0 {
				return nil, usagef("--peer postgres-update needs a database: give --peer-postgres postgres://..., or a postgres:// --store")
			}
			for _, d := range pgDSNs {
				peers = append(peers, bench.Peer{Kind: k, Target: d})
			}
		case bench.PeerHTTPBare:
			peers = append(peers, bench.Peer{Kind: k})
		default:
			return nil, usagef("--peer %q is unknown: use redis-incr, postgres-update or http-bare", k)
		}
	}
	return peers, nil
}

// storeSettings returns the store's version and the settings that bound
// its write throughput, for the report; nil when they cannot be read,
// since the figures stand without them.
func storeSettings(ctx context.Context, kind, storeDSN string) map[string]string {
	switch kind {
	case dsn.Postgres:
		// A pool, not pgx.Connect: the DSN may carry pgxpool's parameters.
		cfg, err := pgxpool.ParseConfig(storeDSN)
		if err != nil {
			return nil
		}
		cfg.MaxConns = 1
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil
		}
		defer pool.Close()
		s, _ := bench.PostgresSettings(ctx, pool)
		return s
	case dsn.Redis:
		opts, err := goredis.ParseURL(storeDSN)
		if err != nil {
			return nil
		}
		rc := goredis.NewClient(opts)
		defer rc.Close()
		s, _ := bench.RedisSettings(ctx, rc)
		return s
	}
	return nil
}

// writeFile creates path and writes it with write.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// parseShardList parses "1,4,16,64".
func parseShardList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 {
			return nil, usagef("--shards %q: give comma-separated shard counts from 1 to 1024, as in 1,4,16,64", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// progress is the progress line on stderr: one line, rewritten in place,
// naming the run, its time and its throughput so far. It is shown only
// when stderr is a terminal, so logs and pipes get no control characters.
type progress struct {
	w     *os.File
	total int
	runs  []string
}

func newProgress(w io.Writer, total int) *progress {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return &progress{w: f, total: total}
}

func (p *progress) update(pr bench.Progress) {
	if len(p.runs) == 0 || p.runs[len(p.runs)-1] != pr.Run {
		p.runs = append(p.runs, pr.Run)
	}
	rate := 0.0
	if s := pr.Elapsed.Seconds(); s > 0 {
		rate = float64(pr.Ops) / s
	}
	fmt.Fprintf(p.w, "\r\033[Krun %d/%d %s  %.0fs/%.0fs  %d ops  %.0f ops/s",
		len(p.runs), p.total, pr.Run, pr.Elapsed.Seconds(), pr.Duration.Seconds(), pr.Ops, rate)
}

func (p *progress) done() { fmt.Fprint(p.w, "\r\033[K") }
