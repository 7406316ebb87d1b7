package server

import (
	"errors"

	"github.com/shardcounter/shardcounter"
)

// This file holds the set commands, on distinct counters: SADD, SREM,
// SISMEMBER and SCARD. A distinct counter counts each member once; its
// value is its member count.

func writeSAdd(c *conn, args [][]byte, ws []shardcounter.Write) ([]shardcounter.Write, string) {
	return addMembers(args, ws, func(counter, member string) shardcounter.Write {
		w := shardcounter.AddMember(counter, member)
		w.Kind = shardcounter.KindDistinct // never an add to an approx counter
		return w
	})
}

func writeSRem(c *conn, args [][]byte, ws []shardcounter.Write) ([]shardcounter.Write, string) {
	return addMembers(args, ws, shardcounter.RemoveMember)
}

// addMembers appends one member write per member of SADD or SREM.
func addMembers(args [][]byte, ws []shardcounter.Write, write func(counter, member string) shardcounter.Write) ([]shardcounter.Write, string) {
	id, msg := counterID(args[1])
	if msg != "" {
		return ws, msg
	}
	lo := len(ws)
	for _, m := range args[2:] {
		member := string(m)
		if err := shardcounter.ValidateID("member", member); err != nil {
			return ws[:lo], "ERR " + shardcounter.ErrorMessage(err)
		}
		ws = append(ws, write(id, member))
	}
	return ws, ""
}

// replyChanged replies to SADD and SREM: how many members were added or
// removed (a member already present, or absent, does not count).
func replyChanged(c *conn, args [][]byte, ws []shardcounter.Write, res []shardcounter.WriteResult) {
	n := int64(0)
	for i, r := range res {
		if r.Error != nil {
			c.w.Error(c.writeErrorReply(ws[i], r.Error))
			return
		}
		if r.Changed != nil && *r.Changed {
			n++
		}
	}
	c.w.Int(n)
}

// cmdSIsMember is SISMEMBER key member: 1 when member is in the distinct
// counter, 0 when not or when there is no such counter.
func cmdSIsMember(c *conn, args [][]byte) {
	id, msg := counterID(args[1])
	if msg != "" {
		c.w.Error(msg)
		return
	}
	ctx, cancel := c.ctx()
	ok, err := c.s.svc.IsMember(ctx, id, string(args[2]))
	cancel()
	switch {
	case errors.Is(err, shardcounter.ErrNotFound):
		c.replyMissing(id, typePlain, c.replyZero)
	case errors.Is(err, shardcounter.ErrInvalid) && shardcounter.ValidateID("member", string(args[2])) == nil:
		c.w.Error(errWrongType + ": " + shardcounter.ErrorMessage(err))
	case err != nil:
		c.w.Error(errorReply(err))
	case ok:
		c.w.Int(1)
	default:
		c.w.Int(0)
	}
}

// cmdSCard is SCARD key: the distinct counter's member count (a strong
// read), 0 when there is no such counter.
func cmdSCard(c *conn, args [][]byte) {
	missing := func() { c.replyMissing(string(args[1]), typePlain, c.replyZero) }
	ctr, ok := readKey(c, args[1], missing, c.s.svc.GetCounter)
	if !ok {
		return
	}
	if ctr.Kind != shardcounter.KindDistinct {
		c.w.Error(errWrongType + ": " + quote(ctr.ID) + " is a " + string(ctr.Kind) + " counter; SCARD counts the members of a distinct counter")
		return
	}
	if r, ok := readKey(c, args[1], c.replyZero, c.readStrong); ok {
		c.w.Int(r.Value)
	}
}
