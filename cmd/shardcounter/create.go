package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
)

// createCommand is `shardcounter create ID [--shards N] [--kind sum|distinct|approx]
// [--min V] [--max V] [--window BUCKET:RETENTION]`.
type createCommand struct {
	clientFlags
	shards   int
	kind     kindFlag
	min, max int64Flag
	window   windowFlag
	ttl      durationFlag
}

func newCreateCommand(m *Main) command { return &createCommand{clientFlags: clientFlags{m: m}} }

func (c *createCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.IntVar(&c.shards, "shards", 0, "`N` shards, 1 to 1024 (default: the server's --default-shards)")
	fs.Var(&c.kind, "kind", "`KIND` sum (add deltas, the default), distinct (count members, each once) or approx (estimate the members counted, in fixed memory: a HyperLogLog sketch per shard)")
	fs.Var(&c.min, "min", "refuse writes that would take the total below `V` (sum counters; V ≤ 0)")
	fs.Var(&c.max, "max", "refuse writes that would take the total above `V` (sum counters; V ≥ 0)")
	fs.Var(&c.window, "window", "also count writes in time buckets: `BUCKET:RETENTION`, BUCKET 1m, 1h or 1d, e.g. 1h:7d")
	fs.Var(&c.ttl, "ttl", "the counter expires `D` after its creation, such as 30s or 1d")
}

func (c *createCommand) run(ctx context.Context, args []string) error {
	if c.shards != 0 {
		if err := shardcounter.ValidateShards(c.shards); err != nil {
			return usagef("--shards: %s", shardcounter.ErrorMessage(err))
		}
	}
	opts := shardcounter.CreateOptions{Shards: c.shards, Kind: c.kind.k, Min: c.min.v, Max: c.max.v, Window: c.window.w, TTL: c.ttl.d}
	spec := shardcounter.Spec{Shards: shardcounter.MinShards, Kind: opts.Kind, Min: opts.Min, Max: opts.Max, Window: opts.Window, TTL: opts.TTL}
	if err := shardcounter.ValidateSpec(spec); err != nil {
		return usagef("%s", shardcounter.ErrorMessage(err))
	}
	id, client, err := c.counterClient(args)
	if err != nil {
		return err
	}
	counter, created, err := client.CreateCounter(ctx, id, opts)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(counter)
	}
	verb := "created %s with %d shards%s\n"
	if !created {
		verb = "%s already exists with %d shards%s\n"
	}
	desc := describeSpec(counter.Spec)
	if counter.ExpiresAt != nil {
		desc += ", expires at " + counter.ExpiresAt.Format(time.RFC3339Nano)
	}
	_, err = fmt.Fprintf(c.m.Stdout, verb, showID(counter.ID), counter.Shards, desc)
	return err
}

// describeSpec says what a counter was created with beyond its shards:
// nothing for a plain sum counter.
func describeSpec(s shardcounter.Spec) string {
	var parts []string
	if s.Kind == shardcounter.KindDistinct || s.Kind == shardcounter.KindApprox {
		parts = append(parts, string(s.Kind))
	}
	if s.Min != nil {
		parts = append(parts, fmt.Sprintf("min %d", *s.Min))
	}
	if s.Max != nil {
		parts = append(parts, fmt.Sprintf("max %d", *s.Max))
	}
	if s.Window != nil {
		parts = append(parts, fmt.Sprintf("window %s:%s", s.Window.Bucket, s.Window.Retention))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
