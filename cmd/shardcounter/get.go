package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/shardcounter/shardcounter"
)

// getCommand is `shardcounter get ID [--cached]`. It prints the value
// alone, so that scripts can use it directly.
type getCommand struct {
	clientFlags
	cached bool
}

func newGetCommand(m *Main) command { return &getCommand{clientFlags: clientFlags{m: m}} }

func (c *getCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.BoolVar(&c.cached, "cached", false, "read the cached rollup: cheaper, may lag by max_staleness_ms")
}

func (c *getCommand) run(ctx context.Context, args []string) error {
	id, err := idArg(args)
	if err != nil {
		return err
	}
	client, err := c.client()
	if err != nil {
		return err
	}
	consistency := shardcounter.Strong
	if c.cached {
		consistency = shardcounter.Cached
	}
	reading, err := client.ReadCounter(ctx, id, consistency)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(reading)
	}
	_, err = fmt.Fprintln(c.m.Stdout, reading.Value)
	return err
}
