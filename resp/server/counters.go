package server

import (
	"context"
	"errors"
	"math"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/resp"
)

// This file holds the counter commands: INCR, INCRBY, DECR, DECRBY, GET,
// MGET, EXISTS, DEL and the SC.* commands.

func writeIncr(c *conn, args [][]byte, ws []shardcounter.Write) ([]shardcounter.Write, string) {
	return addDelta(args, ws, 1)
}

func writeDecr(c *conn, args [][]byte, ws []shardcounter.Write) ([]shardcounter.Write, string) {
	return addDelta(args, ws, -1)
}

func writeIncrBy(c *conn, args [][]byte, ws []shardcounter.Write) ([]shardcounter.Write, string) {
	n, ok := resp.ParseInt(args[2])
	if !ok {
		return ws, errNotInteger
	}
	return addDelta(args, ws, n)
}

func writeDecrBy(c *conn, args [][]byte, ws []shardcounter.Write) ([]shardcounter.Write, string) {
	n, ok := resp.ParseInt(args[2])
	switch {
	case !ok:
		return ws, errNotInteger
	case n == math.MinInt64:
		return ws, errDecOverflow
	}
	return addDelta(args, ws, -n)
}

// addDelta appends the write of an INCR-like command, which replies with
// the value after it. A delta of 0 writes nothing: the reply is a read.
func addDelta(args [][]byte, ws []shardcounter.Write, delta int64) ([]shardcounter.Write, string) {
	id, msg := counterID(args[1])
	if msg != "" || delta == 0 {
		return ws, msg
	}
	return append(ws, shardcounter.Write{Counter: id, Delta: delta, WantValue: true}), ""
}

// replyValue replies to INCR, INCRBY, DECR and DECRBY: the counter's value
// read after the write committed.
func replyValue(c *conn, args [][]byte, ws []shardcounter.Write, res []shardcounter.WriteResult) {
	if len(ws) == 0 { // INCRBY k 0: the value as it is
		missing := func() { c.replyMissing(string(args[1]), typePlain, c.replyZero) }
		if r, ok := readKey(c, args[1], missing, c.readStrong); ok {
			c.w.Int(r.Value)
		}
		return
	}
	switch r := res[0]; {
	case r.Error != nil:
		c.w.Error(c.writeErrorReply(ws[0], r.Error))
	case r.Value == nil:
		c.w.Error("ERR internal error: the service gave no value after the write")
	default:
		c.w.Int(*r.Value)
	}
}

// writeSCIncrBy is SC.INCRBY key amount [REQUEST-ID id]: a retry-safe
// write whose reply says whether it applied.
func writeSCIncrBy(c *conn, args [][]byte, ws []shardcounter.Write) ([]shardcounter.Write, string) {
	if len(args) != 3 && len(args) != 5 {
		return ws, "ERR wrong number of arguments for 'sc.incrby' command"
	}
	id, msg := counterID(args[1])
	if msg != "" {
		return ws, msg
	}
	n, ok := resp.ParseInt(args[2])
	switch {
	case !ok:
		return ws, errNotInteger
	case n == 0:
		return ws, "ERR the amount is 0: give a non-zero amount"
	}
	w := shardcounter.Write{Counter: id, Delta: n}
	if len(args) == 5 {
		if lower(args[3]) != "request-id" {
			return ws, errSyntax + ": unknown option '" + clip(args[3]) + "': use REQUEST-ID"
		}
		w.RequestID = string(args[4])
		if err := shardcounter.ValidateID("request id", w.RequestID); err != nil {
			return ws, "ERR " + shardcounter.ErrorMessage(err)
		}
	}
	return append(ws, w), ""
}

// replyApplied replies to SC.INCRBY: 1 applied, 0 a duplicate of an
// earlier write with the same request id.
func replyApplied(c *conn, args [][]byte, ws []shardcounter.Write, res []shardcounter.WriteResult) {
	switch r := res[0]; {
	case r.Error != nil:
		c.w.Error(c.writeErrorReply(ws[0], r.Error))
	case r.Duplicate:
		c.w.Int(0)
	default:
		c.w.Int(1)
	}
}

// replyGet is GET's reply: the value, nil for a missing counter
// (WRONGTYPE for a hash).
func replyGet(c *conn, args [][]byte, rs []shardcounter.ReadResult) {
	switch r := rs[0]; {
	case errors.Is(r.Err, shardcounter.ErrNotFound):
		c.replyMissing(string(args[1]), typePlain, c.w.Null)
	case r.Err != nil:
		c.w.Error(errorReply(r.Err))
	default:
		c.w.BulkInt(r.Reading.Value)
	}
}

// failedRead replies with the error of the first counter of rs whose read
// failed, other than for not existing, and reports whether there was one:
// MGET and EXISTS fail whole, as a batch read does.
func failedRead(c *conn, rs []shardcounter.ReadResult) bool {
	for _, r := range rs {
		if r.Err != nil && !errors.Is(r.Err, shardcounter.ErrNotFound) {
			c.w.Error(errorReply(r.Err))
			return true
		}
	}
	return false
}

// ids returns the counter ids of args, or the error reply for the first
// that is not one.
func ids(args [][]byte) ([]string, string) {
	out := make([]string, len(args))
	for i, a := range args {
		id, msg := counterID(a)
		if msg != "" {
			return nil, msg
		}
		out[i] = id
	}
	return out, ""
}

// readKey reads the counter named by key, as a command on one key does:
// it returns what read returned, or replies itself and returns false. A
// key that is not a counter id and a failed read get an error reply; a
// counter that does not exist gets missing, as Redis answers a missing
// key (nil, or 0).
func readKey[T any](c *conn, key []byte, missing func(), read func(context.Context, string) (T, error)) (T, bool) {
	var zero T
	id, msg := counterID(key)
	if msg != "" {
		c.w.Error(msg)
		return zero, false
	}
	ctx, cancel := c.ctx()
	defer cancel()
	v, err := read(ctx, id)
	switch {
	case errors.Is(err, shardcounter.ErrNotFound):
		missing()
		return zero, false
	case err != nil:
		c.w.Error(errorReply(err))
		return zero, false
	}
	return v, true
}

// readStrong is a strong read of counter id, for readKey.
func (c *conn) readStrong(ctx context.Context, id string) (*shardcounter.Reading, error) {
	return c.s.svc.ReadCounter(ctx, id, shardcounter.Strong)
}

// replyZero is the reply of SCARD and INCRBY k 0 to a missing key.
func (c *conn) replyZero() { c.w.Int(0) }

// replyMGet is MGET key...: each value as GET gives it, nil for a missing
// counter; up to MaxReadBatch counters are one consistent snapshot.
func replyMGet(c *conn, args [][]byte, rs []shardcounter.ReadResult) {
	if failedRead(c, rs) {
		return
	}
	c.w.Array(len(rs))
	for _, r := range rs {
		if r.Err != nil {
			c.w.Null()
		} else {
			c.w.BulkInt(r.Reading.Value)
		}
	}
}

// existsIDs are the counters EXISTS reads: each key's own and its hash
// marker's, so that one batch read tells counters and hashes apart.
func existsIDs(args [][]byte) ([]string, string) {
	keys, msg := ids(args[1:])
	if msg != "" {
		return nil, msg
	}
	out := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		out = append(out, k, shardcounter.HashMarkerID(k))
	}
	return out, ""
}

// replyExists is EXISTS key...: how many of the keys are counters or
// hashes, a key named twice counting twice, as in Redis. rs holds each
// key's counter and its hash marker (existsIDs); a marker is looked at
// further only when it exists, to tell a hash from an emptied one.
func replyExists(c *conn, args [][]byte, rs []shardcounter.ReadResult) {
	if failedRead(c, rs) {
		return
	}
	n := int64(0)
	for i := 0; i < len(rs); i += 2 {
		switch {
		case rs[i].Err == nil:
			n++
		case rs[i+1].Err == nil:
			ctx, cancel := c.ctx()
			t, err := c.s.hashOrEmpty(ctx, string(args[1+i/2]))
			cancel()
			if err != nil {
				c.w.Error(errorReply(err))
				return
			}
			if t == typeHash {
				n++
			}
		}
	}
	c.w.Int(n)
}

// cmdDel is DEL key...: it deletes each counter with its shards, members,
// time buckets and request ids, or each hash with all its fields, and
// replies with how many existed. The deletions are one at a time: on an
// error, the keys before it are deleted.
func cmdDel(c *conn, args [][]byte) {
	ids, msg := ids(args[1:])
	if msg != "" {
		c.w.Error(msg)
		return
	}
	ctx, cancel := c.ctx()
	defer cancel()
	n := int64(0)
	for _, id := range ids {
		err := c.s.svc.DeleteCounter(ctx, id)
		if errors.Is(err, shardcounter.ErrNotFound) {
			var had bool
			if had, err = c.s.deleteHash(ctx, id); err == nil && !had {
				continue
			}
		}
		if err != nil {
			c.w.Error(errorReply(err))
			return
		}
		c.s.types.forget(id)
		n++
	}
	c.w.Int(n)
}

// cmdSCCreate is SC.CREATE key [SHARDS n] [KIND sum|distinct] [MIN v]
// [MAX v] [WINDOW bucket:retention]: +OK, or -EXISTS when the key is
// taken (with the same options or others).
func cmdSCCreate(c *conn, args [][]byte) {
	id, msg := counterID(args[1])
	if msg != "" {
		c.w.Error(msg)
		return
	}
	var opts shardcounter.CreateOptions
	for i := 2; i < len(args); i += 2 {
		opt := lower(args[i])
		if i+1 == len(args) {
			c.w.Error(errSyntax + ": option '" + clip(args[i]) + "' needs a value")
			return
		}
		val := args[i+1]
		switch opt {
		case "shards":
			n, ok := resp.ParseInt(val)
			if !ok || n < shardcounter.MinShards || n > shardcounter.MaxShards {
				c.w.Error("ERR SHARDS must be an integer from 1 to 1024")
				return
			}
			opts.Shards = int(n)
		case "kind":
			opts.Kind = shardcounter.Kind(lower(val))
			if opts.Kind != shardcounter.KindSum && opts.Kind != shardcounter.KindDistinct && opts.Kind != shardcounter.KindApprox {
				c.w.Error("ERR KIND must be sum, distinct or approx")
				return
			}
		case "min", "max":
			n, ok := resp.ParseInt(val)
			if !ok {
				c.w.Error(errNotInteger)
				return
			}
			if opt == "min" {
				opts.Min = &n
			} else {
				opts.Max = &n
			}
		case "window":
			w, err := shardcounter.ParseWindow(string(val))
			if err != nil {
				c.w.Error("ERR " + shardcounter.ErrorMessage(err))
				return
			}
			opts.Window = w
		default:
			c.w.Error(errSyntax + ": unknown option '" + clip(args[i]) + "': use SHARDS, KIND, MIN, MAX or WINDOW")
			return
		}
	}
	ctx, cancel := c.ctx()
	defer cancel()
	_, created, err := c.s.svc.CreateCounter(ctx, id, opts)
	switch {
	case err != nil:
		c.w.Error(errorReply(err))
	case !created:
		c.w.Error("EXISTS counter " + quote(id) + " already exists, with these options")
	default:
		c.w.Simple("OK")
	}
}

// cmdSCGet is SC.GET key [CACHED|STRONG]: the reading as a map (a flat
// array of names and values in RESP2), nil when the counter is missing.
func cmdSCGet(c *conn, args [][]byte) {
	if len(args) > 3 {
		c.w.Error("ERR wrong number of arguments for 'sc.get' command")
		return
	}
	consistency := shardcounter.Strong
	if len(args) == 3 {
		switch lower(args[2]) {
		case "cached":
			consistency = shardcounter.Cached
		case "strong":
		default:
			c.w.Error(errSyntax + ": use CACHED or STRONG")
			return
		}
	}
	r, ok := readKey(c, args[1], c.w.NullArray, func(ctx context.Context, id string) (*shardcounter.Reading, error) {
		return c.s.svc.ReadCounter(ctx, id, consistency)
	})
	if !ok {
		return
	}
	c.w.Map(5)
	c.w.BulkString("value")
	c.w.Int(r.Value)
	c.w.BulkString("shards")
	c.w.Int(int64(r.Shards))
	c.w.BulkString("consistency")
	c.w.BulkString(string(r.Consistency))
	c.w.BulkString("as_of")
	c.w.BulkString(r.AsOf.UTC().Format(time.RFC3339Nano))
	c.w.BulkString("max_staleness_ms")
	c.w.Int(r.MaxStalenessMS)
}

// cmdSCReshard is SC.RESHARD key shards.
func cmdSCReshard(c *conn, args [][]byte) {
	id, msg := counterID(args[1])
	if msg != "" {
		c.w.Error(msg)
		return
	}
	n, ok := resp.ParseInt(args[2])
	if !ok || n < shardcounter.MinShards || n > shardcounter.MaxShards {
		c.w.Error("ERR the shard count must be an integer from 1 to 1024")
		return
	}
	ctx, cancel := c.ctx()
	defer cancel()
	if _, err := c.s.svc.ReshardCounter(ctx, id, int(n)); err != nil {
		c.w.Error(errorReply(err))
		return
	}
	c.w.Simple("OK")
}

// cmdSCShards is SC.SHARDS key: where each shard lives and its value, as
// a map of id, shards, as_of and placement (an array of maps of shard,
// value, node and, on Redis Cluster, slot); nil when the counter is
// missing.
func cmdSCShards(c *conn, args [][]byte) {
	p, ok := readKey(c, args[1], c.w.NullArray, c.s.svc.Placement)
	if !ok {
		return
	}
	c.w.Map(4)
	c.w.BulkString("id")
	c.w.BulkString(p.ID)
	c.w.BulkString("shards")
	c.w.Int(int64(p.Shards))
	c.w.BulkString("as_of")
	c.w.BulkString(p.AsOf.UTC().Format(time.RFC3339Nano))
	c.w.BulkString("placement")
	c.w.Array(len(p.Places))
	for _, pl := range p.Places {
		n := 3
		if pl.Slot != nil {
			n = 4
		}
		c.w.Map(n)
		c.w.BulkString("shard")
		c.w.Int(int64(pl.Shard))
		c.w.BulkString("value")
		c.w.Int(pl.Value)
		c.w.BulkString("node")
		c.w.BulkString(pl.Node)
		if pl.Slot != nil {
			c.w.BulkString("slot")
			c.w.Int(int64(*pl.Slot))
		}
	}
}

// quote quotes an id for an error reply.
func quote(id string) string { return "'" + strings.ReplaceAll(id, "'", `\'`) + "'" }
