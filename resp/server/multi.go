package server

import (
	"strconv"
	"strings"

	"github.com/shardcounter/shardcounter"
)

// This file holds transactions: MULTI, EXEC, DISCARD, WATCH and UNWATCH.
//
// Between MULTI and EXEC a connection's commands are checked and queued,
// each answered +QUEUED, as Redis does. A command refused while queueing
// (unknown, a wrong argument count, one that cannot be part of a
// transaction) is answered with its error and makes EXEC fail with
// EXECABORT, applying nothing. EXEC applies the queued writes as one run
// of the engine's WriteBatch joined by Write.JoinNext: they go to the
// store in one batch, with the writes of the other connections of the
// cycle, which the store applies as one commit (docs/RESP.md,
// "Transactions", says where that commit is atomic; a Redis Cluster store
// applies a transaction as one script on one master, or refuses it with
// CROSSSLOT). EXEC's reply holds
// every command's reply, in order: a write's from its own result, where
// the INCRs of one counter reply the values a Redis server would (the
// commit's total less the transaction's later writes to it); a read of a
// counter the transaction writes (GET, MGET, HGET, HMGET) the value at its
// place in the transaction; every other command runs after the commit, in
// its turn.

// txState is the transaction a connection is queueing.
type txState struct {
	cmds  []queued
	bytes int  // of the arguments queued
	dirty bool // a command was refused while queueing: EXEC aborts
	// afterCommit holds the keys of queued commands that run after the
	// commit (expiryOrder).
	afterCommit map[string]bool
	// argv and buf are the free part of the chunks that hold the queued
	// commands' arguments (queue).
	argv [][]byte
	buf  []byte
}

// queued is one command of a transaction, its arguments copied.
type queued struct {
	cmd  *command
	args [][]byte
}

// Bounds of one transaction, so that a client cannot hold unbounded
// memory in a MULTI it never ends. Redis has none.
const (
	maxTxCommands = 10000
	maxTxBytes    = 4 << 20
)

const errExecAbort = "EXECABORT Transaction discarded because of previous errors."

func cmdMulti(c *conn, args [][]byte) {
	if c.tx != nil {
		c.w.Error("ERR MULTI calls can not be nested")
		return
	}
	c.tx = &txState{}
	c.w.Simple("OK")
}

func cmdDiscard(c *conn, args [][]byte) {
	if c.tx == nil {
		c.w.Error("ERR DISCARD without MULTI")
		return
	}
	c.tx = nil
	c.w.Simple("OK")
}

// cmdWatch refuses WATCH: the store has no version of a key that a
// transaction could be checked against, and ignoring it would let a
// check-and-set run unchecked.
func cmdWatch(c *conn, args [][]byte) {
	if c.tx != nil {
		c.w.Error("ERR WATCH inside MULTI is not allowed")
		return
	}
	c.w.Error("ERR WATCH is not supported: shardcounter cannot abort a transaction when a key changes. " +
		"MULTI/EXEC without WATCH applies its writes as one atomic batch; for a bound on a counter, create it with SC.CREATE ... MIN/MAX")
}

// cmdUnwatch is UNWATCH: nothing is ever watched.
func cmdUnwatch(c *conn, args [][]byte) { c.w.Simple("OK") }

// queue queues a command of the transaction, or refuses it and marks the
// transaction for EXECABORT, checking as Redis does while queueing: that
// the command exists, its argument count and authentication; and, as
// Redis need not, that it can be part of a transaction here.
func (c *conn) queue(cmd *command, args [][]byte) {
	tx := c.tx
	refuse := func(msg string) {
		tx.dirty = true
		c.w.Error(msg)
	}
	size := 0
	for _, a := range args {
		size += len(a)
	}
	switch {
	case cmd == nil:
		refuse(unknownCommand(args))
	case !cmd.arityOK(len(args)):
		refuse("ERR wrong number of arguments for '" + cmd.name + "' command")
	case !c.authed && !cmd.noAuth:
		refuse(errNoAuth)
	case !cmd.noAuth && c.permit(cmd, args, true) != "":
		refuse(c.permit(cmd, args, false))
	case cmd.noTx != "":
		refuse("ERR " + strings.ToUpper(cmd.name) + " cannot be part of a transaction: " + cmd.noTx)
	case cmd.noTxOn != nil && cmd.noTxOn(c.s) != "":
		refuse("ERR " + strings.ToUpper(cmd.name) + " cannot be part of a transaction: " + cmd.noTxOn(c.s))
	case tx.expiryOrder(cmd, args) != "":
		refuse(tx.expiryOrder(cmd, args))
	case len(tx.cmds) >= maxTxCommands || tx.bytes+size > maxTxBytes:
		refuse("ERR a transaction holds at most " + strconv.Itoa(maxTxCommands) + " commands and " +
			strconv.Itoa(maxTxBytes>>20) + " MiB of arguments: EXEC it, or split it in two")
	case tx.dirty:
		c.w.Simple("QUEUED") // EXEC will abort: no need to keep it
	default:
		// The copies go to the transaction's chunks, a chunk taken when
		// the last is full: a transaction's few short commands take two
		// allocations, not two a command, and a chunk of a long one is
		// no larger than its command.
		if cap(tx.buf)-len(tx.buf) < size {
			tx.buf = make([]byte, 0, max(256, size))
		}
		if cap(tx.argv)-len(tx.argv) < len(args) {
			tx.argv = make([][]byte, 0, max(16, len(args)))
		}
		lo := len(tx.argv)
		for _, a := range args {
			tx.buf = append(tx.buf, a...)
			tx.argv = append(tx.argv, tx.buf[len(tx.buf)-len(a):len(tx.buf):len(tx.buf)])
		}
		q := queued{cmd: cmd, args: tx.argv[lo:len(tx.argv):len(tx.argv)]}
		if tx.cmds == nil {
			tx.cmds = make([]queued, 0, 4)
		}
		tx.cmds = append(tx.cmds, q)
		tx.bytes += size
		c.w.Simple("QUEUED")
	}
}

// txRun is a transaction EXEC is applying: its commands and, for each,
// the range of the batch's writes it made, or its error reply.
type txRun struct {
	cmds  []queued
	parts []part
	// existed says, for each counter that a read of the transaction reads
	// and a write of it writes, whether it existed before the commit.
	existed map[string]bool
}

// part is the writes ws[lo:hi] of a batch that one command made, or the
// error that command replies instead.
type part struct {
	lo, hi   int
	errReply string
}

// derivedRead reports whether cmd is a read whose value EXEC derives, for
// a counter the transaction writes, from the commit's total.
func derivedRead(cmd *command) bool { return cmd.readReply != nil && cmd.valueRead }

// execWrites is EXEC's part of a write batch: it ends the transaction and
// appends its writes to ws, joined so that they commit together. It
// returns the run for the reply, or the error reply of an EXEC that
// applies nothing (no MULTI, EXECABORT).
func (c *conn) execWrites(ws []shardcounter.Write) ([]shardcounter.Write, *txRun, string) {
	tx := c.tx
	c.tx = nil
	switch {
	case tx == nil:
		return ws, nil, "ERR EXEC without MULTI"
	case tx.dirty:
		return ws, nil, errExecAbort
	}
	// The user's rights may have shrunk since the commands were queued
	// (SIGHUP): one refused now refuses the whole transaction.
	for _, q := range tx.cmds {
		if msg := c.permit(q.cmd, q.args, true); msg != "" {
			return ws, nil, msg
		}
	}
	run := &txRun{cmds: tx.cmds, parts: make([]part, len(tx.cmds))}
	lo := len(ws)
	read := make(map[string]bool) // counters read by derived reads
	for _, q := range tx.cmds {
		if derivedRead(q.cmd) {
			if ids, msg := readIDs(q.cmd, q.args); msg == "" {
				for _, id := range ids {
					read[id] = true
				}
			}
		}
	}
	written := make(map[string]bool)
	for k, q := range tx.cmds {
		p := &run.parts[k]
		p.lo = len(ws)
		if q.cmd.write != nil {
			ws, p.errReply = q.cmd.write(c, q.args, ws)
			if p.errReply != "" {
				ws = ws[:p.lo]
			}
		}
		p.hi = len(ws)
		for i := p.lo; i < p.hi; i++ {
			if ws[i].Expire != nil {
				continue // a deadline change writes no value
			}
			written[ws[i].Counter] = true
			if read[ws[i].Counter] {
				ws[i].WantValue = true
			}
		}
	}
	for i := lo; i < len(ws)-1; i++ {
		ws[i].JoinNext = true // one commit (checkTypes keeps the joins when it drops writes)
	}
	var both []string // read and written: whether each existed before is needed
	for id := range read {
		if written[id] {
			both = append(both, id)
		}
	}
	if len(both) > 0 {
		ctx, cancel := c.ctx()
		rs, err := c.s.readMany(ctx, both)
		cancel()
		if err != nil {
			return ws[:lo], nil, errorReply(err)
		}
		run.existed = make(map[string]bool, len(both))
		for i, id := range both {
			run.existed[id] = rs[i].Err == nil
		}
	}
	return ws, run, ""
}

// effect is what write w, with result r, added to its counter's value:
// its delta (a bounded write's applied part: 0 when skipped), or 1 or -1
// for a member added or removed.
func effect(w shardcounter.Write, r shardcounter.WriteResult) int64 {
	switch {
	case r.Error != nil || !r.Applied || r.Duplicate:
		return 0
	case r.AppliedDelta != nil:
		return *r.AppliedDelta
	case w.Present == nil:
		return w.Delta
	case r.Changed == nil || !*r.Changed:
		return 0
	case *w.Present:
		return 1
	}
	return -1
}

// execReply replies to EXEC: an array of each command's reply. ws and res
// are the whole batch's writes and results (res is nil when the batch
// wrote nothing of this transaction).
//
// A store that applies a transaction in one step of its own (a Redis
// Cluster store, shardcounter.TxnApplier) may refuse it whole, every
// write with a CROSSSLOT error (shardcounter.CrossSlot): EXEC then
// replies that error alone, as Redis Cluster does, and runs none of the
// transaction's other commands.
func (c *conn) execReply(run *txRun, ws []shardcounter.Write, res []shardcounter.WriteResult) {
	for _, p := range run.parts {
		for i := p.lo; i < p.hi; i++ {
			if e := res[i].Error; e != nil && shardcounter.IsCrossSlot(e) {
				c.w.Error(e.Message)
				return
			}
		}
	}
	// final is each counter's value after the commit: the value of its
	// last write that has one. firstWrite is the command of its first
	// applied write.
	final := make(map[string]int64)
	firstWrite := make(map[string]int)
	for k, p := range run.parts {
		for i := p.lo; i < p.hi; i++ {
			id := ws[i].Counter
			if res[i].Error == nil && res[i].Value != nil {
				final[id] = *res[i].Value
			}
			if _, ok := firstWrite[id]; !ok && res[i].Error == nil && res[i].Applied {
				firstWrite[id] = k
			}
		}
	}
	// Walking backwards, later holds the effects of the writes after the
	// current one: a write's value is final less them, and so is a
	// derived read's.
	later := make(map[string]int64)
	values := make([]int64, len(res))
	reads := make([]derived, len(run.cmds))
	for k := len(run.parts) - 1; k >= 0; k-- {
		p, q := run.parts[k], run.cmds[k]
		for i := p.hi - 1; i >= p.lo; i-- {
			values[i] = final[ws[i].Counter] - later[ws[i].Counter]
			later[ws[i].Counter] += effect(ws[i], res[i])
		}
		if derivedRead(q.cmd) {
			reads[k] = c.derive(run, q, k, final, later, firstWrite)
		}
	}
	c.fillReads(reads)
	c.w.Array(len(run.cmds))
	for k, q := range run.cmds {
		p := run.parts[k]
		switch {
		case p.errReply != "":
			c.w.Error(p.errReply)
		case q.cmd.write != nil:
			rs := make([]shardcounter.WriteResult, p.hi-p.lo)
			copy(rs, res[p.lo:p.hi])
			for i := range rs {
				if rs[i].Value != nil {
					v := values[p.lo+i]
					rs[i].Value = &v
				}
			}
			q.cmd.reply(c, q.args, ws[p.lo:p.hi], rs)
		case reads[k].rs != nil:
			q.cmd.readReply(c, q.args, reads[k].rs)
		default:
			c.runAlone(q.cmd, q.args)
		}
	}
}

// derived is the results of a derived read in a transaction, by key; a
// key with neither a Reading nor an error is read after the commit.
type derived struct {
	ids []string
	rs  []shardcounter.ReadResult
}

// derive returns the results of derived read q, the k-th command, for the
// counters the transaction wrote: the value after the commit less the
// effects of the writes after it, missing when no write before it
// applied and the counter did not exist before. Counters it did not
// write are left for fillReads.
func (c *conn) derive(run *txRun, q queued, k int, final, later map[string]int64, firstWrite map[string]int) derived {
	ids, msg := readIDs(q.cmd, q.args)
	if msg != "" {
		return derived{} // runAlone replies with the error
	}
	rs := make([]shardcounter.ReadResult, len(ids))
	for j, id := range ids {
		v, ok := final[id]
		if !ok {
			continue
		}
		if first, wrote := firstWrite[id]; (wrote && first < k) || run.existed[id] {
			rs[j].Reading = &shardcounter.Reading{ID: id, Value: v - later[id], Consistency: shardcounter.Strong}
		} else {
			rs[j].Err = shardcounter.ErrNotFound
		}
	}
	return derived{ids, rs}
}

// fillReads reads, in one batch read after the commit, the counters of
// derived reads that the transaction did not write, and fills them in.
// When that read fails, those commands are left to run alone, replying
// with the error.
func (c *conn) fillReads(reads []derived) {
	var ids []string
	for _, d := range reads {
		for j, r := range d.rs {
			if r.Reading == nil && r.Err == nil {
				ids = append(ids, d.ids[j])
			}
		}
	}
	if len(ids) == 0 {
		return
	}
	ctx, cancel := c.ctx()
	got, err := c.s.readMany(ctx, ids)
	cancel()
	n := 0
	for k := range reads {
		d := &reads[k]
		for j, r := range d.rs {
			if r.Reading != nil || r.Err != nil {
				continue
			}
			if err != nil {
				d.rs = nil
				break
			}
			d.rs[j] = got[n]
			n++
		}
	}
}

// runAlone runs one command on its own, as EXEC does for the commands it
// does not batch: a strong read of keys reads them, and any other runs.
func (c *conn) runAlone(cmd *command, args [][]byte) {
	if cmd.run != nil {
		cmd.run(c, args)
		return
	}
	ids, msg := readIDs(cmd, args)
	if msg != "" {
		c.w.Error(msg)
		return
	}
	ctx, cancel := c.ctx()
	rs, err := c.s.readMany(ctx, ids)
	cancel()
	if err != nil {
		c.w.Error(errorReply(err))
		return
	}
	cmd.readReply(c, args, rs)
}
