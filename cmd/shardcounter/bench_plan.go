package main

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bench"
	"github.com/shardcounter/shardcounter/dsn"
)

// benchPlan is what the flags ask for: the workload, shardcounter's
// paths and the peers.
type benchPlan struct {
	cfg        bench.Config
	storeDSN   string
	storeKind  string
	needStore  bool
	storePaths []string
	peers      []bench.Peer
	tokenFile  string
}

// plan checks the flags and turns them into a plan. Every mistake is a
// usage error that names the flag.
func (c *benchCommand) plan(args []string) (*benchPlan, error) {
	if len(args) > 0 {
		return nil, usagef("unexpected argument %q: bench takes only flags", args[0])
	}
	shards, err := parseShardList(c.shards)
	if err != nil {
		return nil, err
	}
	var inFlight []int
	if c.inFlight != "" {
		for _, f := range strings.Split(c.inFlight, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return nil, usagef("--max-in-flight %q: give comma-separated positive counts, as in 1,2,4", c.inFlight)
			}
			inFlight = append(inFlight, n)
		}
	}
	if c.readsFlight < 0 {
		return nil, usagef("--max-reads-in-flight %d: give a positive count, or leave it out for the engine's default", c.readsFlight)
	}
	if c.staleness < 0 {
		return nil, usagef("--max-staleness %v: give a positive duration, or leave it out for the engine's default", c.staleness)
	}
	if c.cacheSize < 0 {
		return nil, usagef("--cache-size %d: give a positive count, or leave it out for the engine's default", c.cacheSize)
	}
	if err := c.checkLoad(); err != nil {
		return nil, err
	}
	variants, err := c.variants()
	if err != nil {
		return nil, err
	}
	if c.resp != "" {
		if err := checkHostPort(c.resp); err != nil {
			return nil, usagef("--resp %q: %v", c.resp, err)
		}
	}
	p, runPeers, err := c.pathPlan()
	if err != nil {
		return nil, err
	}
	if p.storeDSN != "" {
		if p.storeKind, err = dsn.Scheme(p.storeDSN); err != nil {
			return nil, usagef("--store: %s", errorText(err))
		}
	}
	p.cfg = bench.Config{
		Server: c.server, RESP: c.resp,
		Clients: c.clients, Counters: c.counters, Duration: c.duration, Shards: shards,
		MaxInFlight: inFlight, MaxReadsInFlight: c.readsFlight, MaxStaleness: c.staleness, CacheSize: c.cacheSize, Zipf: c.zipf,
		Workload: c.workload, ReadRatio: c.readRatio, ReadBatch: c.readBatch, ReadConsistency: shardcounter.Consistency(c.readCons),
		Kind: c.kindList()[0], Members: c.members, DecrRatio: c.decrRatio, Variants: variants,
		Prefill: c.prefill, Pipeline: c.pipeline, KeepCounters: c.keep, ShardWriteInterval: c.pace.d,
	}
	if c.server != "" {
		p.cfg.StoreName = "server"
	}
	if p.peers, err = c.peerList(p.cfg, p.storeKind, len(c.peers) == 0 && runPeers); err != nil {
		return nil, err
	}
	// The flags' checks above speak in flags; this is the library's own,
	// so that a combination they miss is still a usage error.
	if err := p.cfg.Validate(); err != nil {
		return nil, usagef("%v", err)
	}
	return p, nil
}

// checkLoad sets the workload's defaults that depend on other flags and
// checks the load's flags.
func (c *benchCommand) checkLoad() error {
	timeline := c.workload == bench.WorkloadTimeline
	if timeline && !c.given("read-ratio") {
		c.readRatio = bench.DefaultTimelineReadRatio
	}
	if c.readCons == "" {
		c.readCons = string(shardcounter.Strong)
		if timeline {
			c.readCons = string(shardcounter.Cached)
		}
	}
	bounded := c.min.set || c.max.set
	if bounded && !c.given("decr-ratio") {
		c.decrRatio = 0.5
	}
	switch {
	case c.clients < 1 || c.counters < 1 || c.duration <= 0:
		return usagef("--clients, --counters and --duration must be positive")
	case c.zipf != 0 && !(c.zipf > 1 && !math.IsInf(c.zipf, 1)):
		return usagef("--zipf %v: give an exponent above 1, such as 1.1, or 0 for uniform", c.zipf)
	case c.workload != bench.WorkloadSingle && !timeline:
		return usagef("--workload %q is unknown: use single, timeline, ranking or limit", c.workload)
	case !(c.readRatio >= 0 && c.readRatio <= 1):
		return usagef("--read-ratio %v: give a fraction from 0 to 1, such as 0.9", c.readRatio)
	case c.given("read-batch") && !timeline:
		return usagef("--read-batch goes with --workload timeline")
	case c.readBatch < 1 || c.readBatch > shardcounter.MaxReadBatch:
		return usagef("--read-batch %d: give 1 to %d counters", c.readBatch, shardcounter.MaxReadBatch)
	case c.readCons != "strong" && c.readCons != "cached":
		return usagef("--read-consistency %q: give strong or cached", c.readCons)
	case c.given("members") && !c.hasKind(shardcounter.KindDistinct):
		return usagef("--members goes with --kind distinct")
	case c.members < 1:
		return usagef("--members %d: give 1 or more", c.members)
	case !(c.decrRatio >= 0 && c.decrRatio <= 1):
		return usagef("--decr-ratio %v: give a fraction from 0 to 1, such as 0.5", c.decrRatio)
	case c.pipeline < 1 || c.pipeline > bench.MaxPipeline:
		return usagef("--pipeline %d: give 1 to %d commands per round trip", c.pipeline, bench.MaxPipeline)
	case c.tokenFile != "" && c.server == "" && c.resp == "":
		return usagef("--token-file goes with --server or --resp")
	}
	return nil
}

// variants is the counters each path runs on: one a --kind, then the
// bounded and windowed ones.
func (c *benchCommand) variants() ([]bench.Variant, error) {
	bounded := c.min.set || c.max.set
	var variants []bench.Variant
	for _, k := range c.kindList() {
		switch k {
		case shardcounter.KindSum:
			variants = append(variants, bench.Plain())
		case shardcounter.KindDistinct:
			variants = append(variants, bench.Distinct())
		default:
			return nil, usagef("--kind %q is unknown: use sum or distinct", k)
		}
	}
	if (bounded || c.window != "") && !c.hasKind(shardcounter.KindSum) {
		return nil, usagef("--min, --max and --window go with --kind sum: a distinct counter's value is its member count")
	}
	if bounded {
		v := bench.Bounded(c.min.ptr(), c.max.ptr())
		if err := shardcounter.ValidateSpec(shardcounter.Spec{Shards: 1, Min: v.Min, Max: v.Max}); err != nil {
			return nil, usagef("--min/--max: %s", errorText(err))
		}
		variants = append(variants, v)
	}
	if c.window != "" {
		w, err := shardcounter.ParseWindow(c.window)
		if err != nil {
			return nil, usagef("--window: %s", errorText(err))
		}
		variants = append(variants, bench.Windowed(*w))
	}
	return variants, nil
}

// pathPlan is the plan of shardcounter's paths that --path asks for, and
// whether the peers run.
func (c *benchCommand) pathPlan() (*benchPlan, bool, error) {
	paths := []string(c.paths)
	if len(paths) == 0 && len(c.peers) == 0 {
		paths = []string{bench.PathNaive}
	}
	runPeers := len(c.peers) > 0
	p := &benchPlan{storeDSN: c.store, tokenFile: c.tokenFile}
	for _, path := range paths {
		switch path {
		case bench.PathNaive, bench.PathEngine, bench.PathHTTP, bench.PathRESP:
			if !slices.Contains(p.storePaths, path) {
				p.storePaths = append(p.storePaths, path)
			}
		case bench.PathPeer:
			runPeers = true
		default:
			return nil, false, usagef("--path %q is unknown: use naive, engine, http, resp or peer", path)
		}
	}
	has := func(path string) bool { return slices.Contains(p.storePaths, path) }
	switch {
	case c.server != "" && (has(bench.PathNaive) || has(bench.PathEngine)):
		return nil, false, usagef("--server is the http path's target: measure naive and engine in another run, on --store")
	case c.resp != "" && !has(bench.PathRESP):
		return nil, false, usagef("--resp is the resp path's target: add --path resp")
	case has(bench.PathRESP) && c.window != "":
		return nil, false, usagef("--window with --path resp: RESP has no command that creates a windowed counter (SC.CREATE takes SHARDS, KIND, MIN, MAX)")
	case c.pipeline > 1 && slices.ContainsFunc(p.storePaths, func(path string) bool { return path != bench.PathRESP }):
		return nil, false, usagef("--pipeline is for the resp path and the Redis peers: measure the other paths in another run")
	}
	p.needStore = has(bench.PathNaive) || has(bench.PathEngine) || (has(bench.PathHTTP) && c.server == "") || (has(bench.PathRESP) && c.resp == "")
	return p, runPeers, nil
}

// kindList is --kind's kinds, each once, in order; sum when none.
func (c *benchCommand) kindList() []shardcounter.Kind {
	var kinds []shardcounter.Kind
	for _, k := range c.kinds {
		if !slices.Contains(kinds, shardcounter.Kind(k)) {
			kinds = append(kinds, shardcounter.Kind(k))
		}
	}
	if len(kinds) == 0 {
		kinds = []shardcounter.Kind{shardcounter.KindSum}
	}
	return kinds
}

func (c *benchCommand) hasKind(k shardcounter.Kind) bool { return slices.Contains(c.kindList(), k) }

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
