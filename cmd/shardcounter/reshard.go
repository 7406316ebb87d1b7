package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/shardcounter/shardcounter"
)

// reshardCommand is `shardcounter reshard ID --shards N`.
type reshardCommand struct {
	clientFlags
	shards int
}

func newReshardCommand(m *Main) command { return &reshardCommand{clientFlags: clientFlags{m: m}} }

func (c *reshardCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.IntVar(&c.shards, "shards", 0, "the new shard count `N`, 1 to 1024 (required)")
}

func (c *reshardCommand) run(ctx context.Context, args []string) error {
	if c.shards == 0 {
		return usagef("--shards is required: give the new shard count, 1 to %d", shardcounter.MaxShards)
	}
	if err := shardcounter.ValidateShards(c.shards); err != nil {
		return usagef("--shards: %s", shardcounter.ErrorMessage(err))
	}
	id, client, err := c.counterClient(args)
	if err != nil {
		return err
	}
	counter, err := client.ReshardCounter(ctx, id, c.shards)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(counter)
	}
	_, err = fmt.Fprintf(c.m.Stdout, "%s now has %d shards\n", counter.ID, counter.Shards)
	return err
}
