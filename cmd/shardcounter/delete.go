package main

import (
	"context"
	"flag"
	"fmt"
)

// deleteCommand is `shardcounter delete ID`. With --json it prints
// nothing, as the API's reply (204) has no body.
type deleteCommand struct {
	clientFlags
}

func newDeleteCommand(m *Main) command { return &deleteCommand{clientFlags: clientFlags{m: m}} }

func (c *deleteCommand) flags(fs *flag.FlagSet) { c.register(fs) }

func (c *deleteCommand) run(ctx context.Context, args []string) error {
	id, client, err := c.counterClient(args)
	if err != nil {
		return err
	}
	if err := client.DeleteCounter(ctx, id); err != nil {
		return err
	}
	if c.json {
		return nil
	}
	_, err = fmt.Fprintf(c.m.Stdout, "deleted %s\n", showID(id))
	return err
}
