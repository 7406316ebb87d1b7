package server

import (
	"go.opentelemetry.io/otel/trace"

	"context"
	"errors"
	"slices"
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

// writeName returns the name a write writes, as a RESP key, and the type
// it gives it: a hash's name for a field's counter, else the counter's id.
func writeName(w shardcounter.Write) (string, nameType) {
	if hash, _, ok := shardcounter.SplitHashID(w.Counter); ok {
		return hash, typeHash
	}
	return w.Counter, typePlain
}

// checkTypes claims the names the batch's writes write (claimTypes) and
// drops the writes of every command (every command of an EXEC) that one
// of its names refuses, giving it the error reply. It returns the writes
// left, with the commands' ranges and an EXEC's joins moved to match,
// and the claims' outcome: the hashes whose markers the batch writes, and
// the names to settle once it committed.
func (x *executor) checkTypes(ctx context.Context, ws []shardcounter.Write, ps []pending) ([]shardcounter.Write, claimed) {
	if x.s.types.hold(ws) {
		return ws, claimed{} // the common case: every name known, of its writes' type
	}
	claims := make([]claim, 0, len(ws))
	index := make(map[claim]int)
	at := make([]int, len(ws)) // the claim of each write, -1 for none
	for i, w := range ws {
		if w.Expire != nil || w.Take != nil {
			at[i] = -1 // a deadline change acts on a name of either type; a take's state is no key's
			continue
		}
		name, t := writeName(w)
		cl := claim{name, t}
		j, ok := index[cl]
		if !ok {
			j = len(claims)
			index[cl] = j
			claims = append(claims, cl)
		}
		at[i] = j
	}
	cl := x.s.claimTypes(ctx, claims)
	refused := cl.refused
	keep := make([]bool, len(ws))
	for i := range keep {
		keep[i] = true
	}
	drop := func(lo, hi int, msg *string) {
		for i := lo; i < hi; i++ {
			if at[i] < 0 {
				continue
			}
			if r := refused[at[i]]; r != "" && *msg == "" {
				*msg = r
			}
		}
		if *msg != "" {
			for i := lo; i < hi; i++ {
				keep[i] = false
			}
		}
	}
	for k := range ps {
		p := &ps[k]
		if p.tx == nil {
			drop(p.lo, p.hi, &p.errReply)
			continue
		}
		for j := range p.tx.parts {
			pt := &p.tx.parts[j]
			drop(pt.lo, pt.hi, &pt.errReply)
		}
	}
	// before[i] is the number of writes kept among ws[:i]: a range's new
	// bounds.
	before := make([]int, len(ws)+1)
	out := ws[:0]
	for i, w := range ws {
		before[i] = len(out)
		if keep[i] {
			out = append(out, w)
		}
	}
	before[len(ws)] = len(out)
	for k := range ps {
		p := &ps[k]
		p.lo, p.hi = before[p.lo], before[p.hi]
		if p.tx == nil {
			continue
		}
		for j := range p.tx.parts {
			pt := &p.tx.parts[j]
			pt.lo, pt.hi = before[pt.lo], before[pt.hi]
		}
		for i := p.lo; i < p.hi; i++ {
			out[i].JoinNext = i < p.hi-1
		}
	}
	return out, cl
}

// withMarkers returns ws with the write of each of markers (hashes the
// batch makes) before the hash's first write, joined to it
// (markerWrite): the marker commits with the field, so that a field is
// never committed without its hash's marker. x.marks holds the markers'
// places in the writes returned. Without markers it returns ws itself.
func (x *executor) withMarkers(ws []shardcounter.Write, markers []string) []shardcounter.Write {
	x.marks = x.marks[:0]
	if len(markers) == 0 {
		return ws
	}
	want := make(map[string]bool, len(markers))
	for _, h := range markers {
		want[h] = true
	}
	sent := x.sent[:0]
	for _, w := range ws {
		if w.Expire == nil && w.Take == nil {
			if hash, _, ok := shardcounter.SplitHashID(w.Counter); ok && want[hash] {
				delete(want, hash)
				x.marks = append(x.marks, len(sent))
				sent = append(sent, markerWrite(hash))
			}
		}
		sent = append(sent, w)
	}
	x.sent = sent
	return sent
}

// redoCrossSlot sends again, without its markers, each run of joined
// writes of sent that a store refused whole as a cross-slot transaction
// (a Redis Cluster whose masters hold no shard of both a new hash's
// marker and its field: shardcounter.CrossSlot, nothing of it applied),
// once it made the markers on their own (createMarker): a marker was what
// made the run a cross-slot one, unless the run is a transaction that is
// one without it, which is then refused again. The writes' results in
// res are replaced with those of the second sending.
func (x *executor) redoCrossSlot(ctx context.Context, sent []shardcounter.Write, res []shardcounter.WriteResult) {
	crossSlot := func(r shardcounter.WriteResult) bool { return r.Error != nil && shardcounter.IsCrossSlot(r.Error) }
	var runs [][2]int // [lo, hi] of each run to send again
	var hashes []string
	for _, m := range x.marks {
		if !crossSlot(res[m]) || !crossSlot(res[m+1]) {
			continue
		}
		lo, hi := m, m+1
		for lo > 0 && sent[lo-1].JoinNext {
			lo--
		}
		for hi < len(sent)-1 && sent[hi].JoinNext {
			hi++
		}
		hash, _, _ := shardcounter.SplitHashID(sent[m].Counter)
		hashes = append(hashes, hash)
		if len(runs) == 0 || runs[len(runs)-1][0] != lo {
			runs = append(runs, [2]int{lo, hi})
		}
	}
	if len(runs) == 0 {
		return
	}
	errs := make([]error, len(hashes))
	eachAtOnce(len(hashes), func(k int) { errs[k] = x.s.createMarker(ctx, hashes[k]) })
	failed := map[string]bool{}
	for k, err := range errs {
		if err != nil {
			failed[hashes[k]] = true
			x.s.types.forget(hashes[k])
		}
	}
	var again []shardcounter.Write
	var at []int // the place in sent of each write of again
	for _, r := range runs {
		ok := true
		for i := r[0]; i <= r[1]; i++ {
			if h, f, _ := shardcounter.SplitHashID(sent[i].Counter); f == "" && failed[h] && isMarkerAt(x.marks, i) {
				ok = false // its marker could not be made: the run keeps its error
			}
		}
		if !ok {
			continue
		}
		for i := r[0]; i <= r[1]; i++ {
			if isMarkerAt(x.marks, i) {
				res[i] = shardcounter.WriteResult{Counter: sent[i].Counter, Applied: true} // made on its own
			} else {
				again, at = append(again, sent[i]), append(at, i)
			}
		}
	}
	if len(again) == 0 {
		return
	}
	got, err := x.s.svc.WriteBatch(ctx, again)
	if err == nil && len(got) != len(again) {
		err = shardcounter.Errorf(shardcounter.EINTERNAL, "the service returned %d results for %d writes", len(got), len(again))
	}
	for k, i := range at {
		if err != nil {
			res[i] = shardcounter.WriteResult{Counter: sent[i].Counter, Error: &shardcounter.Error{Code: shardcounter.ErrorCode(err), Message: shardcounter.ErrorMessage(err)}}
		} else {
			res[i] = got[k]
		}
	}
}

// isMarkerAt reports whether place i of a batch's writes is a marker's
// (marks: executor.marks, in order).
func isMarkerAt(marks []int, i int) bool {
	_, ok := slices.BinarySearch(marks, i)
	return ok
}

// markersDone checks the markers' writes of a batch that committed
// (x.marks, in sent), and returns res without their results, matching
// the batch's own writes. A hash whose marker's write failed while its
// field's was applied gets its marker made on its own (createMarker), and
// is forgotten by the cache when that fails too.
func (x *executor) markersDone(ctx context.Context, sent []shardcounter.Write, res []shardcounter.WriteResult) []shardcounter.WriteResult {
	if len(x.marks) == 0 {
		return res
	}
	var redo []string
	for _, m := range x.marks {
		if res[m].Error != nil && res[m+1].Error == nil {
			hash, _, _ := shardcounter.SplitHashID(sent[m].Counter)
			redo = append(redo, hash)
		}
	}
	if len(redo) > 0 {
		errs := make([]error, len(redo))
		eachAtOnce(len(redo), func(k int) { errs[k] = x.s.createMarker(ctx, redo[k]) })
		for k, err := range errs {
			if err != nil {
				x.s.types.forget(redo[k])
			}
		}
	}
	out, next := res[:0], 0
	for i := range res {
		if next < len(x.marks) && x.marks[next] == i {
			next++
			continue
		}
		out = append(out, res[i])
	}
	return out
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
