package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// getCommand is `shardcounter get ID... [--cached] [--last DURATION]`. For
// one counter it prints the value alone, so that scripts can use it
// directly; for several, a line of id and value each, read in one request
// (POST /v1/reads).
type getCommand struct {
	clientFlags
	cached bool
	last   durationFlag
}

func newGetCommand(m *Main) command { return &getCommand{clientFlags: clientFlags{m: m}} }

func (c *getCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.BoolVar(&c.cached, "cached", false, "read the cached rollup: cheaper, may lag by max_staleness_ms")
	fs.Var(&c.last, "last", "the sum of the writes of a counter with a window over its last `DURATION` (24h, 7d): as many buckets as that spans, the current one included")
}

func (c *getCommand) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("expected one or more counter IDs")
	}
	if len(args) > shardcounter.MaxReadBatch {
		return usagef("%d counter IDs: give at most %d", len(args), shardcounter.MaxReadBatch)
	}
	for _, id := range args {
		if err := checkArg("counter id", id); err != nil {
			return err
		}
	}
	if c.cached && c.last.d != 0 {
		return usagef("--cached and --last go apart: a read of the last span of time is strong")
	}
	client, err := c.client()
	if err != nil {
		return err
	}
	consistency := shardcounter.Strong
	if c.cached {
		consistency = shardcounter.Cached
	}
	if len(args) == 1 {
		var reading *shardcounter.Reading
		if c.last.d != 0 {
			reading, err = client.ReadWindow(ctx, args[0], time.Duration(c.last.d))
		} else {
			reading, err = client.ReadCounter(ctx, args[0], consistency)
		}
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(reading)
		}
		_, err = fmt.Fprintln(c.m.Stdout, reading.Value)
		return err
	}

	var results []shardcounter.ReadResult
	if c.last.d != 0 {
		// There is no batch read of windows: one request a counter.
		for _, id := range args {
			r, err := client.ReadWindow(ctx, id, time.Duration(c.last.d))
			if err != nil && !errors.Is(err, shardcounter.ErrNotFound) {
				return err
			}
			results = append(results, shardcounter.ReadResult{Reading: r, Err: err})
		}
	} else if results, err = client.ReadCounters(ctx, args, consistency); err != nil {
		return err
	}
	var missing []string
	resp := shttp.ReadsResponse{Readings: make([]shttp.ReadItem, len(args))}
	tw := tabwriter.NewWriter(c.m.Stdout, 0, 8, 2, ' ', 0)
	for i, res := range results {
		resp.Readings[i] = shttp.ReadItem{ID: args[i], Reading: res.Reading}
		if res.Err != nil {
			resp.Readings[i].Error = &shttp.ErrorBody{Code: shardcounter.ErrorCode(res.Err), Message: shardcounter.ErrorMessage(res.Err)}
			missing = append(missing, fmt.Sprintf("%q", args[i]))
			fmt.Fprintf(tw, "%s\t-\n", showID(args[i]))
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\n", showID(args[i]), res.Reading.Value)
	}
	if c.json {
		if err := c.printJSON(resp); err != nil {
			return err
		}
	} else if err := tw.Flush(); err != nil {
		return err
	}
	if len(missing) > 0 {
		return shardcounter.Errorf(shardcounter.ENOTFOUND, "counters %s not found", strings.Join(missing, ", "))
	}
	return nil
}
