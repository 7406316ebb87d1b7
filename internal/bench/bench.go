// Package bench measures the throughput and latency of shardcounter's
// write paths and of the peers users would otherwise pick, the library
// behind `shardcounter bench` (SPEC.md).
//
// A run drives a number of concurrent clients against fresh counters for
// a duration, each client sending one operation at a time, records every
// operation's latency, then reads the counters back: a run is verified
// when the final value equals the writes acknowledged. Runs are meant to
// be compared within one report, measured in one session on one machine,
// as ratios: the table shows each run against the first, and WriteRatios
// each run against each peer.
//
// # Paths
//
// Paths measures shardcounter's own paths over a store for a list of
// shard counts: naive (the seed algorithm, CounterStore.Add, one store
// write per increment), engine (in process through engine.Engine: group
// commit, durable acknowledgement) and http (a real HTTP server over the
// engine, end to end, through the same HTTP load generator as the bare
// handler peer). Peers measures what a user would run instead: Redis
// INCR, a PostgreSQL single-row UPDATE, and a bare net/http handler that
// only does an atomic add, the ceiling of any HTTP counter on the machine.
//
// # Workloads
//
// Config.Counters spreads the writes over many counters, uniformly or with
// a Zipf skew (Config.Zipf); Config.ReadRatio mixes in reads, strong or
// cached (Config.ReadConsistency). Counters are created on their first
// write, as auto-create does in production, so a run over 100,000 counters
// does not spend minutes creating counters it never writes.
package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// Paths, as SPEC.md names them in a run's "path".
const (
	PathNaive  = "naive"  // the seed algorithm: CounterStore.Add, one store write per increment
	PathEngine = "engine" // in process through the engine: group commit, durable acknowledgement
	PathHTTP   = "http"   // a shardcounter HTTP server over the engine, end to end
	PathPeer   = "peer"   // a peer: what users would run instead (see Peers)
)

// Defaults of Config.
const (
	DefaultClients  = 64
	DefaultCounters = 1
	DefaultDuration = 10 * time.Second
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
	// sent as its bearer token when set.
	Server string
	Token  string

	Clients  int           // concurrent clients, one operation in flight each; default DefaultClients
	Counters int           // counters written; default DefaultCounters (one hot counter)
	Duration time.Duration // of each run; default DefaultDuration
	Shards   []int         // one run per shard count; default DefaultShards

	// MaxInFlight, for the engine path, runs it once per value with that
	// engine.Config.MaxInFlight, so that one report compares them; empty
	// runs it once with the engine's default.
	MaxInFlight []int

	// Zipf, when above 1, picks counter i (0-based) with probability
	// proportional to 1/(i+1)^Zipf, as math/rand/v2's Zipf does: a few
	// hot counters and a long tail, as likes on posts are. 0 picks
	// counters uniformly.
	Zipf float64

	// ReadRatio is the fraction of operations that are reads (0 to 1).
	// ReadConsistency is theirs: strong (default) or cached; the naive
	// path and the peers have no cache, so their reads are always strong.
	ReadRatio       float64
	ReadConsistency shardcounter.Consistency

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
	if c.ReadConsistency == "" {
		c.ReadConsistency = shardcounter.Strong
	}
	return c
}

// validate checks the workload, which every path and peer shares.
func (c Config) validate() error {
	switch {
	case c.Clients < 1:
		return fmt.Errorf("bench: %d clients: give 1 or more", c.Clients)
	case c.Counters < 1:
		return fmt.Errorf("bench: %d counters: give 1 or more", c.Counters)
	case c.Duration <= 0:
		return fmt.Errorf("bench: duration %v: give a positive one", c.Duration)
	case c.Zipf != 0 && !(c.Zipf > 1):
		return fmt.Errorf("bench: zipf %v: give an exponent above 1, or 0 for uniform", c.Zipf)
	case !(c.ReadRatio >= 0 && c.ReadRatio <= 1):
		return fmt.Errorf("bench: read ratio %v: give a fraction from 0 to 1", c.ReadRatio)
	case c.ReadConsistency != shardcounter.Strong && c.ReadConsistency != shardcounter.Cached:
		return fmt.Errorf("bench: read consistency %q: give strong or cached", c.ReadConsistency)
	}
	return nil
}

// Run is the result of one run, with the JSON fields of SPEC.md and the
// workload that produced it.
type Run struct {
	Name      string  `json:"name"`
	Store     string  `json:"store"`
	Path      string  `json:"path"`           // naive, engine, http or peer
	Peer      string  `json:"peer,omitempty"` // for path peer: redis-incr, postgres-update or http-bare
	Shards    int     `json:"shards"`         // 0 for peers, which have none
	Clients   int     `json:"clients"`
	Counters  int     `json:"counters"`
	Zipf      float64 `json:"zipf,omitempty"`
	ReadRatio float64 `json:"read_ratio,omitempty"`
	// ReadConsistency is the reads' consistency when there are reads.
	ReadConsistency string  `json:"read_consistency,omitempty"`
	DurationS       float64 `json:"duration_s"` // measured, from the start to the last answer
	Ops             int64   `json:"ops"`        // acknowledged operations: writes and reads
	Writes          int64   `json:"writes"`     // acknowledged writes
	Reads           int64   `json:"reads"`      // answered reads
	OpsPerSec       float64 `json:"ops_per_sec"`
	P50MS           float64 `json:"p50_ms"` // latency of acknowledged operations
	P99MS           float64 `json:"p99_ms"`
	Errors          int64   `json:"errors"`   // failed operations
	Verified        bool    `json:"verified"` // the value read back equals Writes
	// Settings are the store's or peer's settings that bound its
	// throughput, such as appendfsync or synchronous_commit.
	Settings map[string]string `json:"settings,omitempty"`
	// Engine path only: the engine's MaxInFlight when the run chose one,
	// and how many writes its store commits carried on average.
	MaxInFlight     int     `json:"max_in_flight,omitempty"`
	WritesPerCommit float64 `json:"writes_per_commit,omitempty"`
}

// Naive runs the naive path, the seed algorithm, once per shard count.
func Naive(ctx context.Context, cfg Config) ([]Run, error) {
	return Paths(ctx, cfg, PathNaive)
}

// Paths runs each path once per shard count, in order. Each run writes
// fresh counters: for the naive path with CounterStore.Add(ctx, id, 1,
// random pick); for the engine path through a fresh engine.Engine over
// cfg.Store (group commit, durable acknowledgement), closed before reading
// back; for the http path through HTTP requests to cfg.Server or to a
// server over cfg.Store that the run starts and stops. A write error is
// counted, not fatal; an error creating, reading or deleting the counters
// ends the benchmark. Every run deletes its counters.
func Paths(ctx context.Context, cfg Config, paths ...string) ([]Run, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
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
		default:
			return nil, fmt.Errorf("bench: path %q is unknown: use %s, %s or %s", path, PathNaive, PathEngine, PathHTTP)
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
			for _, shards := range cfg.Shards {
				r, err := runPath(ctx, cfg, path, shards, k)
				if err != nil {
					return runs, err
				}
				runs = append(runs, r)
			}
		}
	}
	return runs, nil
}

// target is what one run drives: write and read of counter i, and the
// clean-up after. Each path and peer provides one.
type target struct {
	write func(ctx context.Context, i int) error
	read  func(ctx context.Context, i int) error
	// total returns the sum of the values of the counters written, for
	// verification; cleanup removes them. Both run after the load.
	total   func(ctx context.Context) (int64, error)
	cleanup func(ctx context.Context) error
}

// runPath measures one path on fresh counters with shards shards;
// inFlight is the engine path's MaxInFlight, 0 for the engine's default.
func runPath(ctx context.Context, cfg Config, path string, shards, inFlight int) (Run, error) {
	name := fmt.Sprintf("%s/%s/shards=%d", cfg.StoreName, path, shards)
	if cfg.StoreName == "" {
		name = fmt.Sprintf("%s/shards=%d", path, shards)
	}
	if inFlight > 0 {
		name += fmt.Sprintf("/in-flight=%d", inFlight)
	}
	var eng *engine.Engine
	var svc counterService
	var stop func(context.Context) error
	switch path {
	case PathNaive:
		svc = naiveService{cfg.Store}
	case PathEngine:
		var err error
		if eng, err = engine.New(cfg.Store, engine.Config{NoAutoCreate: true, MaxInFlight: inFlight}); err != nil {
			return Run{}, err
		}
		svc = engineService{eng, cfg.Store}
		stop = eng.Close
	case PathHTTP:
		h, err := startHTTP(ctx, cfg)
		if err != nil {
			return Run{}, err
		}
		svc, stop = h, h.close
	}
	t := counterTarget(cfg, svc, path, shards)
	run := Run{Name: name, Store: cfg.StoreName, Path: path, Shards: shards, MaxInFlight: inFlight}
	err := measureRun(ctx, cfg, t, stop, &run)
	if eng != nil {
		st := eng.Stats()
		run.WritesPerCommit = float64(st.Writes.Load()) / float64(max(st.Flushes.Load(), 1))
	}
	return run, err
}

// measureRun drives t with cfg's workload, then stops what the run
// started (stop may be nil), verifies and cleans up, and fills in run.
func measureRun(ctx context.Context, cfg Config, t target, stop func(context.Context) error, run *Run) error {
	run.Clients, run.Counters, run.Zipf = cfg.Clients, cfg.Counters, cfg.Zipf
	if cfg.ReadRatio > 0 {
		run.ReadRatio, run.ReadConsistency = cfg.ReadRatio, string(cfg.ReadConsistency)
		if run.Path == PathNaive || run.Path == PathPeer {
			run.ReadConsistency = string(shardcounter.Strong)
		}
	}
	var progress func(elapsed time.Duration, ops int64)
	if cfg.Progress != nil {
		progress = func(elapsed time.Duration, ops int64) {
			cfg.Progress(Progress{Run: run.Name, Elapsed: elapsed, Duration: cfg.Duration, Ops: ops})
		}
	}
	m, err := measure(ctx, cfg.Clients, cfg.Duration, newWorkload(cfg, t), progress)
	if stop != nil {
		// A fresh context: the engine must commit what it queued even
		// when ctx ended the run.
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if serr := stop(sctx); err == nil && serr != nil {
			err = fmt.Errorf("bench: %s: stop: %w", run.Name, serr)
		}
		cancel()
	}
	if err != nil {
		t.cleanup(context.Background()) //nolint:errcheck // the run's error says more
		return err
	}
	total, err := t.total(ctx)
	if err != nil {
		t.cleanup(context.Background()) //nolint:errcheck // the read's error says more
		return fmt.Errorf("bench: %s: read back: %w", run.Name, err)
	}
	if err := t.cleanup(ctx); err != nil {
		return fmt.Errorf("bench: %s: clean up: %w", run.Name, err)
	}
	run.DurationS = m.Elapsed.Seconds()
	run.Ops, run.Reads, run.Writes = m.Ops, m.Reads, m.Ops-m.Reads
	run.OpsPerSec = m.OpsPerSec()
	run.P50MS, run.P99MS = ms(m.Percentile(0.50)), ms(m.Percentile(0.99))
	run.Errors = m.Errors
	run.Verified = total == run.Writes
	return nil
}

// newWorkload returns, for each client, its operation: a write or (with
// probability cfg.ReadRatio) a read of a counter chosen uniformly or by
// Zipf. Each client has its own random source, since a Zipf generator is
// not safe for concurrent use and a shared one would be a lock on the hot
// path.
func newWorkload(cfg Config, t target) func(client int) op {
	return func(client int) op {
		r := rand.New(rand.NewPCG(rand.Uint64(), uint64(client)))
		pick := func() int { return 0 }
		switch {
		case cfg.Counters > 1 && cfg.Zipf > 1:
			z := rand.NewZipf(r, cfg.Zipf, 1, uint64(cfg.Counters-1))
			pick = func() int { return int(z.Uint64()) }
		case cfg.Counters > 1:
			pick = func() int { return r.IntN(cfg.Counters) }
		}
		return func(ctx context.Context) (bool, error) {
			i := pick()
			if cfg.ReadRatio > 0 && r.Float64() < cfg.ReadRatio {
				return true, t.read(ctx, i)
			}
			return false, t.write(ctx, i)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// op is one operation of a client: it reports whether it was a read.
type op func(ctx context.Context) (read bool, err error)

// Measurement is what Measure observed.
type Measurement struct {
	Ops       int64           // operations that returned nil
	Reads     int64           // of which reads
	Errors    int64           // operations that returned an error
	Elapsed   time.Duration   // from the start to the last operation's end
	Latencies []time.Duration // of the successful operations, sorted
}

// OpsPerSec is the throughput of successful operations.
func (m *Measurement) OpsPerSec() float64 {
	if m.Elapsed <= 0 {
		return 0
	}
	return float64(m.Ops) / m.Elapsed.Seconds()
}

// Percentile returns the latency below or at which a fraction p (0 < p ≤
// 1) of the successful operations finished (nearest rank), or 0 when there
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
	return measure(ctx, clients, d, func(int) op {
		return func(ctx context.Context) (bool, error) { return false, fn(ctx) }
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

func measure(ctx context.Context, clients int, d time.Duration, newOp func(client int) op, progress func(time.Duration, int64)) (*Measurement, error) {
	if clients < 1 {
		return nil, fmt.Errorf("bench: %d clients: give 1 or more", clients)
	}
	var errs, reads atomic.Int64
	lat := make([][]time.Duration, clients)
	counts := make([]clientCount, clients)
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for c := range clients {
		fn := newOp(c)
		wg.Go(func() {
			samples := make([]time.Duration, 0, 1024)
			var nreads int64
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				read, err := fn(ctx)
				counts[c].n.Add(1)
				if err != nil {
					errs.Add(1)
					continue
				}
				if read {
					nreads++
				}
				samples = append(samples, time.Since(t0))
			}
			lat[c] = samples
			reads.Add(nreads)
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
	m := &Measurement{Errors: errs.Load(), Reads: reads.Load(), Elapsed: time.Since(start)}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, s := range lat {
		m.Latencies = append(m.Latencies, s...)
	}
	slices.Sort(m.Latencies)
	m.Ops = int64(len(m.Latencies))
	return m, nil
}
