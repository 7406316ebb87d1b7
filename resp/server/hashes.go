package server

import (
	"context"
	"errors"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/resp"
)

// This file holds the hash commands: HINCRBY, HGET, HMGET, HGETALL, HKEYS,
// HVALS, HLEN, HEXISTS and HDEL. A hash's field is a counter of its own
// (shardcounter.HashFieldID), so HINCRBY post:42 likes 1 is a sharded,
// group-committed write like INCR, and batches with the writes around it.
// A field's value is always an integer; a hash exists while it has a
// field.

// fieldID returns the id of the counter of field of hash key, or the
// error reply when key or field is not a name.
func fieldID(key, field []byte) (string, string) {
	hash, msg := counterID(key)
	if msg != "" {
		return "", msg
	}
	f := string(field)
	if err := shardcounter.ValidateName("hash field", f); err != nil {
		return "", "ERR " + shardcounter.ErrorMessage(err)
	}
	return shardcounter.HashFieldID(hash, f), ""
}

// hgetIDs is the counter HGET reads.
func hgetIDs(args [][]byte) ([]string, string) {
	id, msg := fieldID(args[1], args[2])
	if msg != "" {
		return nil, msg
	}
	return []string{id}, ""
}

// hmgetIDs are the counters HMGET reads.
func hmgetIDs(args [][]byte) ([]string, string) {
	out := make([]string, 0, len(args)-2)
	for _, f := range args[2:] {
		id, msg := fieldID(args[1], f)
		if msg != "" {
			return nil, msg
		}
		out = append(out, id)
	}
	return out, ""
}

// writeHIncrBy is HINCRBY key field n: n added to the field's counter,
// which the write creates when missing. n = 0 writes nothing: the reply
// is a read.
func writeHIncrBy(c *conn, args [][]byte, ws []shardcounter.Write) ([]shardcounter.Write, string) {
	id, msg := fieldID(args[1], args[2])
	if msg != "" {
		return ws, msg
	}
	n, ok := resp.ParseInt(args[3])
	switch {
	case !ok:
		return ws, errNotInteger
	case n == 0:
		return ws, ""
	}
	return append(ws, shardcounter.Write{Counter: id, Delta: n, WantValue: true}), ""
}

// replyHIncrBy replies to HINCRBY: the field's value after the write (as
// INCR's), or for n = 0 the value read.
func replyHIncrBy(c *conn, args [][]byte, ws []shardcounter.Write, res []shardcounter.WriteResult) {
	if len(ws) > 0 {
		replyValue(c, args, ws, res)
		return
	}
	id, _ := fieldID(args[1], args[2])
	ctx, cancel := c.ctx()
	defer cancel()
	r, err := c.s.svc.ReadCounter(ctx, id, shardcounter.Strong)
	switch {
	case errors.Is(err, shardcounter.ErrNotFound):
		c.replyMissing(string(args[1]), typeHash, func() { c.w.Int(0) })
	case err != nil:
		c.w.Error(errorReply(err))
	default:
		c.w.Int(r.Value)
	}
}

// replyMissing replies to a command of type want on name whose counter
// is missing: WRONGTYPE when the name holds the other type, else with
// missing (nil, 0, an empty array...), as Redis answers a missing key.
func (c *conn) replyMissing(name string, want nameType, missing func()) {
	ctx, cancel := c.ctx()
	t, err := c.s.typeOf(ctx, name)
	cancel()
	switch {
	case err != nil:
		c.w.Error(errorReply(err))
	case t != typeNone && t != want:
		c.w.Error(wrongType(name, t))
	default:
		missing()
	}
}

// replyHGet is HGET key field: the value, nil when the field is missing.
func replyHGet(c *conn, args [][]byte, rs []shardcounter.ReadResult) {
	switch r := rs[0]; {
	case errors.Is(r.Err, shardcounter.ErrNotFound):
		c.replyMissing(string(args[1]), typeHash, c.w.Null)
	case r.Err != nil:
		c.w.Error(errorReply(r.Err))
	default:
		c.w.BulkInt(r.Reading.Value)
	}
}

// replyHMGet is HMGET key field...: each field's value, nil for a missing
// one.
func replyHMGet(c *conn, args [][]byte, rs []shardcounter.ReadResult) {
	if failedRead(c, rs) {
		return
	}
	reply := func() {
		c.w.Array(len(rs))
		for _, r := range rs {
			if r.Err != nil {
				c.w.Null()
			} else {
				c.w.BulkInt(r.Reading.Value)
			}
		}
	}
	for _, r := range rs {
		if r.Err == nil {
			reply() // a field exists: the name holds a hash
			return
		}
	}
	c.replyMissing(string(args[1]), typeHash, reply)
}

// hashFields returns up to limit (0: all) fields of hash name, in byte
// order.
func (s *Server) hashFields(ctx context.Context, name string, limit int) ([]string, error) {
	prefix := shardcounter.HashFieldPrefix(name)
	var out []string
	after := shardcounter.HashMarkerID(name)
	for {
		page := shardcounter.MaxListLimit
		if limit > 0 {
			page = min(page, limit-len(out))
		}
		list, err := s.svc.ListCounters(ctx, shardcounter.ListOptions{Prefix: prefix, After: after, Limit: page})
		if err != nil {
			return nil, err
		}
		for _, ctr := range list.Counters {
			if _, f, ok := shardcounter.SplitHashID(ctr.ID); ok && f != "" {
				out = append(out, f)
			}
		}
		if list.Next == "" || (limit > 0 && len(out) >= limit) {
			return out, nil
		}
		after = list.Next
	}
}

// hashValues returns the fields of hash name and their values, reading
// them in batch reads of up to MaxReadBatch fields (each one consistent
// snapshot where the store has one). A field deleted between the listing
// and the read is left out.
func (s *Server) hashValues(ctx context.Context, name string) ([]string, []int64, error) {
	fields, err := s.hashFields(ctx, name, 0)
	if err != nil {
		return nil, nil, err
	}
	ids := make([]string, len(fields))
	for i, f := range fields {
		ids[i] = shardcounter.HashFieldID(name, f)
	}
	rs, err := s.readMany(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	keep, vals := fields[:0], make([]int64, 0, len(fields))
	for i, r := range rs {
		switch {
		case errors.Is(r.Err, shardcounter.ErrNotFound):
		case r.Err != nil:
			return nil, nil, r.Err
		default:
			keep = append(keep, fields[i])
			vals = append(vals, r.Reading.Value)
		}
	}
	return keep, vals, nil
}

// hashRead reads a hash for HGETALL, HKEYS and HVALS and replies: with
// reply, or with missing (an empty map or array) when it has no field,
// or WRONGTYPE when the name holds a counter.
func (c *conn) hashRead(args [][]byte, missing func(), reply func(fields []string, vals []int64)) {
	name, msg := counterID(args[1])
	if msg != "" {
		c.w.Error(msg)
		return
	}
	ctx, cancel := c.ctx()
	fields, vals, err := c.s.hashValues(ctx, name)
	cancel()
	switch {
	case err != nil:
		c.w.Error(errorReply(err))
	case len(fields) == 0:
		c.replyMissing(name, typeHash, missing)
	default:
		reply(fields, vals)
	}
}

// cmdHGetAll is HGETALL key: a map of every field and its value.
func cmdHGetAll(c *conn, args [][]byte) {
	c.hashRead(args, func() { c.w.Map(0) }, func(fields []string, vals []int64) {
		c.w.Map(len(fields))
		for i, f := range fields {
			c.w.BulkString(f)
			c.w.BulkInt(vals[i])
		}
	})
}

// cmdHKeys is HKEYS key: the fields, in byte order.
func cmdHKeys(c *conn, args [][]byte) {
	name, msg := counterID(args[1])
	if msg != "" {
		c.w.Error(msg)
		return
	}
	ctx, cancel := c.ctx()
	fields, err := c.s.hashFields(ctx, name, 0)
	cancel()
	switch {
	case err != nil:
		c.w.Error(errorReply(err))
	case len(fields) == 0:
		c.replyMissing(name, typeHash, func() { c.w.Array(0) })
	default:
		c.w.Array(len(fields))
		for _, f := range fields {
			c.w.BulkString(f)
		}
	}
}

// cmdHVals is HVALS key: the values, in the order of their fields.
func cmdHVals(c *conn, args [][]byte) {
	c.hashRead(args, func() { c.w.Array(0) }, func(_ []string, vals []int64) {
		c.w.Array(len(vals))
		for _, v := range vals {
			c.w.BulkInt(v)
		}
	})
}

// cmdHLen is HLEN key: the number of fields, counted by listing them.
func cmdHLen(c *conn, args [][]byte) {
	name, msg := counterID(args[1])
	if msg != "" {
		c.w.Error(msg)
		return
	}
	ctx, cancel := c.ctx()
	fields, err := c.s.hashFields(ctx, name, 0)
	cancel()
	switch {
	case err != nil:
		c.w.Error(errorReply(err))
	case len(fields) == 0:
		c.replyMissing(name, typeHash, func() { c.w.Int(0) })
	default:
		c.w.Int(int64(len(fields)))
	}
}

// cmdHExists is HEXISTS key field: 1 when the field exists, else 0.
func cmdHExists(c *conn, args [][]byte) {
	id, msg := fieldID(args[1], args[2])
	if msg != "" {
		c.w.Error(msg)
		return
	}
	ctx, cancel := c.ctx()
	_, err := c.s.svc.GetCounter(ctx, id)
	cancel()
	switch {
	case errors.Is(err, shardcounter.ErrNotFound):
		c.replyMissing(string(args[1]), typeHash, func() { c.w.Int(0) })
	case err != nil:
		c.w.Error(errorReply(err))
	default:
		c.w.Int(1)
	}
}

// cmdHDel is HDEL key field...: it deletes each field's counter, with its
// shards, and replies with how many existed. The deletions are one at a
// time: on an error, the fields before it are deleted.
func cmdHDel(c *conn, args [][]byte) {
	ids, msg := hmgetIDs(args)
	if msg != "" {
		c.w.Error(msg)
		return
	}
	name := string(args[1])
	ctx, cancel := c.ctx()
	defer cancel()
	n := int64(0)
	for _, id := range ids {
		switch err := c.s.svc.DeleteCounter(ctx, id); {
		case err == nil:
			n++
		case !errors.Is(err, shardcounter.ErrNotFound):
			c.w.Error(errorReply(err))
			return
		}
	}
	if n == 0 {
		c.replyMissing(name, typeHash, func() { c.w.Int(0) })
		return
	}
	// A hash without fields is gone: its name may take another type.
	if left, err := c.s.hashFields(ctx, name, 1); err == nil && len(left) == 0 {
		c.s.types.forget(name)
	}
	c.w.Int(n)
}

// deleteHash deletes every field of hash name and its marker, and
// reports whether it had a field.
func (s *Server) deleteHash(ctx context.Context, name string) (bool, error) {
	fields, err := s.hashFields(ctx, name, 0)
	if err != nil {
		return false, err
	}
	defer s.types.forget(name)
	for _, f := range fields {
		if err := s.svc.DeleteCounter(ctx, shardcounter.HashFieldID(name, f)); err != nil && !errors.Is(err, shardcounter.ErrNotFound) {
			return false, err
		}
	}
	err = s.svc.DeleteCounter(ctx, shardcounter.HashMarkerID(name))
	if err != nil && !errors.Is(err, shardcounter.ErrNotFound) {
		return false, err
	}
	return len(fields) > 0, nil
}
