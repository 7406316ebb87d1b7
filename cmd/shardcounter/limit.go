package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// limitCommand is `shardcounter limit create|get|delete|take|peek|reset`:
// rate limits (docs/LIMITS.md) through the server's /v1/limits routes.
type limitCommand struct {
	clientFlags
	cost      int64
	requestID string
}

func newLimitCommand(m *Main) command { return &limitCommand{clientFlags: clientFlags{m: m}} }

func (c *limitCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.Int64Var(&c.cost, "cost", 1, "take, peek: the cost `N` to take, 1 or more")
	fs.StringVar(&c.requestID, "request-id", "", "take: an id `S` that makes a retry answer the decision first recorded, charged once")
}

func (c *limitCommand) example() string {
	return `  shardcounter limit create api fixed 300/10s
  shardcounter limit create upload gcra 10/1s burst 20
  shardcounter limit take api tenant-7 --request-id req-1
  shardcounter limit peek api tenant-7 --cost 5
  shardcounter limit reset api tenant-7`
}

// errRefused is a take or a peek the limit refuses: exit 1, so that a
// script can branch on it; the decision is printed on stdout first.
var errRefused = errors.New("refused")

func (c *limitCommand) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("expected limit create NAME POLICY, get [NAME], delete NAME, take NAME KEY, peek NAME KEY or reset NAME KEY")
	}
	action, args := args[0], args[1:]
	if action != "take" && c.requestID != "" {
		return usagef("--request-id is for limit take")
	}
	if action != "take" && action != "peek" && c.cost != 1 {
		return usagef("--cost is for limit take and peek")
	}
	switch action {
	case "create":
		if len(args) < 2 {
			return usagef("expected limit create NAME POLICY, such as limit create api fixed 300/10s")
		}
		name, err := limitNameArg(args[0])
		if err != nil {
			return err
		}
		p, err := shardcounter.ParseLimitPolicy(strings.Join(args[1:], " "))
		if err != nil {
			return usagef("%s", shardcounter.ErrorMessage(err))
		}
		return c.create(ctx, name, p)
	case "get":
		if len(args) == 0 {
			return c.list(ctx)
		}
		if len(args) != 1 {
			return usagef("expected limit get [NAME], got %d arguments", len(args))
		}
		name, err := limitNameArg(args[0])
		if err != nil {
			return err
		}
		return c.get(ctx, name)
	case "delete":
		if len(args) != 1 {
			return usagef("expected limit delete NAME, got %d arguments", len(args))
		}
		name, err := limitNameArg(args[0])
		if err != nil {
			return err
		}
		client, err := c.client()
		if err != nil {
			return err
		}
		if err := client.DeleteLimit(ctx, name); err != nil {
			return err
		}
		return c.say("deleted limit %s and its keys' state\n", name)
	case "take", "peek", "reset":
		if len(args) != 2 {
			return usagef("expected limit %s NAME KEY, got %d arguments", action, len(args))
		}
		name, err := limitNameArg(args[0])
		if err != nil {
			return err
		}
		key := args[1]
		if err := shardcounter.ValidateName("limit key", key); err != nil {
			return usagef("%s", shardcounter.ErrorMessage(err))
		}
		if action == "reset" {
			return c.reset(ctx, name, key)
		}
		if err := shardcounter.ValidateTake(c.cost); err != nil {
			return usagef("--cost: %s", shardcounter.ErrorMessage(err))
		}
		if c.requestID != "" {
			if err := shardcounter.ValidateID("request id", c.requestID); err != nil {
				return usagef("--request-id: %s", shardcounter.ErrorMessage(err))
			}
		}
		return c.take(ctx, name, key, action == "peek")
	}
	return usagef("unknown limit action %q: use create, get, delete, take, peek or reset", action)
}

// limitNameArg checks a limit's NAME argument.
func limitNameArg(name string) (string, error) {
	if err := shardcounter.ValidateLimitName(name); err != nil {
		return "", usagef("%s", shardcounter.ErrorMessage(err))
	}
	return name, nil
}

// say prints a line of text, or nothing with --json.
func (c *limitCommand) say(format string, args ...any) error {
	if c.json {
		return nil
	}
	_, err := fmt.Fprintf(c.m.Stdout, format, args...)
	return err
}

func (c *limitCommand) create(ctx context.Context, name string, p shardcounter.LimitPolicy) error {
	client, err := c.client()
	if err != nil {
		return err
	}
	l, created, err := client.CreateLimit(ctx, name, p)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(l)
	}
	verb := "created"
	if !created {
		verb = "limit exists:"
	}
	return c.say("%s limit %s: %s\n", verb, l.Name, l.LimitPolicy)
}

func (c *limitCommand) get(ctx context.Context, name string) error {
	client, err := c.client()
	if err != nil {
		return err
	}
	l, err := client.GetLimit(ctx, name)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(l)
	}
	return c.say("limit %s: %s, defined %s\n", l.Name, l.LimitPolicy, l.CreatedAt.UTC().Format(time.RFC3339))
}

func (c *limitCommand) list(ctx context.Context) error {
	client, err := c.client()
	if err != nil {
		return err
	}
	ls, err := client.ListLimits(ctx)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(shttp.LimitsResponse{Limits: ls})
	}
	tw := tabwriter.NewWriter(c.m.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPOLICY\tDEFINED")
	for _, l := range ls {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", l.Name, l.LimitPolicy, l.CreatedAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

func (c *limitCommand) reset(ctx context.Context, name, key string) error {
	client, err := c.client()
	if err != nil {
		return err
	}
	if err := client.ResetLimitKey(ctx, name, key); err != nil {
		return err
	}
	return c.say("reset %s of limit %s: its whole quota is available\n", key, name)
}

// take prints the decision as one line: allowed or refused, what
// remains, and when the key is whole again (and, refused, when to retry).
// A refused take or peek is exit 1.
func (c *limitCommand) take(ctx context.Context, name, key string, peek bool) error {
	client, err := c.client()
	if err != nil {
		return err
	}
	var r *shardcounter.LimitResult
	if peek {
		r, err = client.Peek(ctx, name, key, c.cost)
	} else {
		r, err = client.Take(ctx, name, key, c.cost, c.requestID)
	}
	if err != nil {
		return err
	}
	if c.json {
		if err := c.printJSON(r); err != nil {
			return err
		}
	} else {
		if err := c.say("%s\n", describeTake(r, peek)); err != nil {
			return err
		}
	}
	if !r.Allowed {
		verb := "take"
		if peek {
			verb = "a take"
		}
		return fmt.Errorf("%w: %s of %d from %s of limit %s would exceed its quota", errRefused, verb, c.cost, key, name)
	}
	return nil
}

// describeTake is a decision in words.
func describeTake(r *shardcounter.LimitResult, peek bool) string {
	var b strings.Builder
	switch {
	case r.Allowed && peek:
		b.WriteString("would be allowed")
	case r.Allowed:
		b.WriteString("allowed")
	case peek:
		b.WriteString("would be refused")
	default:
		b.WriteString("refused")
	}
	fmt.Fprintf(&b, ": %d remaining", r.Remaining)
	switch {
	case r.RetryAfterMS < 0:
		b.WriteString(", never allowed: the cost is above the quota")
	case r.RetryAfterMS > 0:
		fmt.Fprintf(&b, ", retry in %s", time.Duration(r.RetryAfterMS)*time.Millisecond)
	}
	fmt.Fprintf(&b, ", whole again in %s", time.Duration(r.ResetAfterMS)*time.Millisecond)
	if r.Duplicate {
		b.WriteString(" (a retry: the decision first recorded, nothing taken now)")
	}
	return b.String()
}
