package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// memberCommand is `shardcounter add ID MEMBER [--kind distinct|approx]`
// and, with remove set, `shardcounter remove ID MEMBER`: a distinct
// counter's member, or a member counted by an approx counter.
type memberCommand struct {
	clientFlags
	remove bool
	kind   kindFlag
}

func newAddCommand(m *Main) command { return &memberCommand{clientFlags: clientFlags{m: m}} }
func newRemoveCommand(m *Main) command {
	return &memberCommand{clientFlags: clientFlags{m: m}, remove: true}
}

func (c *memberCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	if !c.remove {
		fs.Var(&c.kind, "kind", "`KIND` the counter must be, and is created as when missing: distinct (the default for a new one) or approx")
	}
}

func (c *memberCommand) run(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return usagef("expected a counter ID and a MEMBER, got %d arguments", len(args))
	}
	id, member := args[0], args[1]
	if err := checkArg("counter id", id); err != nil {
		return err
	}
	if err := checkArg("member", member); err != nil {
		return err
	}
	client, err := c.client()
	if err != nil {
		return err
	}
	w := shardcounter.AddMember(id, member)
	w.Kind = c.kind.k
	if c.remove {
		w = shardcounter.RemoveMember(id, member)
	}
	res, err := client.WriteCounter(ctx, w)
	if err != nil {
		return err
	}
	if c.json {
		resp := shttp.MemberResponse{Counter: id, Member: member, Added: res.Changed}
		if c.remove {
			resp.Added, resp.Removed = nil, res.Changed
		}
		return c.printJSON(resp)
	}
	var line string
	switch {
	case res.Changed == nil: // an async server answers before the commit
		line = fmt.Sprintf("accepted: %s will be committed shortly", member)
	case !c.remove && *res.Changed:
		line = fmt.Sprintf("added %s to %s", member, id)
	case !c.remove && c.kind.k == shardcounter.KindApprox:
		line = fmt.Sprintf("%s changed no sketch of %s: counted already (or as good as)", member, id)
	case !c.remove:
		line = fmt.Sprintf("%s was already in %s", member, id)
	case *res.Changed:
		line = fmt.Sprintf("removed %s from %s", member, id)
	default:
		line = fmt.Sprintf("%s was not in %s", member, id)
	}
	_, err = fmt.Fprintln(c.m.Stdout, line)
	return err
}

// membersCommand is `shardcounter members ID [--limit N]`: a distinct
// counter's members in byte order, one a line. It follows page tokens
// itself.
type membersCommand struct {
	clientFlags
	limit int
}

func newMembersCommand(m *Main) command { return &membersCommand{clientFlags: clientFlags{m: m}} }

func (c *membersCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.IntVar(&c.limit, "limit", 0, "print at most `N` members (default: all)")
}

func (c *membersCommand) run(ctx context.Context, args []string) error {
	if c.limit < 0 {
		return usagef("--limit is %d: give 1 or more, or leave it out for all", c.limit)
	}
	id, client, err := c.counterClient(args)
	if err != nil {
		return err
	}
	members, err := allPages(c.limit, func(limit int, after string) ([]string, string, error) {
		page, err := client.ListMembers(ctx, id, shardcounter.ListOptions{After: after, Limit: limit})
		if err != nil {
			return nil, "", err
		}
		return page.Members, page.Next, nil
	})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(shttp.MembersResponse{Members: members})
	}
	for _, m := range members {
		if _, err := fmt.Fprintln(c.m.Stdout, m); err != nil {
			return err
		}
	}
	return nil
}
