// Package bench measures the throughput and latency of shardcounter's
// paths and of the peers users would otherwise pick, the library behind
// `shardcounter bench` (SPEC.md).
//
// A run drives a number of concurrent clients against fresh counters for
// a duration, each client sending one operation at a time (or, with
// Config.Pipeline, a pipeline of them), records every round trip's
// latency, then reads the counters back: a run is verified when the
// final values equal what the acknowledged writes add up to. Runs are
// meant to be compared within one report, measured in one session on one
// machine, as ratios: the table shows each run against the first, and
// WriteRatios each run against each peer.
//
// # Paths
//
// Paths measures shardcounter's own paths over a store for a list of
// shard counts: naive (the seed algorithm, CounterStore.Add, one store
// write per increment), engine (in process through engine.Engine: group
// commit, durable acknowledgement), http (a real HTTP server over the
// engine, end to end, through the same HTTP load generator as the bare
// handler peer) and resp (a shardcounter RESP port driven by go-redis).
// Peers measures what a user would run instead: Redis INCR or SADD, a
// PostgreSQL UPDATE or INSERT, and a bare net/http handler that only does
// an atomic add, the ceiling of any HTTP counter on the machine.
//
// # Workloads
//
// Config.Counters spreads the operations over many counters, uniformly or
// with a Zipf skew (Config.Zipf). The single workload writes one counter
// per operation and, with Config.ReadRatio, reads one; the timeline
// workload reads Config.ReadBatch counters at once (ReadCounters, POST
// /v1/reads, MGET). On distinct counters writes add members drawn from a
// population of Config.Members instead of adding 1; Config.DecrRatio
// makes some writes −1 (or removes). Config.Variants runs each path on
// plain, distinct, bounded and windowed counters in one report. Counters are
// created on their first write, as auto-create does in production, so a
// run over a million counters does not spend minutes creating counters it
// never writes; Config.Prefill touches every counter once before the
// clock starts instead.
//
// # Memory
//
// Each run reports the resident memory of the process that serves it
// before, at most during, and after the load: the bench process for the
// paths it serves itself, the server's own for --server and --resp
// targets that say (Prometheus's process_resident_memory_bytes, INFO's
// used_memory_rss), and the Redis peers'.
package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
)

// Paths, as SPEC.md names them in a run's "path".
const (
	PathNaive  = "naive"  // the seed algorithm: CounterStore.Add, one store write per increment
	PathEngine = "engine" // in process through the engine: group commit, durable acknowledgement
	PathHTTP   = "http"   // a shardcounter HTTP server over the engine, end to end
	PathRESP   = "resp"   // a shardcounter RESP port, through go-redis
	PathPeer   = "peer"   // a peer: what users would run instead (see Peers)
)

// Defaults of Config.
const (
	DefaultClients  = 64
	DefaultCounters = 1
	DefaultDuration = 10 * time.Second
	// MaxPipeline bounds Config.Pipeline: past some dozens a deeper
	// pipeline measures the client's buffers, not the server.
	MaxPipeline = 1000
)

// DefaultShards are the shard counts run when Config.Shards is empty.
var DefaultShards = []int{1, 4, 16, 64}

// Config describes a benchmark: the store, the load and the workload.
type Config struct {
	// Store is what the naive and engine paths write to, and what the
	// http path's own server serves. Peers do not use it.
	Store     shardcounter.CounterStore
	StoreName string // the store's name in results, such as "postgres" or "bolt"

	// Server is the base URL of a running shardcounter server for the
	// http path. Empty: the path starts its own server over Store, in
	// this process (see HTTP in the package doc of the CLI). Token is
	// sent as its bearer token when set, over HTTP and as RESP's AUTH.
	Server string
	Token  string
	// RESP is the address (host:port) of a shardcounter RESP port for the
	// resp path.
	RESP string

	Clients  int           // concurrent clients, one round trip in flight each; default DefaultClients
	Counters int           // counters written; default DefaultCounters (one hot counter)
	Duration time.Duration // of each run; default DefaultDuration
	Shards   []int         // one run per shard count; default DefaultShards

	// MaxInFlight, for the engine path, runs it once per value with that
	// engine.Config.MaxInFlight, so that one report compares them; empty
	// runs it once with the engine's default.
	MaxInFlight []int
	// MaxReadsInFlight is engine.Config.MaxReadsInFlight of every engine
	// the run starts (the engine path's, and the servers of the http and
	// resp paths); 0 is the engine's default.
	MaxReadsInFlight int
	// MaxStaleness and CacheSize are engine.Config's of every engine the
	// run starts: how old a cached read may be, and how many counters'
	// readings are kept; 0 is the engine's default.
	MaxStaleness time.Duration
	CacheSize    int

	// Zipf, when above 1, picks counter i (0-based) with probability
	// proportional to 1/(i+1)^Zipf, as math/rand/v2's Zipf does: a few
	// hot counters and a long tail, as likes on posts are. 0 picks
	// counters uniformly.
	Zipf float64

	// Workload is WorkloadSingle (the default) or WorkloadTimeline.
	Workload string
	// ReadRatio is the fraction of operations that are reads (0 to 1):
	// of one counter, or on a timeline of ReadBatch counters (default
	// DefaultReadBatch). ReadConsistency is theirs: strong (default) or
	// cached; the naive path, the resp path and the peers have no cache,
	// so their reads are always strong.
	ReadRatio       float64
	ReadBatch       int
	ReadConsistency shardcounter.Consistency

	// Kind is what the counters count when Variants is empty: sum
	// (default) or distinct, whose writes add a member drawn uniformly
	// from Members (default DefaultMembers). Peers are run on their own
	// kind; the http-bare peer on this one.
	Kind    shardcounter.Kind
	Members int
	// DecrRatio is the fraction of writes that subtract 1 (remove the
	// member, on a distinct counter) instead of adding, so that a
	// bounded counter meets its floor.
	DecrRatio float64
	// Variants run each path once per variant and shard count; default
	// Plain, or Distinct when Kind is distinct. Peers run once each, on
	// the kind they count.
	Variants []Variant

	// Prefill, before each run's clock starts, writes once to every
	// counter (+1, or adds member 0) in batches, creating them, so that
	// the run and its memory figures cover all Counters.
	Prefill bool

	// Pipeline, for the resp path and the Redis peers, sends this many
	// commands per round trip (default 1: one command at a time).
	Pipeline int

	// KeepCounters leaves the paths' counters in the store after each
	// run instead of deleting them one by one: for a store thrown away
	// after the benchmark, where a million deletes would take minutes.
	// Peers always clean up (a dropped table, DEL of 1000 keys at once).
	KeepCounters bool

	// Progress, when set, is called about twice a second during a run
	// with what it has done so far, for a progress line.
	Progress func(Progress)
}

// Progress is a run's state, as Config.Progress receives it.
type Progress struct {
	Run      string        // the run's name
	Elapsed  time.Duration // since the run started
	Duration time.Duration // the run's planned length
	Ops      int64         // operations answered so far, failed or not
}

func (c Config) withDefaults() Config {
	if c.Clients == 0 {
		c.Clients = DefaultClients
	}
	if c.Counters == 0 {
		c.Counters = DefaultCounters
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if len(c.Shards) == 0 {
		c.Shards = DefaultShards
	}
	if c.Workload == "" {
		c.Workload = WorkloadSingle
	}
	if c.ReadBatch == 0 {
		c.ReadBatch = DefaultReadBatch
	}
	if c.ReadConsistency == "" {
		c.ReadConsistency = shardcounter.Strong
	}
	if c.Kind == "" {
		c.Kind = shardcounter.KindSum
	}
	if c.Members == 0 {
		c.Members = DefaultMembers
	}
	if len(c.Variants) == 0 {
		c.Variants = []Variant{Plain()}
		if c.Kind == shardcounter.KindDistinct {
			c.Variants = []Variant{Distinct()}
		}
	}
	if c.Pipeline == 0 {
		c.Pipeline = 1
	}
	return c
}

// Validate checks the workload, which every path and peer shares, with
// the defaults applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Clients < 1:
		return fmt.Errorf("bench: %d clients: give 1 or more", c.Clients)
	case c.Counters < 1:
		return fmt.Errorf("bench: %d counters: give 1 or more", c.Counters)
	case c.Duration <= 0:
		return fmt.Errorf("bench: duration %v: give a positive one", c.Duration)
	case c.Zipf != 0 && !(c.Zipf > 1 && c.Zipf < math.Inf(1)):
		return fmt.Errorf("bench: zipf %v: give an exponent above 1, or 0 for uniform", c.Zipf)
	case c.Workload != WorkloadSingle && c.Workload != WorkloadTimeline:
		return fmt.Errorf("bench: workload %q is unknown: use %s or %s", c.Workload, WorkloadSingle, WorkloadTimeline)
	case !(c.ReadRatio >= 0 && c.ReadRatio <= 1):
		return fmt.Errorf("bench: read ratio %v: give a fraction from 0 to 1", c.ReadRatio)
	case c.ReadBatch < 1 || c.ReadBatch > shardcounter.MaxReadBatch:
		return fmt.Errorf("bench: read batch %d: give 1 to %d counters", c.ReadBatch, shardcounter.MaxReadBatch)
	case c.ReadConsistency != shardcounter.Strong && c.ReadConsistency != shardcounter.Cached:
		return fmt.Errorf("bench: read consistency %q: give strong or cached", c.ReadConsistency)
	case c.Kind != shardcounter.KindSum && c.Kind != shardcounter.KindDistinct:
		return fmt.Errorf("bench: kind %q: give sum or distinct", c.Kind)
	case c.Members < 1:
		return fmt.Errorf("bench: %d members: give 1 or more", c.Members)
	case !(c.DecrRatio >= 0 && c.DecrRatio <= 1):
		return fmt.Errorf("bench: decrement ratio %v: give a fraction from 0 to 1", c.DecrRatio)
	case c.Pipeline < 1 || c.Pipeline > MaxPipeline:
		return fmt.Errorf("bench: pipeline %d: give 1 to %d commands", c.Pipeline, MaxPipeline)
	}
	for _, v := range c.Variants {
		if err := shardcounter.ValidateSpec(v.spec(1)); err != nil {
			return fmt.Errorf("bench: counter variant %s: %w", v.Name, err)
		}
	}
	return nil
}

// Run is the result of one run, with the JSON fields of SPEC.md and the
// workload that produced it.
type Run struct {
	Name      string  `json:"name"`
	Store     string  `json:"store"`
	Path      string  `json:"path"`           // naive, engine, http, resp or peer
	Peer      string  `json:"peer,omitempty"` // for path peer: redis-incr, postgres-update, http-bare, ...
	Shards    int     `json:"shards"`         // 0 for peers, which have none
	Clients   int     `json:"clients"`
	Counters  int     `json:"counters"`
	Zipf      float64 `json:"zipf,omitempty"`
	Workload  string  `json:"workload,omitempty"`   // single or timeline
	ReadRatio float64 `json:"read_ratio,omitempty"` // of operations that read
	// ReadBatch is the counters of each timeline read.
	ReadBatch int `json:"read_batch,omitempty"`
	// ReadConsistency is the reads' consistency when there are reads.
	ReadConsistency string `json:"read_consistency,omitempty"`
	// Kind is the counters' kind; Members the population of a distinct
	// counter's members; DecrRatio the fraction of writes that subtract.
	Kind      string  `json:"kind,omitempty"`
	Members   int     `json:"members,omitempty"`
	DecrRatio float64 `json:"decr_ratio,omitempty"`
	// Variant names how the path's counters were created: plain,
	// min=0, window=1m:1d...
	Variant string `json:"variant,omitempty"`
	// Pipeline is the commands per round trip when above 1.
	Pipeline  int     `json:"pipeline,omitempty"`
	DurationS float64 `json:"duration_s"` // measured, from the start to the last answer
	Ops       int64   `json:"ops"`        // answered operations: writes, reads and refused writes
	Writes    int64   `json:"writes"`     // acknowledged writes
	Reads     int64   `json:"reads"`      // answered reads (a timeline read counts once)
	// Refused counts writes a bounded counter refused (out_of_range), as
	// it must: answered, not errors.
	Refused   int64   `json:"refused,omitempty"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50MS     float64 `json:"p50_ms"` // latency of a round trip that was answered
	P99MS     float64 `json:"p99_ms"`
	Errors    int64   `json:"errors"`   // failed operations
	Verified  bool    `json:"verified"` // the values read back equal what the acknowledged writes add up to
	// Touched is how many counters the run wrote (or prefilled).
	Touched int64 `json:"counters_touched,omitempty"`
	// Settings are the store's or peer's settings that bound its
	// throughput, such as appendfsync or synchronous_commit.
	Settings map[string]string `json:"settings,omitempty"`
	// Engine path only: the engine's MaxInFlight when the run chose one,
	// and how many writes its store commits carried on average.
	MaxInFlight     int     `json:"max_in_flight,omitempty"`
	WritesPerCommit float64 `json:"writes_per_commit,omitempty"`
	// Memory is the resident memory of the process serving the run,
	// when it could be read.
	Memory *Memory `json:"memory,omitempty"`
}

// Memory is the resident set size of the process that served a run:
// before the load (and the prefill), the most seen while it ran, and
// after it, before the counters are read back.
type Memory struct {
	Process   string `json:"process"` // "bench" (served in process), "server" or "redis"
	RSSBefore int64  `json:"rss_before_bytes"`
	RSSMax    int64  `json:"rss_max_bytes"`
	// RSSMaxAnon is the part of RSSMax the process allocated (anonymous
	// pages: what would have to be swapped), and RSSMaxFiles the part that
	// maps files (the executable, bbolt's database file: page cache the
	// kernel can drop, see fileProbe), when the serving process says:
	// in-process runs on Linux.
	RSSMaxAnon  *int64 `json:"rss_max_anon_bytes,omitempty"`
	RSSMaxFiles *int64 `json:"rss_max_files_bytes,omitempty"`
	RSSAfter    int64  `json:"rss_after_bytes"`
	SampleEvery string `json:"sample_every"` // how often RSSMax was sampled
}

// Naive runs the naive path, the seed algorithm, once per shard count.
func Naive(ctx context.Context, cfg Config) ([]Run, error) {
	return Paths(ctx, cfg, PathNaive)
}

// Paths runs each path once per variant and shard count, in order. Each
// run writes fresh counters: for the naive path with CounterStore.Add (or
// Apply, for members); for the engine path through a fresh engine.Engine
// over cfg.Store (group commit, durable acknowledgement), closed before
// reading back; for the http path through HTTP requests to cfg.Server or
// to a server over cfg.Store that the run starts and stops; for the resp
// path through RESP commands to cfg.RESP or to a RESP server over
// cfg.Store that the run starts and stops. A write error is counted, not
// fatal; an error creating, reading or deleting the counters ends the
// benchmark. Every run deletes its counters.
func Paths(ctx context.Context, cfg Config, paths ...string) ([]Run, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, path := range paths {
		switch path {
		case PathNaive, PathEngine:
			if cfg.Store == nil {
				return nil, fmt.Errorf("bench: the %s path needs a store", path)
			}
		case PathHTTP:
			if cfg.Store == nil && cfg.Server == "" {
				return nil, errors.New("bench: the http path needs a store to serve or a server to target")
			}
		case PathRESP:
			if cfg.Store == nil && cfg.RESP == "" {
				return nil, errors.New("bench: the resp path needs a store to serve or the address of a RESP port (serve --resp-listen)")
			}
			for _, v := range cfg.Variants {
				if v.Window != nil {
					return nil, fmt.Errorf("bench: the resp path cannot create windowed counters (RESP has no window option): drop variant %s", v.Name)
				}
			}
		default:
			return nil, fmt.Errorf("bench: path %q is unknown: use %s, %s, %s or %s", path, PathNaive, PathEngine, PathHTTP, PathRESP)
		}
		if cfg.Pipeline > 1 && path != PathRESP {
			return nil, fmt.Errorf("bench: the %s path sends one request at a time: pipelining is for the resp path", path)
		}
	}
	for _, shards := range cfg.Shards {
		if err := shardcounter.ValidateShards(shards); err != nil {
			return nil, err
		}
	}
	var runs []Run
	for _, path := range paths {
		inFlight := []int{0} // the engine's default
		if path == PathEngine && len(cfg.MaxInFlight) > 0 {
			inFlight = cfg.MaxInFlight
		}
		for _, k := range inFlight {
			for _, v := range cfg.Variants {
				for _, shards := range cfg.Shards {
					r, err := runPath(ctx, cfg, path, v, shards, k)
					if err != nil {
						return runs, err
					}
					runs = append(runs, r)
				}
			}
		}
	}
	return runs, nil
}

// runPath measures one path on fresh counters of variant v with shards
// shards; inFlight is the engine path's MaxInFlight, 0 for the engine's
// default.
func runPath(ctx context.Context, cfg Config, path string, v Variant, shards, inFlight int) (Run, error) {
	store := cfg.StoreName
	if (path == PathRESP && cfg.RESP != "") || (path == PathHTTP && cfg.Server != "") {
		store = "server" // a running server's, not cfg.Store
	}
	name := fmt.Sprintf("%s/%s/shards=%d", store, path, shards)
	if store == "" {
		name = fmt.Sprintf("%s/shards=%d", path, shards)
	}
	if v.Name != VariantPlain {
		name += "/" + v.Name
	}
	if inFlight > 0 {
		name += fmt.Sprintf("/in-flight=%d", inFlight)
	}
	if path == PathRESP && cfg.Pipeline > 1 {
		name += fmt.Sprintf("/pipeline=%d", cfg.Pipeline)
	}
	cfg.Kind = v.kind() // the writes the run draws
	spec := v.spec(shards)
	run := Run{Name: name, Store: store, Path: path, Shards: shards, MaxInFlight: inFlight, Variant: v.Name}
	var svc counterService
	var t target
	var stop func(context.Context) error
	var mem memoryProbe = selfMemory{}
	var commits func() float64
	switch path {
	case PathNaive:
		svc = naiveService{cfg.Store, spec}
	case PathEngine:
		e, err := startEngine(cfg, spec, inFlight)
		if err != nil {
			return Run{}, err
		}
		svc, stop, commits = e, e.eng.Close, e.writesPerCommit
	case PathHTTP:
		h, err := startHTTP(ctx, cfg, spec)
		if err != nil {
			return Run{}, err
		}
		svc, stop = h, h.close
		if cfg.Server != "" {
			mem = h.lg
		}
	case PathRESP:
		r, err := startRESP(ctx, cfg, spec)
		if err != nil {
			return Run{}, err
		}
		// The target's clean-up closes the client and stops the server.
		t, mem = respTarget(cfg, r, runPrefix(path, v, shards), cfg.KeepCounters), r
		run.Pipeline = cfg.Pipeline
		if r.eng != nil {
			commits = (&engineService{eng: r.eng}).writesPerCommit
		}
	}
	if svc != nil {
		t = counterTarget(cfg, svc, path, v, shards)
	}
	err := measureRun(ctx, cfg, t, mem, stop, &run)
	if commits != nil {
		run.WritesPerCommit = commits()
	}
	return run, err
}

// target is what one run drives. Each path and peer provides one.
type target struct {
	// do performs ops, one or (pipelined) several in one round trip, and
	// sets each one's changed and err.
	do func(ctx context.Context, ops []operation)
	// prefill writes once to each of the counters numbered in is,
	// creating them, and returns how much it added to their values.
	prefill func(ctx context.Context, is []int) (int64, error)
	// total returns the sum of the values of the counters written, for
	// verification; windowTotal, when set, the sum of their windows,
	// which must equal it; touched how many counters were written;
	// cleanup removes them. They run after the load.
	total       func(ctx context.Context) (int64, error)
	windowTotal func(ctx context.Context) (int64, error)
	touched     func() int64
	cleanup     func(ctx context.Context) error
}

// prefillChunk is how many counters one prefill call writes, and
// prefillWorkers how many calls run at once: enough to keep a store
// busy, few enough that an engine's flush of them (each creating its
// counters) stays well inside its time bound on a loaded machine.
const (
	prefillChunk   = 1000
	prefillWorkers = 4
)

// measureRun prefills, drives t with cfg's workload, then stops what the
// run started (stop may be nil), verifies and cleans up, and fills in run.
// mem, when not nil, reads the resident memory of what serves the run.
func measureRun(ctx context.Context, cfg Config, t target, mem memoryProbe, stop func(context.Context) error, run *Run) error {
	run.Clients, run.Counters, run.Zipf = cfg.Clients, cfg.Counters, cfg.Zipf
	run.Workload, run.Kind, run.DecrRatio = cfg.Workload, string(cfg.Kind), cfg.DecrRatio
	if cfg.Kind == shardcounter.KindDistinct {
		run.Members = cfg.Members
	}
	if cfg.ReadRatio > 0 {
		run.ReadRatio, run.ReadConsistency = cfg.ReadRatio, string(cfg.ReadConsistency)
		if run.Path == PathNaive || run.Path == PathPeer || run.Path == PathRESP {
			run.ReadConsistency = string(shardcounter.Strong)
		}
		if cfg.Workload == WorkloadTimeline {
			run.ReadBatch = min(cfg.ReadBatch, cfg.Counters)
		}
	}
	fail := func(err error) error {
		t.cleanup(context.Background()) //nolint:errcheck // err says more
		if stop != nil {
			stop(context.Background()) //nolint:errcheck // err says more
		}
		return fmt.Errorf("bench: %s: %w", run.Name, err)
	}

	var sampler *memorySampler
	if mem != nil {
		var err error
		if sampler, err = startSampler(ctx, mem); err != nil {
			return fail(err)
		}
	}
	var expect int64
	if cfg.Prefill {
		n, err := prefill(ctx, cfg, t)
		if err != nil {
			return fail(fmt.Errorf("prefill: %w", err))
		}
		expect = n
	}
	var progress func(elapsed time.Duration, ops int64)
	if cfg.Progress != nil {
		progress = func(elapsed time.Duration, ops int64) {
			cfg.Progress(Progress{Run: run.Name, Elapsed: elapsed, Duration: cfg.Duration, Ops: ops})
		}
	}
	m, err := measure(ctx, cfg.Clients, cfg.Duration, clientsOf(cfg, t), progress)
	if sampler != nil {
		run.Memory = sampler.stop(ctx)
	}
	if stop != nil {
		// A fresh context: the engine must commit what it queued even
		// when ctx ended the run.
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		serr := stop(sctx)
		cancel()
		if err == nil && serr != nil {
			err = fmt.Errorf("stop: %w", serr)
		}
		stop = nil
	}
	if err != nil {
		return fail(err)
	}
	total, err := t.total(ctx)
	if err != nil {
		return fail(fmt.Errorf("read back: %w", err))
	}
	windowOK := true
	if t.windowTotal != nil {
		w, err := t.windowTotal(ctx)
		if err != nil {
			return fail(fmt.Errorf("read back the windows: %w", err))
		}
		windowOK = w == total
	}
	run.Touched = t.touched()
	if err := t.cleanup(ctx); err != nil {
		return fmt.Errorf("bench: %s: clean up: %w", run.Name, err)
	}
	run.DurationS = m.Elapsed.Seconds()
	run.Ops, run.Reads, run.Writes, run.Refused = m.Ops, m.Reads, m.Writes, m.Refused
	run.OpsPerSec = m.OpsPerSec()
	run.P50MS, run.P99MS = ms(m.Percentile(0.50)), ms(m.Percentile(0.99))
	run.Errors = m.Errors
	run.Verified = total == expect+m.Delta && windowOK
	return nil
}

// prefill writes once to every counter, in chunks of prefillChunk from
// prefillWorkers goroutines, and returns how much it added to their
// values.
func prefill(ctx context.Context, cfg Config, t target) (int64, error) {
	if t.prefill == nil {
		return 0, errors.New("this path or peer cannot prefill")
	}
	var added atomic.Int64
	chunks := (cfg.Counters + prefillChunk - 1) / prefillChunk
	err := forEach(ctx, chunks, prefillWorkers, func(ctx context.Context, c int) error {
		is := make([]int, 0, prefillChunk)
		for i := c * prefillChunk; i < min((c+1)*prefillChunk, cfg.Counters); i++ {
			is = append(is, i)
		}
		n, err := t.prefill(ctx, is)
		added.Add(n)
		return err
	})
	return added.Load(), err
}

// clientsOf returns, for each client, its round trip: Pipeline
// operations drawn by its own generator and performed by t.
func clientsOf(cfg Config, t target) func(client int) round {
	return func(client int) round {
		g := newGenerator(cfg, client)
		ops := make([]operation, cfg.Pipeline)
		return func(ctx context.Context) tally {
			for i := range ops {
				g.next(&ops[i])
			}
			t.do(ctx, ops)
			var n tally
			for i := range ops {
				n.add(&ops[i])
			}
			return n
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// round is one round trip of a client: one operation, or a pipeline.
type round func(ctx context.Context) tally

// tally is what a round trip's operations came to.
type tally struct {
	reads, writes, refused, errors int64
	delta                          int64 // what the writes that changed a value added up to
}

func (t *tally) add(op *operation) {
	switch {
	case op.err == nil && op.kind == opWrite:
		t.writes++
		if op.changed {
			t.delta += op.delta
		}
	case op.err == nil:
		t.reads++
	case errors.Is(op.err, shardcounter.ErrOutOfRange):
		t.refused++
	default:
		t.errors++
	}
}

func (t tally) answered() int64 { return t.reads + t.writes + t.refused }

// Measurement is what Measure observed.
type Measurement struct {
	Ops       int64           // operations answered: reads, writes and refused writes
	Reads     int64           // of which reads
	Writes    int64           // of which acknowledged writes
	Refused   int64           // of which writes refused as out of range
	Delta     int64           // what the acknowledged writes added to the values
	Errors    int64           // operations that failed
	Elapsed   time.Duration   // from the start to the last operation's end
	Latencies []time.Duration // of the round trips with an answered operation, sorted
}

// OpsPerSec is the throughput of answered operations.
func (m *Measurement) OpsPerSec() float64 {
	if m.Elapsed <= 0 {
		return 0
	}
	return float64(m.Ops) / m.Elapsed.Seconds()
}

// Percentile returns the latency below or at which a fraction p (0 < p ≤
// 1) of the answered round trips finished (nearest rank), or 0 when there
// were none.
func (m *Measurement) Percentile(p float64) time.Duration {
	n := len(m.Latencies)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p*float64(n))) - 1
	return m.Latencies[min(max(rank, 0), n-1)]
}

// Measure runs op from clients goroutines, each calling it again as soon
// as it returns, until d has passed since the start, and times every call.
// Calls in flight at the end finish and count. It returns ctx's error if
// ctx ends first.
func Measure(ctx context.Context, clients int, d time.Duration, fn func(ctx context.Context) error) (*Measurement, error) {
	return measure(ctx, clients, d, func(int) round {
		return func(ctx context.Context) tally {
			if err := fn(ctx); err != nil {
				return tally{errors: 1}
			}
			return tally{writes: 1}
		}
	}, nil)
}

// progressEvery is how often a run reports progress.
const progressEvery = 500 * time.Millisecond

// clientCount is one client's count of answered operations, padded to its
// own cache line so that the progress line costs the clients no sharing.
type clientCount struct {
	n atomic.Int64
	_ [56]byte
}

func measure(ctx context.Context, clients int, d time.Duration, newRound func(client int) round, progress func(time.Duration, int64)) (*Measurement, error) {
	if clients < 1 {
		return nil, fmt.Errorf("bench: %d clients: give 1 or more", clients)
	}
	lat := make([][]time.Duration, clients)
	tallies := make([]tally, clients)
	counts := make([]clientCount, clients)
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for c := range clients {
		fn := newRound(c)
		wg.Go(func() {
			samples := make([]time.Duration, 0, 1024)
			var sum tally
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				n := fn(ctx)
				counts[c].n.Add(n.answered() + n.errors)
				sum.reads += n.reads
				sum.writes += n.writes
				sum.refused += n.refused
				sum.errors += n.errors
				sum.delta += n.delta
				if n.answered() > 0 {
					samples = append(samples, time.Since(t0))
				}
			}
			lat[c], tallies[c] = samples, sum
		})
	}
	if progress != nil {
		stop := make(chan struct{})
		var pw sync.WaitGroup
		pw.Go(func() {
			tick := time.NewTicker(progressEvery)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					var n int64
					for i := range counts {
						n += counts[i].n.Load()
					}
					progress(time.Since(start), n)
				}
			}
		})
		defer func() { close(stop); pw.Wait() }()
	}
	wg.Wait()
	m := &Measurement{Elapsed: time.Since(start)}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for c := range clients {
		m.Latencies = append(m.Latencies, lat[c]...)
		t := tallies[c]
		m.Reads += t.reads
		m.Writes += t.writes
		m.Refused += t.refused
		m.Errors += t.errors
		m.Delta += t.delta
	}
	m.Ops = m.Reads + m.Writes + m.Refused
	slices.Sort(m.Latencies)
	return m, nil
}
