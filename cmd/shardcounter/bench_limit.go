package main

import (
	"context"
	"flag"

	"github.com/shardcounter/shardcounter/bench"
	"github.com/shardcounter/shardcounter/dsn"
)

// limitFlags are the flags `bench --workload limit` takes: it measures
// takes on one hot key through CL.THROTTLE and the HTTP API over --store,
// and the two Redis limiters, not shardcounter's counter paths.
var limitFlags = map[string]bool{
	"workload": true, "store": true, "clients": true, "duration": true,
	"peer-redis": true, "json": true, "cpuprofile": true,
}

// limitConfig checks the limit workload's flags and turns them into its
// configuration, without its store.
func (c *benchCommand) limitConfig(args []string) (bench.LimitConfig, error) {
	cfg := bench.LimitConfig{Clients: c.clients, Duration: c.duration}
	if len(args) > 0 {
		return cfg, usagef("unexpected argument %q: bench takes only flags", args[0])
	}
	bad := ""
	c.fs.Visit(func(f *flag.Flag) {
		if !limitFlags[f.Name] && bad == "" {
			bad = f.Name
		}
	})
	switch {
	case bad != "":
		return cfg, usagef("--%s does not go with --workload limit: it takes --store, --clients, --duration, --peer-redis, --json and --cpuprofile", bad)
	case len(c.peerRedis) > 1:
		return cfg, usagef("--peer-redis: the limit workload takes one")
	case cfg.Clients < 1 || cfg.Duration <= 0:
		return cfg, usagef("--clients and --duration must be positive")
	}
	if len(c.peerRedis) == 1 {
		if kind, err := dsn.Scheme(c.peerRedis[0]); err != nil || kind != dsn.Redis {
			return cfg, usagef("--peer-redis %q: give a redis://HOST:PORT URL", dsn.Redact(c.peerRedis[0]))
		}
		cfg.PeerRedis = c.peerRedis[0]
	}
	if c.store != "" {
		kind, err := dsn.Scheme(c.store)
		if err != nil {
			return cfg, usagef("--store: %v", err)
		}
		cfg.StoreName = kind
	}
	return cfg, nil
}

// runLimit is `bench --workload limit`: bench.Limits on --store (a Pebble
// store in a temporary directory by default), the table and the ratios
// to the peers on stdout.
func (c *benchCommand) runLimit(ctx context.Context, args []string) error {
	cfg, err := c.limitConfig(args)
	if err != nil {
		return err
	}
	if c.store == "" {
		cfg.StoreName = dsn.Pebble
	}
	store, storeDSN, closeStore, err := c.openBenchStore(ctx)
	if err != nil {
		return err
	}
	defer closeStore()
	cfg.Store = store
	if c.prog = newProgress(c.m.Stderr, 4); c.prog != nil {
		cfg.Progress = c.prog.update
		defer c.prog.done()
	}
	stopProfile, err := c.startCPUProfile()
	if err != nil {
		return err
	}
	defer stopProfile()
	runs, err := bench.Limits(ctx, cfg)
	settings := storeSettings(ctx, cfg.StoreName, storeDSN)
	for i := range runs {
		if runs[i].Path != bench.PathPeer {
			runs[i].Settings = settings
		}
	}
	if rerr := c.report(runs); err == nil {
		err = rerr
	}
	if err != nil {
		return runError(err)
	}
	if c.jsonFile != "" {
		return writeFile(c.jsonFile, bench.NewReport(runs).WriteJSON)
	}
	return nil
}
