package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// watchCommand is `shardcounter watch ID [--interval D]`. It prints the
// counter's value, then each new value as it changes, one a line, until
// interrupted (exit 0) or the counter is deleted (exit 1). Once it has
// printed a value, a dropped connection is reported on stderr and retried,
// and the output goes on where it stopped; before that, it fails as the
// other commands do.
type watchCommand struct {
	clientFlags
	interval time.Duration
}

func newWatchCommand(m *Main) command { return &watchCommand{clientFlags: clientFlags{m: m}} }

func (c *watchCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.DurationVar(&c.interval, "interval", shttp.DefaultWatchInterval,
		fmt.Sprintf("print at most one value per `DURATION` (%v to %v)", shttp.MinWatchInterval, shttp.MaxWatchInterval))
}

func (c *watchCommand) run(ctx context.Context, args []string) error {
	if c.interval < shttp.MinWatchInterval || c.interval > shttp.MaxWatchInterval {
		return usagef("--interval is %v: give %v to %v, such as 1s", c.interval, shttp.MinWatchInterval, shttp.MaxWatchInterval)
	}
	id, client, err := c.counterClient(args)
	if err != nil {
		return err
	}
	started := false
	for r, err := range client.Watch(ctx, id, c.interval) {
		switch {
		case started && shardcounter.ErrorCode(err) == shardcounter.EUNAVAILABLE:
			fmt.Fprintf(c.m.Stderr, "shardcounter watch: %s\n", oneLine(errorText(err)))
			continue
		case err != nil:
			return err
		case c.json:
			err = c.printJSON(r)
		default:
			_, err = fmt.Fprintln(c.m.Stdout, r.Value)
		}
		started = true
		if err != nil {
			return err
		}
	}
	return nil
}
