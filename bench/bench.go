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
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

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
	commits := shardCommitsOf(cfg, run.Path)
	var commitsBefore int64
	if commits != nil {
		commitsBefore = commits()
	}
	m, err := measure(ctx, cfg.Clients, cfg.Duration, clientsOf(cfg, t), progress)
	if sampler != nil {
		run.Memory = sampler.stop(ctx)
	}
	if err == nil && cfg.AfterLoad != nil {
		if err = cfg.AfterLoad(run.Name); err != nil {
			err = fmt.Errorf("after the load: %w", err)
		}
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
	var shardCommits int64
	if commits != nil {
		shardCommits = commits() - commitsBefore
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
	if commits != nil && m.Writes > 0 {
		if run.Path == PathEngine && run.Variant == VariantPlain && !cfg.Prefill {
			// The engine created each counter the run wrote with its
			// first write, in a commit of every shard document: counted
			// as the one document that write needed, as a counter there
			// before would have taken it (the naive path creates its
			// counters apart, uncounted).
			shardCommits -= run.Touched * int64(run.Shards-1)
		}
		run.ShardCommits = shardCommits
		run.ShardCommitsPerWrite = float64(shardCommits) / float64(m.Writes)
	}
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

// shardCommitsOf returns the running count of shard-document commits of
// the store the run writes, when it is a document store and the path
// the naive or the engine one, or nil. The run reads it after the
// prefill and after the engine's last flush.
func shardCommitsOf(cfg Config, path string) func() int64 {
	if path != PathNaive && path != PathEngine {
		return nil
	}
	s, ok := cfg.Store.(interface{ Stats() *docstore.Stats })
	if !ok {
		return nil
	}
	return s.Stats().Commits.Load
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
