package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/shardcounter/shardcounter"
)

// resetCommand is `shardcounter reset ID [--value N] [--delete]`: the
// counter's value becomes N (0 by default), or the counter is deleted, in
// one step with the server's writes of it; it prints the value before.
type resetCommand struct {
	clientFlags
	value int64
	del   bool
}

func newResetCommand(m *Main) command { return &resetCommand{clientFlags: clientFlags{m: m}} }

func (c *resetCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.Int64Var(&c.value, "value", 0, "the counter's value after the reset, `N`")
	fs.BoolVar(&c.del, "delete", false, "delete the counter instead, after reading its value")
}

func (c *resetCommand) run(ctx context.Context, args []string) error {
	r := shardcounter.Reset{Value: c.value, Delete: c.del}
	if err := shardcounter.ValidateReset(r); err != nil {
		return usagef("--delete takes no --value")
	}
	id, client, err := c.counterClient(args)
	if err != nil {
		return err
	}
	res, err := client.ResetCounter(ctx, id, r)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(res)
	}
	switch {
	case r.Delete && !res.Existed:
		_, err = fmt.Fprintf(c.m.Stdout, "%s did not exist\n", showID(id))
	case r.Delete:
		_, err = fmt.Fprintf(c.m.Stdout, "deleted %s, which was %d\n", showID(id), res.Old)
	case !res.Existed:
		_, err = fmt.Fprintf(c.m.Stdout, "created %s at %d\n", showID(id), res.Value)
	default:
		_, err = fmt.Fprintf(c.m.Stdout, "reset %s from %d to %d\n", showID(id), res.Old, res.Value)
	}
	return err
}
