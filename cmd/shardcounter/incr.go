package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/shardcounter/shardcounter"
)

// writeCommand is `shardcounter incr` and, with negate set, `decr`:
// ID [--by N] [--request-id S].
type writeCommand struct {
	clientFlags
	negate    bool
	by        int64
	requestID string
}

func newIncrCommand(m *Main) command { return &writeCommand{clientFlags: clientFlags{m: m}} }

func (c *writeCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.Int64Var(&c.by, "by", 1, "the amount `N`, at least 1")
	fs.StringVar(&c.requestID, "request-id", "", "make the write retry-safe: a repeat with the same `ID` is not applied again")
}

func (c *writeCommand) run(ctx context.Context, args []string) error {
	if c.by < 1 {
		return usagef("--by is %d: give a whole number of at least 1", c.by)
	}
	if c.requestID != "" {
		if err := shardcounter.ValidateID("request id", c.requestID); err != nil {
			return usagef("--request-id: %s", shardcounter.ErrorMessage(err))
		}
	}
	id, client, err := c.counterClient(args)
	if err != nil {
		return err
	}
	delta, verb := c.by, "incremented"
	if c.negate {
		delta, verb = -c.by, "decremented"
	}
	res, err := client.WriteCounter(ctx, shardcounter.Write{Counter: id, Delta: delta, RequestID: c.requestID})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(res)
	}
	if res.Duplicate {
		_, err = fmt.Fprintf(c.m.Stdout, "%s unchanged: request id %s was already applied\n", showID(id), c.requestID)
		return err
	}
	_, err = fmt.Fprintf(c.m.Stdout, "%s %s by %d\n", verb, showID(id), c.by)
	return err
}
