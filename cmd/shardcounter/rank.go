package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// rankCommand is `shardcounter rank create|list|delete`: the definitions
// of rankings (docs/RANKINGS.md).
type rankCommand struct {
	clientFlags
	prefix       string
	last         string
	size         int
	maxStaleness string
}

func newRankCommand(m *Main) command { return &rankCommand{clientFlags: clientFlags{m: m}} }

func (c *rankCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.StringVar(&c.prefix, "prefix", "", "create: rank the counters whose ids start with `P`")
	fs.StringVar(&c.last, "last", "", "create: rank by the sum of the trailing `DURATION` of windowed counters (such as 1h) instead of all time")
	fs.IntVar(&c.size, "size", 0, fmt.Sprintf("create: keep the top `N`, 1 to %d (default %d)", shardcounter.MaxRankingSize, shardcounter.DefaultRankingSize))
	fs.StringVar(&c.maxStaleness, "max-staleness", "", "create: how old a top list may be when read, `DURATION` from 10ms to 1h (default 1s)")
}

func (c *rankCommand) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("expected rank create NAME --prefix P, rank list or rank delete NAME")
	}
	switch args[0] {
	case "create":
		return c.create(ctx, args[1:])
	case "list":
		if len(args) != 1 {
			return usagef("rank list takes no arguments, got %q", args[1:])
		}
		return c.list(ctx)
	case "delete":
		name, err := rankingArg("delete", args[1:])
		if err != nil {
			return err
		}
		client, err := c.client()
		if err != nil {
			return err
		}
		if err := client.DeleteRanking(ctx, name); err != nil {
			return err
		}
		if c.json {
			return nil
		}
		_, err = fmt.Fprintf(c.m.Stdout, "deleted ranking %s\n", name)
		return err
	}
	return usagef("unknown rank action %q: use create, list or delete", args[0])
}

// rankingArg returns the one ranking NAME an action takes.
func rankingArg(action string, args []string) (string, error) {
	if len(args) != 1 {
		return "", usagef("expected one ranking NAME after %s, got %d arguments", action, len(args))
	}
	if err := shardcounter.ValidateName("ranking name", args[0]); err != nil {
		return "", usagef("%s", shardcounter.ErrorMessage(err))
	}
	return args[0], nil
}

// options reads the create flags.
func (c *rankCommand) options() (shardcounter.RankingOptions, error) {
	o := shardcounter.RankingOptions{Prefix: c.prefix, Size: c.size}
	var err error
	if c.last != "" {
		if o.Last, err = shardcounter.ParseDuration(c.last); err != nil {
			return o, usagef("--last: %s", shardcounter.ErrorMessage(err))
		}
	}
	if c.maxStaleness != "" {
		d, err := time.ParseDuration(c.maxStaleness)
		if err != nil {
			return o, usagef("--max-staleness %q cannot be read: write 1s, 250ms or 5m", c.maxStaleness)
		}
		o.MaxStaleness = shardcounter.Duration(d)
	}
	return o, nil
}

func (c *rankCommand) create(ctx context.Context, args []string) error {
	name, err := rankingArg("create", args)
	if err != nil {
		return err
	}
	o, err := c.options()
	if err != nil {
		return err
	}
	if err := shardcounter.ValidateRanking(name, o); err != nil {
		return usagef("%s", shardcounter.ErrorMessage(err))
	}
	client, err := c.client()
	if err != nil {
		return err
	}
	r, created, err := client.CreateRanking(ctx, name, o)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r)
	}
	verb := "created"
	if !created {
		verb = "ranking exists:"
	}
	_, err = fmt.Fprintf(c.m.Stdout, "%s %s\n", verb, describeRanking(r))
	return err
}

func describeRanking(r *shardcounter.Ranking) string {
	by := "all-time value"
	if r.Windowed() {
		by = "sum of the last " + r.Last.String()
	}
	return fmt.Sprintf("ranking %s: top %d of counters %q* by %s, at most %s stale", r.Name, r.Size, r.Prefix, by, time.Duration(r.MaxStaleness))
}

func (c *rankCommand) list(ctx context.Context) error {
	client, err := c.client()
	if err != nil {
		return err
	}
	rs, err := client.ListRankings(ctx)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(shttp.RankingsResponse{Rankings: rs})
	}
	tw := tabwriter.NewWriter(c.m.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPREFIX\tLAST\tSIZE\tMAX_STALENESS")
	for _, r := range rs {
		last := "-"
		if r.Windowed() {
			last = r.Last.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", r.Name, r.Prefix, last, r.Size, time.Duration(r.MaxStaleness))
	}
	return tw.Flush()
}

// topCommand is `shardcounter top NAME [-k N]`.
type topCommand struct {
	clientFlags
	k int
}

func newTopCommand(m *Main) command { return &topCommand{clientFlags: clientFlags{m: m}} }

func (c *topCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.IntVar(&c.k, "k", shttp.DefaultTopK, fmt.Sprintf("print the first `N` entries, 1 to %d (0: all the ranking keeps)", shardcounter.MaxRankingSize))
}

func (c *topCommand) run(ctx context.Context, args []string) error {
	name, err := rankingArg("top", args)
	if err != nil {
		return err
	}
	if err := shardcounter.CheckTopK(c.k); err != nil {
		return usagef("-k: %s", shardcounter.ErrorMessage(err))
	}
	client, err := c.client()
	if err != nil {
		return err
	}
	top, err := client.Top(ctx, name, c.k)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(top)
	}
	tw := tabwriter.NewWriter(c.m.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tID\tVALUE")
	for i, e := range top.Entries {
		fmt.Fprintf(tw, "%d\t%s\t%d\n", i+1, showID(e.ID), e.Value)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.m.Stdout, "as of %s (at most %s stale), %d counters ranked\n", top.AsOf.UTC().Format(time.RFC3339Nano), time.Duration(top.MaxStaleness), top.Counters)
	return err
}

// rankingRescanFlag registers --ranking-rescan on serve.
func (c *serveCommand) rankingRescanFlag(fs *flag.FlagSet) {
	fs.Func("ranking-rescan", "refresh rankings by reading every counter of their prefix, for a store that other servers or the store's own clients write to: true or false (default true on firestore:// and datastore://, whose seed clients write documents and entities directly, and false elsewhere)", func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("give true or false")
		}
		c.rankingRescan = &b
		return nil
	})
}

// rescanRankings returns --ranking-rescan, or the store's default.
func (c *serveCommand) rescanRankings() bool {
	if c.rankingRescan != nil {
		return *c.rankingRescan
	}
	return strings.HasPrefix(c.store, "firestore:") || strings.HasPrefix(c.store, "datastore:")
}
