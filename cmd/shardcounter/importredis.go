package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/dsn"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/transfer"
)

// importRedisCommand is `shardcounter import-redis`: a migration from a
// live Redis's keys.
type importRedisCommand struct {
	storeFlags
	from   string
	match  string
	shards int
}

func newImportRedisCommand(m *Main) command { return &importRedisCommand{storeFlags: storeFlags{m: m}} }

func (c *importRedisCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.StringVar(&c.from, "from", "", "the Redis to read, `redis://HOST:PORT[/DB]`, or redis+cluster://HOST:PORT for a cluster")
	fs.StringVar(&c.match, "match", "", "SCAN MATCH `PATTERN` of the keys to move, such as 'app:*'")
	fs.IntVar(&c.shards, "shards", engine.DefaultShards, "shard count of the counters made (`N`)")
}

func (c *importRedisCommand) example() string {
	return `  shardcounter import-redis --from redis://127.0.0.1:6379 --match 'app:*' --store pebble:./data
  shardcounter import-redis --from redis://10.0.0.5:6379/2 --match '*' --server http://127.0.0.1:8080 --shards 4
Integer strings become sum counters, sets distinct counters, hashes of
integers hashes of counters; every other key is listed on stderr and
skipped. It reads with SCAN, SSCAN and HSCAN (never KEYS), so Redis goes
on serving. Run it again after more writes to bring the counters up to
date (docs/OPERATIONS.md, "Moving from Redis").`
}

func (c *importRedisCommand) run(ctx context.Context, args []string) error {
	if len(args) != 0 {
		return usagef("import-redis takes no arguments, got %q", args)
	}
	if c.from == "" || c.match == "" {
		return usagef("give --from redis://HOST:PORT and --match PATTERN ('*' for every key)")
	}
	if err := shardcounter.ValidateShards(c.shards); err != nil {
		return usagef("--shards: %s", errorText(err))
	}
	if kind, err := dsn.Scheme(c.from); err != nil || (kind != dsn.Redis && kind != dsn.RedisCluster) {
		return usagef("--from %q: give redis://HOST:PORT[/DB] or redis+cluster://HOST:PORT", dsn.Redact(c.from))
	}
	src, err := transfer.OpenRedisSource(ctx, c.from)
	if err != nil {
		return fmt.Errorf("cannot read --from: %s", errorText(err))
	}
	defer src.Close()
	p := c.progress("keys")
	ropts := transfer.RedisOptions{Match: c.match, Shards: c.shards, Progress: p, Skipped: func(s transfer.Skipped) {
		fmt.Fprintf(c.m.Stderr, "shardcounter import-redis: skipped %s (%s): %s\n", s.Key, s.Type, s.Reason)
	}}
	var st transfer.Stats
	var rs transfer.RedisStats
	if c.store == "" {
		st, rs, err = c.viaServer(ctx, src, ropts)
	} else {
		var s shardcounter.CounterStore
		if s, err = c.open(ctx, nil); err != nil {
			p.Done("stopped after reading", "")
			return err
		}
		defer s.Close()
		st, rs, err = transfer.ImportRedis(ctx, src, s, ropts, transfer.ImportOptions{Conflict: (&importCommand{storeFlags: c.storeFlags}).conflict})
	}
	if err != nil {
		p.Done("stopped after reading", "")
		return fmt.Errorf("import-redis: %s (run it again to resume: what is in stays in)", errorText(err))
	}
	p.Done("read", fmt.Sprintf("%d counters and %d members moved, %d keys skipped, %d conflicts, %d keys had a TTL, carried over as a deadline",
		st.Counters, st.Members, rs.Skipped, st.Conflicts, rs.WithTTL))
	if st.Conflicts > 0 {
		return fmt.Errorf("%d counters exist with other options and were left alone: see above", st.Conflicts)
	}
	return nil
}

// viaServer streams the migration to a server's import endpoint.
func (c *importRedisCommand) viaServer(ctx context.Context, src transfer.RedisSource, ropts transfer.RedisOptions) (transfer.Stats, transfer.RedisStats, error) {
	pr, pw := io.Pipe()
	var rs transfer.RedisStats
	done := make(chan error, 1)
	go func() {
		var err error
		rs, err = transfer.EncodeRedis(ctx, src, pw, ropts)
		pw.CloseWithError(err)
		done <- err
	}()
	ic := &importCommand{storeFlags: c.storeFlags}
	st, err := ic.importServer(ctx, pr)
	pr.CloseWithError(io.ErrClosedPipe)
	if serr := <-done; err == nil && serr != nil {
		err = serr
	}
	return st, rs, err
}
