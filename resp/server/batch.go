package server

import (
	"go.opentelemetry.io/otel/trace"

	"context"
	"errors"
	"sync"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/resp"
)

// pending is one write command of a batch: its writes are ws[lo:hi] of
// the batch, or errReply says why it has none. An EXEC has tx, whose
// parts divide its writes among its commands.
type pending struct {
	c        *conn
	cmd      *command
	args     [][]byte
	lo, hi   int
	errReply string
	tx       *txRun
	span     trace.Span // with Options.Tracer
}

// segment is commands of one connection: those a cycle executes, or a
// run of them that goes in one batch (writes, or strong reads).
type segment struct {
	c    *conn
	cmds []resp.Command
}

// executor executes the commands of one or more connections, batching
// across them: the connections' runs of writes go to the service as one
// WriteBatch, and their runs of strong reads as one batch read. It holds scratch
// space reused from one call to the next; it is not safe for concurrent
// use.
type executor struct {
	s       *Server
	writes  []shardcounter.Write
	pending []pending
	ids     []string
	reads   []readCmd
	wsegs   []segment
	rsegs   []segment
	bctx    batchContext         // the context of its batches' service calls
	spans   []trace.Span         // the span of each write of writeBatch, with Options.Tracer
	sent    []shardcounter.Write // a batch's writes with its hashes' markers (withMarkers)
	marks   []int                // the markers' places in sent
}

// ctx arms and returns the context of a batch's service calls; stop it
// with x.bctx.stop once the batch is done.
func (x *executor) ctx() context.Context {
	x.bctx.start(x.s.opts.CommandTimeout)
	return &x.bctx
}

// run executes each connection's commands (one segment a connection) in
// rounds. In a round each connection runs its commands up to and
// including its next batchable run (consecutive writes, or consecutive
// strong reads: GET, MGET, EXISTS); every other command runs on its own
// as it is met. Then the round's runs of writes execute as one
// WriteBatch, and its strong reads as one batch read. So a connection's
// commands take effect in the order sent, and the writes of many
// connections share one queueing in the engine. Commands that change the
// connection (AUTH, HELLO, RESET ...) run on their own, so a batch never
// spans a change of authentication or protocol.
func (x *executor) run(turns []segment) {
	for {
		x.wsegs, x.rsegs = x.wsegs[:0], x.rsegs[:0]
		for k := range turns {
			t := &turns[k]
			for len(t.cmds) > 0 && !t.c.quit {
				c, cmds := t.c, t.cmds
				cmd := c.lookup(cmds[0].Args)
				j, batched := 1, true
				switch {
				case cmd != nil && cmd.write != nil && c.ready(cmd, cmds[0].Args):
					for j < len(cmds) && c.batchesWith(cmds[j].Args) {
						j++
					}
					x.wsegs = append(x.wsegs, segment{c, cmds[:j]})
				case cmd != nil && cmd.readReply != nil && c.ready(cmd, cmds[0].Args):
					for j < len(cmds) && c.readsWith(cmds[j].Args) {
						j++
					}
					x.rsegs = append(x.rsegs, segment{c, cmds[:j]})
				default:
					if x.s.opts.Tracer != nil {
						span := x.s.startSpan(c, cmd)
						c.exec(cmd, cmds[0].Args)
						span.End()
					} else {
						c.exec(cmd, cmds[0].Args)
					}
					batched = false
				}
				x.s.stats.commands.Add(int64(j))
				t.cmds = cmds[j:]
				if batched {
					break // the connection's next commands wait for the batch
				}
			}
		}
		if len(x.wsegs) == 0 && len(x.rsegs) == 0 {
			clear(x.wsegs[:cap(x.wsegs)])
			clear(x.rsegs[:cap(x.rsegs)])
			return
		}
		x.writeBatch(x.wsegs)
		x.readBatch(x.rsegs)
	}
}

// writeBatch executes runs of write commands with one WriteBatch call:
// their writes queue together, in order, so that they share the engine's
// group commits instead of each waiting for its own turn, and a command's
// writes apply after those of the commands before it. Before, it claims
// the names they write for their types (claimTypes), and a command whose
// names hold another type gets WRONGTYPE and writes nothing. Each command
// then gets its own reply, on its own connection; an EXEC's writes commit
// together and it replies with all its commands' replies.
func (x *executor) writeBatch(segs []segment) {
	if len(segs) == 0 {
		return
	}
	ws, ps := x.writes[:0], x.pending[:0]
	for _, sg := range segs {
		for _, cm := range sg.cmds {
			cmd := sg.c.lookup(cm.Args)
			p := pending{c: sg.c, cmd: cmd, args: cm.Args, lo: len(ws)}
			if x.s.opts.Tracer != nil {
				p.span = x.s.startSpan(sg.c, cmd)
			}
			if cmd.name == "exec" {
				ws, p.tx, p.errReply = sg.c.execWrites(ws)
			} else if ws, p.errReply = cmd.write(sg.c, cm.Args, ws); p.errReply != "" {
				ws = ws[:p.lo]
			}
			p.hi = len(ws)
			ps = append(ps, p)
		}
	}
	var res []shardcounter.WriteResult
	var err error
	if len(ws) > 0 {
		ctx := x.ctx()
		var cl claimed
		ws, cl = x.checkTypes(ctx, ws, ps)
		if len(ws) > 0 {
			sent := x.withMarkers(ws, cl.markers)
			if x.s.opts.Tracer != nil {
				ctx, x.spans = withWriteSpans(ctx, ps, len(sent), x.marks, x.spans)
			}
			res, err = x.s.svc.WriteBatch(ctx, sent)
			if err == nil && len(res) != len(sent) {
				err = shardcounter.Errorf(shardcounter.EINTERNAL, "the service returned %d results for %d writes", len(res), len(sent))
			}
			x.s.types.settle(cl.made)
			if err == nil {
				x.redoCrossSlot(ctx, sent, res)
				x.s.readValues(ctx, sent, res)
				res = x.markersDone(ctx, sent, res)
			} else {
				// The claims of writes that failed whole may be of names
				// that hold nothing: ask the store again next time.
				for _, w := range ws {
					name, _ := writeName(w)
					x.s.types.forget(name)
				}
			}
			if len(x.marks) > 0 {
				clear(sent)
				x.sent = sent[:0]
			}
		} else {
			x.s.types.settle(cl.made)
		}
		x.bctx.stop()
	}
	for i := range ps {
		p := &ps[i]
		c := p.c
		switch {
		case p.errReply != "":
			c.w.Error(p.errReply)
		case err != nil && p.hi > p.lo:
			c.w.Error(errorReply(err))
		case p.tx != nil:
			c.execReply(p.tx, ws, res)
		case err != nil || p.hi == p.lo:
			p.cmd.reply(c, p.args, nil, nil)
		default:
			p.cmd.reply(c, p.args, ws[p.lo:p.hi], res[p.lo:p.hi])
		}
		if p.span != nil {
			endWriteSpan(p, err, res)
		}
	}
	clear(ws) // let the ids be collected; keep the capacity
	clear(ps)
	clear(x.spans)
	x.writes, x.pending = ws[:0], ps[:0]
}

// readValues gives each write that asked for the counter's value after
// its commit (INCR) and did not get it, from a service that does not read
// it in its commit, a strong read of the counter, made once per counter
// after the whole batch committed. That value is at least the write's
// own, and may include writes committed since, which SPEC allows.
func (s *Server) readValues(ctx context.Context, ws []shardcounter.Write, res []shardcounter.WriteResult) {
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
			rd, err := s.svc.ReadCounter(ctx, ws[i].Counter, shardcounter.Strong)
			if err != nil {
				// Applied, but without its value the reply cannot be
				// given: a store failure, not a bug, and a retry with
				// the same request id answers duplicate.
				r.Error = &shardcounter.Error{Code: shardcounter.EOUTCOMEUNKNOWN, OutcomeUnknown: true,
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

// readCmd is one strong read command of a batch read: its counters are
// ids[lo:hi] of the batch, or bad is the error reply of a key that is not
// a counter id.
type readCmd struct {
	c      *conn
	cmd    *command
	args   [][]byte
	lo, hi int
	bad    string
	span   trace.Span // with Options.Tracer
}

// readBatch executes runs of strong reads of keys (GET, MGET, EXISTS), of
// one or more connections, with as few batch reads as MaxReadBatch
// allows: the commands are packed, whole, into calls of up to
// MaxReadBatch counters, which run at once (the engine gathers them into
// its store reads). So each command's counters are one consistent
// snapshot where the store has one, as a batch read is, unless it names
// more than MaxReadBatch.
func (x *executor) readBatch(segs []segment) {
	if len(segs) == 0 {
		return
	}
	ids, rcs := x.ids[:0], x.reads[:0]
	for _, sg := range segs {
		for _, cm := range sg.cmds {
			rc := readCmd{c: sg.c, cmd: sg.c.lookup(cm.Args), args: cm.Args, lo: len(ids)}
			if x.s.opts.Tracer != nil {
				rc.span = x.s.startSpan(sg.c, rc.cmd)
			}
			keys, msg := readIDs(rc.cmd, cm.Args)
			rc.bad = msg
			ids = append(ids, keys...)
			rc.hi = len(ids)
			rcs = append(rcs, rc)
		}
	}
	// Cut the commands into calls: call k reads ids[cuts[k]:cuts[k+1]].
	cuts := []int{0}
	for _, rc := range rcs {
		if last := cuts[len(cuts)-1]; rc.hi-last > shardcounter.MaxReadBatch && rc.lo > last {
			cuts = append(cuts, rc.lo)
		}
	}
	cuts = append(cuts, len(ids))
	rs := make([]shardcounter.ReadResult, len(ids))
	errs := make([]error, len(cuts)-1)
	ctx := x.ctx()
	var wg sync.WaitGroup
	for k := range errs {
		lo, hi := cuts[k], cuts[k+1]
		if lo == hi {
			continue
		}
		wg.Go(func() {
			part, err := x.s.readMany(ctx, ids[lo:hi])
			if err != nil {
				errs[k] = err
				return
			}
			copy(rs[lo:hi], part)
		})
	}
	wg.Wait()
	k := 0
	for _, rc := range rcs {
		for rc.lo >= cuts[k+1] && k+1 < len(errs) {
			k++
		}
		err := errs[k]
		if err != nil && rc.bad == "" && (rc.lo > cuts[k] || rc.hi < cuts[k+1]) {
			// A call of several commands failed whole: each is read
			// again on its own, so that one command's failing counters
			// (a cluster node that is down) fail only that command.
			var part []shardcounter.ReadResult
			if part, err = x.s.readMany(ctx, ids[rc.lo:rc.hi]); err == nil {
				copy(rs[rc.lo:rc.hi], part)
			}
		}
		errReply := rc.bad
		switch {
		case rc.bad != "":
			rc.c.w.Error(rc.bad)
		case err != nil:
			errReply = errorReply(err)
			rc.c.w.Error(errReply)
		default:
			rc.cmd.readReply(rc.c, rc.args, rs[rc.lo:rc.hi])
		}
		if rc.span != nil {
			endSpan(rc.span, errReply)
		}
	}
	x.bctx.stop()
	clear(ids)
	clear(rcs)
	x.ids, x.reads = ids[:0], rcs[:0]
}

// readMany reads counters strongly, in order: one ReadCounter for one id,
// batch reads of up to MaxReadBatch ids otherwise, each one consistent
// snapshot where the store has one. A counter's own failure (not found)
// is in its result; the error is that of a whole read.
func (s *Server) readMany(ctx context.Context, ids []string) ([]shardcounter.ReadResult, error) {
	if len(ids) == 1 {
		r, err := s.svc.ReadCounter(ctx, ids[0], shardcounter.Strong)
		if err != nil && !errors.Is(err, shardcounter.ErrNotFound) {
			return nil, err
		}
		return []shardcounter.ReadResult{{Reading: r, Err: err}}, nil
	}
	out := make([]shardcounter.ReadResult, 0, len(ids))
	for start := 0; start < len(ids); start += shardcounter.MaxReadBatch {
		part := ids[start:min(start+shardcounter.MaxReadBatch, len(ids))]
		rs, err := s.svc.ReadCounters(ctx, part, shardcounter.Strong)
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
// is not one: a name (shardcounter.ValidateName: 1 to 256 bytes of UTF-8
// without control characters, so never a hash field's id).
func counterID(b []byte) (string, string) {
	id := string(b)
	if err := shardcounter.ValidateName(shardcounter.CounterIDKind, id); err != nil {
		return "", "ERR " + shardcounter.ErrorMessage(err)
	}
	return id, ""
}

// readIDs returns the counters a strong read of keys reads: its
// command's own (cmd.readIDs), or its keys args[1:]; or the error reply
// of an argument that names none.
func readIDs(cmd *command, args [][]byte) ([]string, string) {
	if cmd.readIDs != nil {
		return cmd.readIDs(args)
	}
	return ids(args[1:])
}
