package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bench"
	"github.com/shardcounter/shardcounter/dsn"
)

// rankingFlags are the flags `bench --workload ranking` takes: it
// measures one engine with and without a ranking, and the sorted-set
// peer, not shardcounter's paths.
var rankingFlags = map[string]bool{
	"workload": true, "store": true, "counters": true, "clients": true, "duration": true,
	"last": true, "peer": true, "peer-redis": true,
}

// peerRedisZset is the ranking workload's peer: ZINCRBY and ZREVRANGE on
// one Redis sorted set.
const peerRedisZset = "redis-zset"

// rankingCounters is --counters' default for the ranking workload.
const rankingCounters = 100_000

// rankingConfig checks the ranking workload's flags and turns them into
// its configuration, without its store.
func (c *benchCommand) rankingConfig(args []string) (bench.RankingConfig, error) {
	cfg := bench.RankingConfig{Counters: c.counters, Clients: c.clients, Duration: c.duration, Last: c.last, Out: c.m.Stdout}
	if len(args) > 0 {
		return cfg, usagef("unexpected argument %q: bench takes only flags", args[0])
	}
	bad := ""
	c.fs.Visit(func(f *flag.Flag) {
		if !rankingFlags[f.Name] && bad == "" {
			bad = f.Name
		}
	})
	if bad != "" {
		return cfg, usagef("--%s does not go with --workload ranking: it takes --store, --counters, --clients, --duration, --last, --peer %s and --peer-redis", bad, peerRedisZset)
	}
	if !c.given("counters") {
		cfg.Counters = rankingCounters
	}
	for _, p := range c.peers {
		if p != peerRedisZset {
			return cfg, usagef("--peer %q: the ranking workload's peer is %s (ZINCRBY and ZREVRANGE on one sorted set)", p, peerRedisZset)
		}
		cfg.Peer = true
	}
	switch {
	case len(c.peerRedis) > 1:
		return cfg, usagef("--peer-redis: the ranking workload takes one")
	case len(c.peerRedis) == 1 && !cfg.Peer:
		return cfg, usagef("--peer-redis goes with --peer %s", peerRedisZset)
	case cfg.Counters < 2 || cfg.Clients < 1 || cfg.Duration <= 0:
		return cfg, usagef("--counters must be 2 or more, --clients and --duration positive")
	case cfg.Last < 0 || cfg.Last%time.Minute != 0 || cfg.Last > time.Hour:
		return cfg, usagef("--last %v: give whole minutes up to 1h (the counters keep 1-minute buckets an hour), or leave it out to rank by value", cfg.Last)
	}
	if len(c.peerRedis) == 1 {
		cfg.PeerRedis = c.peerRedis[0]
	}
	return cfg, nil
}

// runRanking is `bench --workload ranking`: bench.Ranking on --store (a
// Pebble store in a temporary directory by default), its table on
// stdout.
func (c *benchCommand) runRanking(ctx context.Context, args []string) error {
	cfg, err := c.rankingConfig(args)
	if err != nil {
		return err
	}
	store, storeDSN, closeStore, err := c.openBenchStore(ctx)
	if err != nil {
		return err
	}
	defer closeStore()
	cfg.Store = store
	fmt.Fprintf(c.m.Stdout, "# store %s\n", dsn.Redact(storeDSN))
	if _, err := bench.Ranking(ctx, cfg); err != nil {
		return runError(err)
	}
	return nil
}

// openBenchStore opens --store, or a Pebble store in a temporary directory
// when it is not given, for the workloads that run on one store; done
// closes it and removes that directory.
func (c *benchCommand) openBenchStore(ctx context.Context) (store shardcounter.CounterStore, storeDSN string, done func(), err error) {
	storeDSN, dir := c.store, ""
	if storeDSN == "" {
		if dir, err = os.MkdirTemp("", "shardcounter-bench"); err != nil {
			return nil, "", nil, err
		}
		storeDSN = "pebble:" + filepath.Join(dir, "pebble")
	}
	if store, err = dsn.Open(ctx, storeDSN); err != nil {
		if dir != "" {
			os.RemoveAll(dir)
		}
		return nil, "", nil, fmt.Errorf("open store %s: %w", dsn.Redact(storeDSN), err)
	}
	return store, storeDSN, func() {
		store.Close()
		if dir != "" {
			os.RemoveAll(dir)
		}
	}, nil
}
