package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
)

// queryCommand is `shardcounter query NAME [--where FIELD==VALUE] [--after
// T] [--before T] [--order desc|asc] [--limit N] [--page-token S]`. It
// prints one page; the next page's token, if any, goes last.
type queryCommand struct {
	clientFlags
	where         string
	after, before string
	order         string
	limit         int
	pageToken     string
}

func newQueryCommand(m *Main) command { return &queryCommand{clientFlags: clientFlags{m: m}} }

func (c *queryCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.StringVar(&c.where, "where", "", "equality filter `FIELD==VALUE` on an indexed field; VALUE is JSON (a number, true, \"quoted\") or else a string")
	fs.StringVar(&c.after, "after", "", "only documents stamped after `T` (RFC 3339)")
	fs.StringVar(&c.before, "before", "", "only documents stamped before `T` (RFC 3339)")
	fs.StringVar(&c.order, "order", string(shardcounter.Desc), "`ORDER` by timestamp: desc (newest first) or asc")
	fs.IntVar(&c.limit, "limit", shardcounter.DefaultQueryLimit, "at most `N` documents, 1 to 1000")
	fs.StringVar(&c.pageToken, "page-token", "", "continue from the page that printed this `TOKEN`")
}

// parseWhere parses FIELD==VALUE. A VALUE that is JSON (2.5, true,
// "007") is taken as such, so numbers and strings that look like them can
// both be written; anything else is a string.
func parseWhere(s string) (shardcounter.Filter, error) {
	field, raw, ok := strings.Cut(s, "==")
	if !ok || field == "" {
		return shardcounter.Filter{}, fmt.Errorf("--where %q: write FIELD==VALUE, e.g. exchange==EXCHG1", s)
	}
	var v any = raw
	var j any
	if err := json.Unmarshal([]byte(raw), &j); err == nil {
		switch j.(type) {
		case string, float64, bool:
			v = j
		}
	}
	return shardcounter.Filter{Field: field, Op: "==", Value: v}, nil
}

func (c *queryCommand) run(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usagef("expected one collection NAME, got %d arguments", len(args))
	}
	name := args[0]
	if err := checkArg("collection name", name); err != nil {
		return err
	}
	q := shardcounter.Query{Order: shardcounter.Order(c.order), Limit: c.limit, PageToken: c.pageToken}
	if c.where != "" {
		f, err := parseWhere(c.where)
		if err != nil {
			return usagef("%v", err)
		}
		q.Where = []shardcounter.Filter{f}
	}
	for _, b := range []struct {
		flag, v string
		t       *time.Time
	}{{"--after", c.after, &q.After}, {"--before", c.before, &q.Before}} {
		if b.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, b.v)
		if err != nil {
			return usagef("%s %q is not RFC 3339: write it as 2019-01-01T13:45:23.010Z", b.flag, b.v)
		}
		*b.t = t
	}
	if q.Limit < 1 {
		return usagef("--limit is %d: give 1 to %d", q.Limit, shardcounter.MaxQueryLimit)
	}
	if err := shardcounter.ValidateQueryShape(q); err != nil {
		return usagef("%s", shardcounter.ErrorMessage(err))
	}
	client, err := c.client()
	if err != nil {
		return err
	}
	res, err := client.QueryDocuments(ctx, name, q)
	if err != nil {
		return collectionErr(err)
	}
	if c.json {
		return c.printJSON(res)
	}
	for _, d := range res.Documents {
		data, err := json.Marshal(d.Data)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(c.m.Stdout, "%s  %s  shard %d  %s\n", d.Timestamp.Format(time.RFC3339Nano), d.ID, d.Shard, data); err != nil {
			return err
		}
	}
	if res.NextPageToken != "" {
		_, err = fmt.Fprintf(c.m.Stdout, "next page: --page-token %s\n", res.NextPageToken)
	}
	return err
}
