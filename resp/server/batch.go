package server

import (
	"context"
	"errors"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/resp"
)

// pending is one write command of a batch: its writes are ws[lo:hi] of
// the batch, or errReply says why it has none.
type pending struct {
	cmd      *command
	args     [][]byte
	lo, hi   int
	errReply string
}

// writeBatch executes consecutive write commands of a pipeline with one
// WriteBatch call: their writes queue together, in order, so that they
// share the engine's group commits instead of each waiting for its own
// turn, and a command's writes apply after those of the commands before
// it. Each command then gets its own reply.
func (c *conn) writeBatch(cmds []resp.Command) {
	ws, ps := c.writes[:0], c.pending[:0]
	for _, cm := range cmds {
		cmd := c.lookup(cm.Args)
		p := pending{cmd: cmd, args: cm.Args, lo: len(ws)}
		ws, p.errReply = cmd.write(c, cm.Args, ws)
		if p.errReply != "" {
			ws = ws[:p.lo]
		}
		p.hi = len(ws)
		ps = append(ps, p)
	}
	var res []shardcounter.WriteResult
	var err error
	if len(ws) > 0 {
		ctx, cancel := c.ctx()
		res, err = c.s.svc.WriteBatch(ctx, ws)
		if err == nil && len(res) != len(ws) {
			err = shardcounter.Errorf(shardcounter.EINTERNAL, "the service returned %d results for %d writes", len(res), len(ws))
		}
		if err == nil {
			c.readValues(ctx, ws, res)
		}
		cancel()
	}
	for i := range ps {
		p := &ps[i]
		switch {
		case p.errReply != "":
			c.w.Error(p.errReply)
		case err != nil && p.hi > p.lo:
			c.w.Error(errorReply(err))
		case err != nil:
			p.cmd.reply(c, p.args, nil, nil)
		default:
			p.cmd.reply(c, p.args, ws[p.lo:p.hi], res[p.lo:p.hi])
		}
	}
	clear(ws) // let the ids be collected; keep the capacity
	clear(ps)
	c.writes, c.pending = ws[:0], ps[:0]
}

// readValues gives each write that asked for the counter's value after
// its commit (INCR) and did not get it, from a service that does not read
// it in its commit, a strong read of the counter, made once per counter
// after the whole batch committed. That value is at least the write's
// own, and may include writes committed since, which SPEC allows.
func (c *conn) readValues(ctx context.Context, ws []shardcounter.Write, res []shardcounter.WriteResult) {
	var read map[string]*shardcounter.WriteResult
	for i := range ws {
		if !ws[i].WantValue || res[i].Error != nil || res[i].Value != nil {
			continue
		}
		if read == nil {
			read = make(map[string]*shardcounter.WriteResult)
		}
		r, ok := read[ws[i].Counter]
		if !ok {
			r = new(shardcounter.WriteResult)
			rd, err := c.s.svc.ReadCounter(ctx, ws[i].Counter, shardcounter.Strong)
			if err != nil {
				r.Error = &shardcounter.Error{Code: shardcounter.EINTERNAL,
					Message: "the write was applied, but reading the value after it failed (" + shardcounter.ErrorMessage(err) + "): read it with GET"}
			} else {
				v := rd.Value
				r.Value = &v
			}
			read[ws[i].Counter] = r
		}
		res[i].Value, res[i].Error = r.Value, r.Error
	}
}

// getBatch executes consecutive GETs of a pipeline with one batch read.
func (c *conn) getBatch(cmds []resp.Command) {
	ids := c.ids[:0]
	bad := make([]string, len(cmds))
	for i, cm := range cmds {
		id, msg := counterID(cm.Args[1])
		if msg != "" {
			bad[i] = msg
			continue
		}
		ids = append(ids, id)
	}
	var rs []shardcounter.ReadResult
	var err error
	if len(ids) > 0 {
		ctx, cancel := c.ctx()
		rs, err = c.readMany(ctx, ids)
		cancel()
	}
	j := 0
	for i := range cmds {
		switch {
		case bad[i] != "":
			c.w.Error(bad[i])
			continue
		case err != nil:
			c.w.Error(errorReply(err))
		case errors.Is(rs[j].Err, shardcounter.ErrNotFound):
			c.w.Null()
		case rs[j].Err != nil:
			c.w.Error(errorReply(rs[j].Err))
		default:
			c.w.BulkInt(rs[j].Reading.Value)
		}
		j++
	}
	clear(ids)
	c.ids = ids[:0]
}

// readMany reads counters strongly, in order: one ReadCounter for one id,
// batch reads of up to MaxReadBatch ids otherwise, each one consistent
// snapshot where the store has one. A counter's own failure (not found)
// is in its result; the error is that of a whole read.
func (c *conn) readMany(ctx context.Context, ids []string) ([]shardcounter.ReadResult, error) {
	if len(ids) == 1 {
		r, err := c.s.svc.ReadCounter(ctx, ids[0], shardcounter.Strong)
		if err != nil && !errors.Is(err, shardcounter.ErrNotFound) {
			return nil, err
		}
		return []shardcounter.ReadResult{{Reading: r, Err: err}}, nil
	}
	out := make([]shardcounter.ReadResult, 0, len(ids))
	for start := 0; start < len(ids); start += shardcounter.MaxReadBatch {
		part := ids[start:min(start+shardcounter.MaxReadBatch, len(ids))]
		rs, err := c.s.svc.ReadCounters(ctx, part, shardcounter.Strong)
		if err != nil {
			return nil, err
		}
		if len(rs) != len(part) {
			return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "the service returned %d readings for %d counters", len(rs), len(part))
		}
		for _, r := range rs {
			if r.Err == nil && r.Reading == nil {
				return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "the service returned an empty reading")
			}
		}
		out = append(out, rs...)
	}
	return out, nil
}

// counterID returns a command's counter id, or the error reply when it
// is not one (1 to 256 bytes of UTF-8 without control characters).
func counterID(b []byte) (string, string) {
	id := string(b)
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return "", "ERR " + shardcounter.ErrorMessage(err)
	}
	return id, ""
}
