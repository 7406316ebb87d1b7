package server

import (
	"context"
	"errors"

	"github.com/shardcounter/shardcounter"
)

// This file holds the HyperLogLog commands, on approx counters
// (shardcounter.KindApprox): PFADD, PFCOUNT and PFMERGE. An approx
// counter keeps a sketch per shard; its value is the estimate of their
// union. TYPE says string, as Redis, which stores a HyperLogLog as a
// string. A PF command on a counter of another kind, and a set or string
// command on an approx counter, is WRONGTYPE.

// sketchService is what PFCOUNT of several keys and PFMERGE need beyond
// shardcounter.CounterService; the engine has it.
type sketchService interface {
	CountUnion(ctx context.Context, ids []string) (int64, error)
	MergeSketches(ctx context.Context, dest string, srcs []string) (*shardcounter.Counter, error)
}

const noTxMerge = "it merges sketches outside the batch a transaction commits; send it before MULTI or after EXEC"

// writePFAdd is PFADD key member...: a member add each, meant for an
// approx counter, which the first creates.
func writePFAdd(c *conn, args [][]byte, ws []shardcounter.Write) ([]shardcounter.Write, string) {
	return addMembers(args, ws, func(counter, member string) shardcounter.Write {
		w := shardcounter.AddMember(counter, member)
		w.Kind = shardcounter.KindApprox
		return w
	})
}

// replyPFAdd replies 1 when a commit changed a sketch of the counter (see
// package sketch: per commit and shard, so a member already counted may
// share a 1 with one that is not), 0 when none changed. PFADD key alone
// creates the counter when missing (1) and changes nothing otherwise (0).
func replyPFAdd(c *conn, args [][]byte, ws []shardcounter.Write, res []shardcounter.WriteResult) {
	if len(ws) == 0 {
		c.pfCreate(args[1])
		return
	}
	n := int64(0)
	for i, r := range res {
		if r.Error != nil {
			c.w.Error(c.writeErrorReply(ws[i], r.Error))
			return
		}
		if r.Changed != nil && *r.Changed {
			n = 1
		}
	}
	c.w.Int(n)
}

// pfCreate is PFADD key with no member: 1 when it made the approx
// counter, 0 when it was there.
func (c *conn) pfCreate(key []byte) {
	id, msg := counterID(key)
	if msg != "" {
		c.w.Error(msg)
		return
	}
	ctx, cancel := c.ctx()
	defer cancel()
	if t, err := c.s.typeOf(ctx, id); err != nil || t == typeHash {
		c.replyTypeErr(id, t, err)
		return
	}
	ctr, created, err := c.s.svc.CreateCounter(ctx, id, shardcounter.CreateOptions{Kind: shardcounter.KindApprox})
	switch {
	case errors.Is(err, shardcounter.ErrExists):
		got, gerr := c.s.svc.GetCounter(ctx, id)
		switch {
		case gerr != nil:
			c.w.Error(errorReply(gerr))
		case got.Kind != shardcounter.KindApprox:
			c.w.Error(notHLL(id))
		default:
			c.w.Int(0)
		}
	case err != nil:
		c.w.Error(errorReply(err))
	case created && ctr != nil:
		c.w.Int(1)
	default:
		c.w.Int(0)
	}
}

// replyTypeErr replies to a name that is a hash, or that could not be
// typed.
func (c *conn) replyTypeErr(id string, t nameType, err error) {
	if err != nil {
		c.w.Error(errorReply(err))
		return
	}
	c.w.Error(wrongType(id, t))
}

func notHLL(id string) string {
	return errWrongType + ": " + quote(id) + " is not an approx counter (a HyperLogLog)"
}

// cmdPFCount is PFCOUNT key [key...]: one key's value (a strong read, 0
// when missing); several keys' union, merged from their sketches.
func cmdPFCount(c *conn, args [][]byte) {
	ids, ok := keyIDs(c, args[1:])
	if !ok {
		return
	}
	if len(ids) == 1 {
		c.pfCountOne(args[1])
		return
	}
	ctx, cancel := c.ctx()
	defer cancel()
	ss, ok := c.sketches(ctx, "PFCOUNT of several keys", ids)
	if !ok {
		return
	}
	v, err := ss.CountUnion(ctx, ids)
	if c.replySketchErr(err) {
		c.w.Int(v)
	}
}

// keyIDs returns the counter ids of keys, or replies with the error of
// the first that is none.
func keyIDs(c *conn, keys [][]byte) ([]string, bool) {
	ids := make([]string, len(keys))
	for i, a := range keys {
		id, msg := counterID(a)
		if msg != "" {
			c.w.Error(msg)
			return nil, false
		}
		ids[i] = id
	}
	return ids, true
}

// sketches returns the engine's sketch service for cmd after checking
// that no key of ids is a hash; it replies and returns false otherwise.
func (c *conn) sketches(ctx context.Context, cmd string, ids []string) (sketchService, bool) {
	ss, ok := c.s.svc.(sketchService)
	if !ok {
		c.w.Error("ERR " + cmd + " needs the server's own engine")
		return nil, false
	}
	for _, id := range ids {
		if t, err := c.s.typeOf(ctx, id); err != nil || t == typeHash {
			c.replyTypeErr(id, t, err)
			return nil, false
		}
	}
	return ss, true
}

// replySketchErr replies with err of a sketch command, a counter of
// another kind as WRONGTYPE, and reports whether err was nil (the caller
// then replies).
func (c *conn) replySketchErr(err error) bool {
	switch {
	case shardcounter.ErrorCode(err) == shardcounter.EINVALID:
		c.w.Error(errWrongType + ": " + shardcounter.ErrorMessage(err))
	case err != nil:
		c.w.Error(errorReply(err))
	default:
		return true
	}
	return false
}

// pfCountOne is PFCOUNT key: the approx counter's value.
func (c *conn) pfCountOne(key []byte) {
	missing := func() { c.replyMissing(string(key), typePlain, c.replyZero) }
	ctr, ok := readKey(c, key, missing, c.s.svc.GetCounter)
	if !ok {
		return
	}
	if ctr.Kind != shardcounter.KindApprox {
		c.w.Error(notHLL(ctr.ID))
		return
	}
	if r, ok := readKey(c, key, c.replyZero, c.readStrong); ok {
		c.w.Int(r.Value)
	}
}

// cmdPFMerge is PFMERGE dest [src...]: dest, created when missing with the
// first source's shard count, counts the union of itself and the sources.
func cmdPFMerge(c *conn, args [][]byte) {
	ids, ok := keyIDs(c, args[1:])
	if !ok {
		return
	}
	ctx, cancel := c.ctx()
	defer cancel()
	ss, ok := c.sketches(ctx, "PFMERGE", ids)
	if !ok {
		return
	}
	_, err := ss.MergeSketches(ctx, ids[0], ids[1:])
	c.s.types.forget(ids[0])
	if c.replySketchErr(err) {
		c.w.Simple("OK")
	}
}
