package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	shttp "github.com/shardcounter/shardcounter/http"
)

// seriesCommand is `shardcounter series ID [--last DURATION] [--bucket B]`:
// a windowed counter's buckets, oldest first, one line each.
type seriesCommand struct {
	clientFlags
	last   durationFlag
	bucket durationFlag
}

func newSeriesCommand(m *Main) command { return &seriesCommand{clientFlags: clientFlags{m: m}} }

func (c *seriesCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.Var(&c.last, "last", "the buckets of the last `DURATION` (24h, 7d), the current one included: 3h of hourly buckets is 3 (default: all the counter retains)")
	fs.Var(&c.bucket, "bucket", "sum into buckets of width `B`, a multiple of the counter's own (default: its own)")
}

func (c *seriesCommand) run(ctx context.Context, args []string) error {
	id, client, err := c.counterClient(args)
	if err != nil {
		return err
	}
	last := c.last.d
	if last == 0 {
		last = shttp.AllRetained
	}
	series, err := client.ReadSeries(ctx, id, time.Duration(last), time.Duration(c.bucket.d))
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(series)
	}
	tw := tabwriter.NewWriter(c.m.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "START (%s buckets)\tVALUE\n", series.Bucket)
	for _, b := range series.Buckets {
		fmt.Fprintf(tw, "%s\t%d\n", b.Start.Format(time.RFC3339), b.Value)
	}
	return tw.Flush()
}

// shardsCommand is `shardcounter shards ID`: each shard's value and the
// node that holds it.
type shardsCommand struct {
	clientFlags
}

func newShardsCommand(m *Main) command { return &shardsCommand{clientFlags: clientFlags{m: m}} }

func (c *shardsCommand) flags(fs *flag.FlagSet) { c.register(fs) }

func (c *shardsCommand) run(ctx context.Context, args []string) error {
	id, client, err := c.counterClient(args)
	if err != nil {
		return err
	}
	p, err := client.Placement(ctx, id)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(p)
	}
	slots := false
	for _, s := range p.Places {
		slots = slots || s.Slot != nil
	}
	tw := tabwriter.NewWriter(c.m.Stdout, 0, 8, 2, ' ', 0)
	if slots {
		fmt.Fprintln(tw, "SHARD\tVALUE\tNODE\tSLOT")
	} else {
		fmt.Fprintln(tw, "SHARD\tVALUE\tNODE")
	}
	var total int64
	for _, s := range p.Places {
		total += s.Value
		if slots {
			slot := "-"
			if s.Slot != nil {
				slot = fmt.Sprint(*s.Slot)
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\n", s.Shard, s.Value, s.Node, slot)
		} else {
			fmt.Fprintf(tw, "%d\t%d\t%s\n", s.Shard, s.Value, s.Node)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.m.Stdout, "%d shards, total %d, as of %s\n", p.Shards, total, p.AsOf.Format(time.RFC3339Nano))
	return err
}
