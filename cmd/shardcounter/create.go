package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/shardcounter/shardcounter"
)

// createCommand is `shardcounter create ID [--shards N]`.
type createCommand struct {
	clientFlags
	shards int
}

func newCreateCommand(m *Main) command { return &createCommand{clientFlags: clientFlags{m: m}} }

func (c *createCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.IntVar(&c.shards, "shards", 0, "`N` shards, 1 to 1024 (default: the server's --default-shards)")
}

func (c *createCommand) run(ctx context.Context, args []string) error {
	id, err := idArg(args)
	if err != nil {
		return err
	}
	if c.shards != 0 {
		if err := shardcounter.ValidateShards(c.shards); err != nil {
			return usagef("--shards: %s", shardcounter.ErrorMessage(err))
		}
	}
	client, err := c.client()
	if err != nil {
		return err
	}
	counter, created, err := client.CreateCounter(ctx, id, shardcounter.CreateOptions{Shards: c.shards})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(counter)
	}
	verb := "created %s with %d shards\n"
	if !created {
		verb = "%s already exists with %d shards\n"
	}
	_, err = fmt.Fprintf(c.m.Stdout, verb, counter.ID, counter.Shards)
	return err
}
