package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bench"
	"github.com/shardcounter/shardcounter/dsn"
)

// benchCommand is `shardcounter bench`: concurrent clients against fresh
// counters through shardcounter's paths over a store (naive, engine,
// http, resp) and against the peers users would run instead (Redis INCR
// or SADD, a PostgreSQL UPDATE or INSERT, a bare HTTP handler), in one
// session; a table with ratios to each peer on stdout and, with --json
// and --svg, SPEC.md's report and a chart.
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
	fs           *flag.FlagSet
	store        string
	server       string
	tokenFile    string
	resp         string
	paths        stringList
	peers        stringList
	peerRedis    stringList
	peerPostgres stringList
	peerFS       string
	pace         optionalDuration
	shards       string
	inFlight     string
	readsFlight  int
	staleness    time.Duration
	cacheSize    int
	clients      int
	counters     int
	zipf         float64
	workload     string
	last         time.Duration
	readRatio    float64
	readBatch    int
	readCons     string
	kinds        stringList
	members      int
	decrRatio    float64
	min, max     optionalInt
	window       string
	prefill      bool
	keep         bool
	pipeline     int
	duration     time.Duration
	jsonFile     string
	svgFile      string
	title        string
	cpuProfile   string
	memProfile   string
	prog         *progress // nil when stderr is not a terminal
}

func newBenchCommand(m *Main) command { return &benchCommand{m: m} }

// stringList is a flag that may repeat.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// optionalDuration is a duration flag that knows whether it was given.
type optionalDuration struct{ d *time.Duration }

func (o *optionalDuration) String() string {
	if o == nil || o.d == nil {
		return ""
	}
	return o.d.String()
}

func (o *optionalDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("%q is not a duration of 0 or more, such as 1s or 250ms", s)
	}
	o.d = &d
	return nil
}

// optionalInt is an int64 flag that knows whether it was given.
type optionalInt struct {
	v   int64
	set bool
}

func (o *optionalInt) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.FormatInt(o.v, 10)
}

func (o *optionalInt) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not a whole number from %d to %d", s, math.MinInt64, math.MaxInt64)
	}
	o.v, o.set = v, true
	return nil
}

func (o *optionalInt) ptr() *int64 {
	if !o.set {
		return nil
	}
	v := o.v
	return &v
}

func (c *benchCommand) flags(fs *flag.FlagSet) {
	c.fs = fs
	fs.StringVar(&c.store, "store", "", "the store of the naive, engine and http paths, as a `DSN` (default: a Pebble store in a temporary directory, removed after)")
	fs.StringVar(&c.server, "server", "", "http path: drive the running server at this `URL` instead of starting one on --store")
	fs.StringVar(&c.tokenFile, "token-file", "", "with --server or --resp: send the bearer token in this `PATH` (RESP: as AUTH)")
	fs.StringVar(&c.resp, "resp", "", "resp path: drive the RESP port of a running `shardcounter serve --resp-listen` at this `HOST:PORT` instead of starting one on --store")
	fs.Var(&c.paths, "path", "`PATH` to measure: naive (the seed algorithm, one store write per increment), engine (group commit, in process), http (the HTTP API end to end), resp (a RESP port through go-redis) or peer (the peers of --peer, or all that have a server); repeat for several (default naive)")
	fs.Var(&c.peers, "peer", "`PEER` to measure with the same clients, duration and workload: redis-incr (INCR of one key per counter), postgres-update (UPDATE of one row per counter), redis-sadd and postgres-insert (for --kind distinct: SADD, INSERT ... ON CONFLICT DO NOTHING) or http-bare (a net/http handler doing one atomic add); repeat for several")
	fs.Var(&c.peerRedis, "peer-redis", "the Redis peers' server, a redis:// `URL` (default --store when it is one); repeat to measure several, such as appendfsync always and everysec")
	fs.Var(&c.peerPostgres, "peer-postgres", "the PostgreSQL peers' database, a PostgreSQL `DSN` (default --store when it is one); repeat for several")
	fs.StringVar(&c.peerFS, "peer-firestore", "", "the firestore-increment peer's database, a firestore://PROJECT[/DATABASE] `DSN` (default --store when it is one)")
	fs.Var(&c.pace, "shard-write-interval", "the engines' pace of commits per shard document, a `DURATION` (0: none) (default: the store's own, 1s on Firestore, none elsewhere)")
	fs.StringVar(&c.shards, "shards", "1,4,16,64", "comma-separated shard counts, one run each")
	fs.IntVar(&c.readsFlight, "max-reads-in-flight", 0, "the engines' MaxReadsInFlight: store reads fetching cache misses at once, and as many serving strong reads (default: the engine's default)")
	fs.DurationVar(&c.staleness, "max-staleness", 0, "the engines' MaxStaleness: how old a cached read may be (default: the engine's, 1s)")
	fs.IntVar(&c.cacheSize, "cache-size", 0, "the engines' CacheSize: the counters whose cached readings are kept (default: the engine's, 100000)")
	fs.StringVar(&c.inFlight, "max-in-flight", "", "for --path engine: comma-separated values of the engine's MaxInFlight (flushes running at once), one run each (default: the engine's default)")
	fs.IntVar(&c.clients, "clients", bench.DefaultClients, "concurrent clients, one round trip in flight each")
	fs.IntVar(&c.counters, "counters", bench.DefaultCounters, "counters written; 1 is one hot counter")
	fs.Float64Var(&c.zipf, "zipf", 0, "with --counters > 1, pick counters with this Zipf exponent `S` > 1, such as 1.1 (default: uniformly)")
	fs.StringVar(&c.workload, "workload", bench.WorkloadSingle, "`W`: single (each operation writes or reads one counter), timeline (each operation writes one counter or reads --read-batch counters at once), ranking (writes with and without a ranking of their counters, top-10 reads, and the Redis sorted-set peer; docs/RANKINGS.md) or limit (rate-limit takes on one hot key through CL.THROTTLE and HTTP, and two Redis limiters; docs/LIMITS.md)")
	fs.DurationVar(&c.last, "last", 0, "--workload ranking: rank by the sum of the trailing `DURATION` (whole minutes, up to 1h) over counters with 1-minute buckets, instead of by value")
	fs.Float64Var(&c.readRatio, "read-ratio", 0, "the `FRACTION` of operations that read instead of write, from 0 to 1 (default 0; 0.9 for --workload timeline)")
	fs.IntVar(&c.readBatch, "read-batch", bench.DefaultReadBatch, "--workload timeline: the counters each read asks for at once, 1 to 1000")
	fs.StringVar(&c.readCons, "read-consistency", "", "the reads' consistency: strong or cached, the engine's rollup; the naive and resp paths and the peers always read strong (default strong; cached for --workload timeline)")
	fs.Var(&c.kinds, "kind", "the counters' `KIND`: sum (writes add 1) or distinct (writes add a member drawn from --members); repeat to run each path on both (default sum)")
	fs.IntVar(&c.members, "members", bench.DefaultMembers, "--kind distinct: the population members are drawn from, uniformly; smaller means more re-adds")
	fs.Float64Var(&c.decrRatio, "decr-ratio", 0, "the `FRACTION` of writes that subtract 1 (remove the member, for --kind distinct) (default 0; 0.5 with --min or --max, so the bound is met)")
	fs.Var(&c.min, "min", "also run each path on counters with this floor `V` (≤ 0), next to the plain counters")
	fs.Var(&c.max, "max", "also run each path on counters with this ceiling `V` (≥ 0), next to the plain counters")
	fs.StringVar(&c.window, "window", "", "also run each path on counters with this window, `BUCKET:RETENTION` such as 1m:1d, next to the plain counters")
	fs.BoolVar(&c.prefill, "prefill", false, "before each run, write once to every counter in batches of 1000, creating them, so the run and its memory figures cover all --counters")
	fs.BoolVar(&c.keep, "keep-counters", false, "leave each run's counters in the store instead of deleting them one by one after it: for a store thrown away after the benchmark (a million deletes take minutes)")
	fs.IntVar(&c.pipeline, "pipeline", 1, "for the resp path and the Redis peers: commands sent per round trip, 1 to 1000")
	fs.DurationVar(&c.duration, "duration", bench.DefaultDuration, "length of each run")
	fs.StringVar(&c.jsonFile, "json", "", "also write the report as JSON to this `FILE`")
	fs.StringVar(&c.svgFile, "svg", "", "also draw throughput against shard count, with the peers as reference lines, as SVG to this `FILE`")
	fs.StringVar(&c.title, "title", "", "the chart's title (default: the workload)")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run, load generator and in-process servers alike, to this `FILE`, for go tool pprof")
	fs.StringVar(&c.memProfile, "memprofile", "", "write a heap profile to this `FILE` as each run's load ends, before its counters are read back (a later run's replaces an earlier's), load generator and in-process servers alike, for go tool pprof; and the Go runtime's memory on stderr")
}

// given reports whether the flag name was on the command line.
func (c *benchCommand) given(name string) bool {
	found := false
	c.fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// runError is a run's error as the bench library wrote it: the run, the
// step and the store's error, where errorText would show the store's
// message alone.
func runError(err error) error { return errors.New(err.Error()) }

// checkHostPort checks a HOST:PORT address.
func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("give HOST:PORT, such as 127.0.0.1:6380")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
		return errors.New("give HOST:PORT with a host and a port from 1 to 65535, such as 127.0.0.1:6380")
	}
	return nil
}

func (c *benchCommand) run(ctx context.Context, args []string) error {
	switch c.workload {
	case bench.WorkloadRanking:
		return c.runRanking(ctx, args)
	case bench.WorkloadLimit:
		return c.runLimit(ctx, args)
	}
	p, err := c.plan(args)
	if err != nil {
		return err
	}
	cfg := p.cfg
	if p.tokenFile != "" {
		tokens, err := readTokens(p.tokenFile)
		if err != nil {
			return err
		}
		cfg.Token = tokens[0]
	}
	total := len(p.peers)
	for _, path := range p.storePaths {
		n := len(cfg.Shards) * len(cfg.Variants)
		if path == bench.PathEngine && len(cfg.MaxInFlight) > 0 {
			n *= len(cfg.MaxInFlight)
		}
		total += n
	}
	if c.prog = newProgress(c.m.Stderr, total); c.prog != nil {
		cfg.Progress = c.prog.update
		defer c.prog.done()
	}

	if c.memProfile != "" {
		cfg.AfterLoad = c.writeHeapProfile
	}
	stopProfile, err := c.startCPUProfile()
	if err != nil {
		return err
	}
	defer stopProfile()
	runs, err := c.runPaths(ctx, cfg, p.storeDSN, p.storeKind, p.needStore, p.storePaths)
	if err != nil {
		c.report(runs)
		return runError(err)
	}
	if len(p.peers) > 0 {
		rs, err := bench.Peers(ctx, cfg, p.peers)
		runs = append(runs, rs...)
		if err != nil {
			c.report(runs)
			return runError(err)
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
			title = c.workloadText()
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
			storeDSN, kind = "pebble:"+filepath.Join(dir, "pebble"), dsn.Pebble
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
		if runs[i].Store != "server" { // not a server of its own
			runs[i].Settings = settings
		}
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
	fmt.Fprintf(c.m.Stdout, "# %s\n", c.workloadText())
	if err := bench.WriteTable(c.m.Stdout, runs); err != nil {
		return err
	}
	return bench.WriteRatios(c.m.Stdout, runs)
}

// workloadText describes the load in words, for the table's heading and
// the chart's default title.
func (c *benchCommand) workloadText() string {
	var b strings.Builder
	if c.workload == bench.WorkloadLimit {
		fmt.Fprintf(&b, "takes of cost 1 from one hot key, under limits far above the load (every take admitted), %d clients, %v per run", c.clients, c.duration)
		return b.String()
	}
	what := "counter"
	switch {
	case len(c.kindList()) > 1:
		what = "sum and distinct counter"
	case c.hasKind(shardcounter.KindDistinct):
		what = "distinct counter"
	}
	if c.counters == 1 {
		fmt.Fprintf(&b, "one hot %s", what)
	} else {
		fmt.Fprintf(&b, "%d %ss", c.counters, what)
		if c.zipf > 1 {
			fmt.Fprintf(&b, " (Zipf s=%g)", c.zipf)
		} else {
			b.WriteString(" (uniform)")
		}
	}
	if c.prefill {
		b.WriteString(", all prefilled")
	}
	if c.min.set || c.max.set || c.window != "" {
		b.WriteString(", plain")
		if c.min.set || c.max.set {
			b.WriteString(" and " + bench.Bounded(c.min.ptr(), c.max.ptr()).Name)
		}
		if c.window != "" {
			b.WriteString(" and window=" + c.window)
		}
	}
	var writes []string
	if c.hasKind(shardcounter.KindSum) {
		if c.decrRatio > 0 {
			writes = append(writes, fmt.Sprintf("+1/−1 writes (%g%% −1)", c.decrRatio*100))
		} else {
			writes = append(writes, "+1 writes")
		}
	}
	if c.hasKind(shardcounter.KindDistinct) {
		if c.decrRatio > 0 {
			writes = append(writes, fmt.Sprintf("adds and %g%% removes of %d members", c.decrRatio*100, c.members))
		} else {
			writes = append(writes, fmt.Sprintf("adds of %d members", c.members))
		}
	}
	write := strings.Join(writes, " or ")
	switch {
	case c.workload == bench.WorkloadTimeline:
		fmt.Fprintf(&b, ", timeline: %g%% %s reads of %d counters, %s", c.readRatio*100, c.readCons, min(c.readBatch, c.counters), write)
	case c.readRatio > 0:
		fmt.Fprintf(&b, ", %g%% %s reads, %s", c.readRatio*100, c.readCons, write)
	default:
		b.WriteString(", " + write)
	}
	if c.pipeline > 1 {
		fmt.Fprintf(&b, ", pipelined %d deep", c.pipeline)
	}
	fmt.Fprintf(&b, ", %d clients, %v per run", c.clients, c.duration)
	return b.String()
}

// peerList resolves --peer and its servers. With all set (--path peer and
// no --peer), every peer of the counters' kind that has a server is
// measured, and http-bare always.
func (c *benchCommand) peerList(cfg bench.Config, storeKind string, all bool) ([]bench.Peer, error) {
	redisURLs, pgDSNs, fsDSN := []string(c.peerRedis), []string(c.peerPostgres), c.peerFS
	if fsDSN == "" && storeKind == dsn.Firestore {
		fsDSN = c.store
	}
	if len(redisURLs) == 0 && storeKind == dsn.Redis {
		redisURLs = []string{c.store}
	}
	if len(pgDSNs) == 0 && storeKind == dsn.Postgres {
		pgDSNs = []string{c.store}
	}
	kinds := []string(c.peers)
	if all {
		for _, k := range c.kindList() {
			redisPeer, pgPeer := bench.PeerRedisIncr, bench.PeerPostgresUpdate
			if k == shardcounter.KindDistinct {
				redisPeer, pgPeer = bench.PeerRedisSadd, bench.PeerPostgresInsert
			}
			if len(redisURLs) > 0 {
				kinds = append(kinds, redisPeer)
			}
			if len(pgDSNs) > 0 && cfg.Pipeline == 1 {
				kinds = append(kinds, pgPeer)
			}
		}
		if cfg.Pipeline == 1 {
			kinds = append(kinds, bench.PeerHTTPBare)
		}
	}
	var peers []bench.Peer
	for _, k := range kinds {
		if err := bench.PeerFits(k, cfg); err != nil {
			return nil, usagef("--peer: %s", strings.TrimPrefix(err.Error(), "bench: "))
		}
		switch k {
		case bench.PeerRedisIncr, bench.PeerRedisSadd:
			if len(redisURLs) == 0 {
				return nil, usagef("--peer %s needs a Redis server: give --peer-redis redis://HOST:PORT, or a redis:// --store", k)
			}
			for _, u := range redisURLs {
				if kind, err := dsn.Scheme(u); err != nil || kind != dsn.Redis {
					return nil, usagef("--peer-redis %q: give a redis://HOST:PORT URL", dsn.Redact(u))
				}
				peers = append(peers, bench.Peer{Kind: k, Target: u})
			}
		case bench.PeerPostgresUpdate, bench.PeerPostgresInsert:
			if len(pgDSNs) == 0 {
				return nil, usagef("--peer %s needs a database: give --peer-postgres postgres://..., or a postgres:// --store", k)
			}
			for _, d := range pgDSNs {
				peers = append(peers, bench.Peer{Kind: k, Target: d})
			}
		case bench.PeerHTTPBare:
			peers = append(peers, bench.Peer{Kind: k})
		case bench.PeerFirestore:
			if kind, err := dsn.Scheme(fsDSN); err != nil || kind != dsn.Firestore {
				return nil, usagef("--peer %s needs a Firestore database: give --peer-firestore firestore://PROJECT, or a firestore:// --store", k)
			}
			peers = append(peers, bench.Peer{Kind: k, Target: fsDSN})
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

// startCPUProfile starts --cpuprofile's profile, when it is given, and
// returns what stops it and closes its file.
func (c *benchCommand) startCPUProfile() (stop func(), err error) {
	if c.cpuProfile == "" {
		return func() {}, nil
	}
	f, err := os.Create(c.cpuProfile)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
