package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/shardcounter/shardcounter"
)

// expireCommand is `shardcounter expire ID TTL`: the name (a counter, or a
// hash with all its fields) expires TTL from now.
type expireCommand struct{ clientFlags }

func newExpireCommand(m *Main) command { return &expireCommand{clientFlags{m: m}} }

func (c *expireCommand) flags(fs *flag.FlagSet) { c.register(fs) }

func (c *expireCommand) run(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return usagef("expected a counter ID and a TTL such as 30s or 1d, got %d arguments", len(args))
	}
	ttl, err := shardcounter.ParseDuration(args[1])
	if err == nil {
		err = shardcounter.ValidateTTL(time.Duration(ttl))
	}
	if err != nil {
		return usagef("TTL: %s", shardcounter.ErrorMessage(err))
	}
	id, client, err := c.counterClient(args[:1])
	if err != nil {
		return err
	}
	ok, err := client.ExpireCounter(ctx, id, time.Now().Add(time.Duration(ttl)))
	if err != nil {
		return err
	}
	if !ok {
		return shardcounter.CounterNotFound(id)
	}
	return c.printTTL(ctx, id)
}

// printTTL prints the name's deadline as the server now has it.
func (c *clientFlags) printTTL(ctx context.Context, id string) error {
	client, err := c.client()
	if err != nil {
		return err
	}
	ttl, err := client.CounterTTL(ctx, id)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(ttl)
	}
	switch {
	case !ttl.Exists:
		return shardcounter.CounterNotFound(id)
	case ttl.ExpiresAt == nil:
		_, err = fmt.Fprintf(c.m.Stdout, "%s has no deadline\n", showID(id))
	default:
		left := time.Duration(ttl.RemainingMS) * time.Millisecond
		_, err = fmt.Fprintf(c.m.Stdout, "%s expires in %s, at %s\n", showID(id), left, ttl.ExpiresAt.Format(time.RFC3339Nano))
	}
	return err
}

// ttlCommand is `shardcounter ttl ID`.
type ttlCommand struct{ clientFlags }

func newTTLCommand(m *Main) command { return &ttlCommand{clientFlags{m: m}} }

func (c *ttlCommand) flags(fs *flag.FlagSet) { c.register(fs) }

func (c *ttlCommand) run(ctx context.Context, args []string) error {
	id, _, err := c.counterClient(args)
	if err != nil {
		return err
	}
	return c.printTTL(ctx, id)
}

// persistCommand is `shardcounter persist ID`.
type persistCommand struct{ clientFlags }

func newPersistCommand(m *Main) command { return &persistCommand{clientFlags{m: m}} }

func (c *persistCommand) flags(fs *flag.FlagSet) { c.register(fs) }

func (c *persistCommand) run(ctx context.Context, args []string) error {
	id, client, err := c.counterClient(args)
	if err != nil {
		return err
	}
	if _, err := client.PersistCounter(ctx, id); err != nil {
		return err
	}
	return c.printTTL(ctx, id)
}
