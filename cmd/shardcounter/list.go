package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// listCommand is `shardcounter list [--prefix P] [--limit N]`. It follows
// page tokens itself, so it prints every matching counter unless --limit
// stops it earlier.
type listCommand struct {
	clientFlags
	prefix string
	limit  int
}

func newListCommand(m *Main) command { return &listCommand{clientFlags: clientFlags{m: m}} }

func (c *listCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.StringVar(&c.prefix, "prefix", "", "only counters whose id starts with `P`")
	fs.IntVar(&c.limit, "limit", 0, "print at most `N` counters (default: all)")
}

func (c *listCommand) run(ctx context.Context, args []string) error {
	if len(args) != 0 {
		return usagef("list takes no arguments, got %q: use --prefix to filter", args)
	}
	if c.limit < 0 {
		return usagef("--limit is %d: give 1 or more, or leave it out for all", c.limit)
	}
	if c.prefix != "" {
		if err := shardcounter.ValidateCounterID("prefix", c.prefix); err != nil {
			return usagef("--prefix: %s", shardcounter.ErrorMessage(err))
		}
	}
	client, err := c.client()
	if err != nil {
		return err
	}
	counters, err := allPages(c.limit, func(limit int, after string) ([]*shardcounter.Counter, string, error) {
		page, err := client.ListCounters(ctx, shardcounter.ListOptions{Prefix: c.prefix, After: after, Limit: limit})
		if err != nil {
			return nil, "", err
		}
		return page.Counters, page.Next, nil
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(shttp.ListResponse{Counters: counters})
	}
	tw := tabwriter.NewWriter(c.m.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSHARDS\tCREATED")
	for _, counter := range counters {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", showID(counter.ID), counter.Shards, counter.CreatedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}
