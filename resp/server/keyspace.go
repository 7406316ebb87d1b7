package server

import (
	"cmp"
	"context"
	"errors"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/glob"
	"github.com/shardcounter/shardcounter/resp"
)

// This file holds the commands on the keyspace: SCAN, TYPE, DBSIZE,
// FLUSHDB, FLUSHALL and FUNCTION, and SMEMBERS and SSCAN on a distinct
// counter's members.
//
// The keyspace is the store's list of counters in byte order of id
// (ListCounters): a plain counter is a key of its own id, and the marker
// and fields of a hash, which follow its name in that order, are one key,
// the hash's name. SCAN walks that list: its cursor stands for the last id
// a call listed, so a key there for the whole scan is returned exactly
// once (Redis promises at least once).

// maxCursors bounds the positions the server remembers for SCAN and
// SSCAN: a cursor names a position for as long as it is among the last
// maxCursors handed out.
const maxCursors = 1 << 14

// cursors maps SCAN's cursors, which clients parse as unsigned 64-bit
// integers, to the positions they stand for: a cursor is a hash of its
// position, so the same position always gets the same cursor. It is safe
// for concurrent use.
type cursors struct {
	mu    sync.Mutex
	pos   map[uint64]string
	order []uint64 // the cursors in the order handed out, oldest first
}

// save returns the cursor of position pos (never 0, which starts a scan).
func (cs *cursors) save(pos string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(pos))
	id := h.Sum64()>>1 | 1 // below 2^63: clients that parse a signed integer take it too
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.pos == nil {
		cs.pos = make(map[uint64]string)
	}
	if _, ok := cs.pos[id]; !ok {
		if len(cs.order) >= maxCursors {
			delete(cs.pos, cs.order[0])
			cs.order = cs.order[1:]
		}
		cs.order = append(cs.order, id)
	}
	cs.pos[id] = pos
	return id
}

// load returns the position of cursor id.
func (cs *cursors) load(id uint64) (string, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	pos, ok := cs.pos[id]
	return pos, ok
}

// scanArgs are the arguments of SCAN and SSCAN after the cursor.
type scanArgs struct {
	match *glob.Glob
	count int
	typ   string // SCAN's TYPE, lower case; "" for any
}

// parseScan parses [MATCH pattern] [COUNT n] [TYPE t] (TYPE when withType).
func parseScan(args [][]byte, withType bool) (scanArgs, string) {
	a := scanArgs{count: 10}
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) {
			return a, errSyntax
		}
		switch v := args[i+1]; lower(args[i]) {
		case "match":
			g := glob.Compile(string(v))
			a.match = &g
		case "count":
			n, ok := resp.ParseInt(v)
			if !ok {
				return a, errNotInteger
			}
			if n < 1 {
				return a, errSyntax
			}
			a.count = int(min(n, shardcounter.MaxListLimit))
		case "type":
			if !withType {
				return a, errSyntax
			}
			a.typ = lower(v)
		default:
			return a, errSyntax
		}
	}
	return a, ""
}

// scanStart returns the position cursor arg stands for, "" for 0, or the
// error reply.
func (s *Server) scanStart(arg []byte, scope string) (string, string) {
	n, err := strconv.ParseUint(string(arg), 10, 64)
	if err != nil {
		return "", "ERR invalid cursor"
	}
	if n == 0 {
		return "", ""
	}
	pos, ok := s.cursors.load(n)
	if !ok || !strings.HasPrefix(pos, scope) {
		return "", "ERR cursor " + string(arg) + " is unknown or has expired (the server keeps the last " +
			strconv.Itoa(maxCursors) + " cursors it handed out): start the scan again from 0"
	}
	return pos[len(scope):], ""
}

// typeName is the type TYPE and SCAN's TYPE give a counter: string for a
// sum counter and for an approx one (Redis keeps a HyperLogLog in a
// string), set for a distinct one.
func typeName(c *shardcounter.Counter) string {
	if c.Kind == shardcounter.KindDistinct {
		return "set"
	}
	return "string"
}

// cmdScan is SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]: a page of
// keys and the cursor of the next (0 at the end). COUNT is how many
// counters the call lists (a hash's marker and fields count each), so a
// call may return fewer keys than COUNT, or none, before the end. A
// pattern that starts with literal bytes lists only the ids that start
// with them.
func cmdScan(c *conn, args [][]byte) {
	a, msg := parseScan(args[2:], true)
	if msg != "" {
		c.w.Error(msg)
		return
	}
	after, msg := c.s.scanStart(args[1], "k")
	if msg != "" {
		c.w.Error(msg)
		return
	}
	prefix := ""
	if a.match != nil {
		prefix = a.match.Prefix()
	}
	if after != "" && !strings.HasPrefix(after, prefix) {
		if after > prefix {
			c.replyScan(0, nil) // every id with the prefix was before the cursor
			return
		}
		after = ""
	}
	ctx, cancel := c.ctx()
	list, err := c.s.svc.ListCounters(ctx, shardcounter.ListOptions{Prefix: prefix, After: after, Limit: a.count})
	cancel()
	if err != nil {
		c.w.Error(errorReply(err))
		return
	}
	var keys []string
	pending := "" // a hash whose marker was listed, whose fields may follow
	skip := ""    // a hash already taken: the rest of its ids are passed over
	want := func(name, typ string) bool {
		return (a.typ == "" || a.typ == typ) && (a.match == nil || a.match.Match(name))
	}
	for _, ctr := range list.Counters {
		hash, field, ok := shardcounter.SplitHashID(ctr.ID)
		switch {
		case ok && hash == skip:
		case ok && field == "":
			pending = hash
		case ok:
			skip, pending = hash, ""
			if want(hash, "hash") {
				keys = append(keys, hash)
			}
		default:
			if want(ctr.ID, typeName(ctr)) {
				keys = append(keys, ctr.ID)
			}
		}
	}
	if list.Next == "" {
		c.replyScan(0, keys)
		return
	}
	next := list.Next
	if h, f, ok := shardcounter.SplitHashID(next); ok && (h != pending || f != "") {
		next = shardcounter.AfterHash(h) // past the rest of a hash taken
	}
	c.replyScan(c.s.cursors.save("k"+next), keys)
}

// replyScan replies to SCAN and SSCAN: the next cursor and the page.
func (c *conn) replyScan(cursor uint64, items []string) {
	c.w.Array(2)
	c.w.BulkString(strconv.FormatUint(cursor, 10))
	c.w.Array(len(items))
	for _, it := range items {
		c.w.BulkString(it)
	}
}

// cmdType is TYPE key: string (a sum counter), set (a distinct counter),
// hash, or none.
func cmdType(c *conn, args [][]byte) {
	id, msg := counterID(args[1])
	if msg != "" {
		c.w.Error(msg)
		return
	}
	ctx, cancel := c.ctx()
	defer cancel()
	ctr, err := c.s.svc.GetCounter(ctx, id)
	switch {
	case err == nil:
		c.w.Simple(typeName(ctr))
		return
	case !errors.Is(err, shardcounter.ErrNotFound):
		c.w.Error(errorReply(err))
		return
	}
	t, err := c.s.typeOf(ctx, id)
	switch {
	case err != nil:
		c.w.Error(errorReply(err))
	case t == typeHash:
		c.w.Simple("hash")
	default:
		c.w.Simple("none")
	}
}

// eachCounter calls f with every page of counters, in id order.
func (s *Server) eachCounter(ctx context.Context, f func([]*shardcounter.Counter) error) error {
	after := ""
	for {
		list, err := s.svc.ListCounters(ctx, shardcounter.ListOptions{After: after, Limit: shardcounter.MaxListLimit})
		if err != nil {
			return err
		}
		if err := f(list.Counters); err != nil {
			return err
		}
		if list.Next == "" {
			return nil
		}
		after = list.Next
	}
}

// cmdDBSize is DBSIZE: the number of keys, counted by listing every
// counter (a hash counts once, when it has a field).
func cmdDBSize(c *conn, args [][]byte) {
	ctx, cancel := c.ctx()
	defer cancel()
	n, last := int64(0), ""
	err := c.s.eachCounter(ctx, func(cs []*shardcounter.Counter) error {
		for _, ctr := range cs {
			hash, field, ok := shardcounter.SplitHashID(ctr.ID)
			switch {
			case !ok:
				n++
			case field != "" && hash != last:
				last = hash
				n++
			}
		}
		return nil
	})
	if err != nil {
		c.w.Error(errorReply(err))
		return
	}
	c.w.Int(n)
}

// cmdFlush is FLUSHDB and FLUSHALL [ASYNC|SYNC]: with Options.AllowFlush,
// it deletes every counter, a page of the listing at a time with
// flushWorkers deletions at once (each with the command timeout of its
// own), and replies +OK once they are gone; without, it is refused, and
// deletes nothing. It is O(N) deletions, each a commit of the store.
func cmdFlush(c *conn, args [][]byte) {
	name := strings.ToUpper(string(args[0]))
	if len(args) == 2 && lower(args[1]) != "async" && lower(args[1]) != "sync" || len(args) > 2 {
		c.w.Error(errSyntax)
		return
	}
	if !c.s.opts.AllowFlush {
		c.w.Error("ERR " + name + " is refused: it would delete every counter. Start shardcounter serve with --resp-allow-flush to allow it, or DEL the keys")
		return
	}
	defer c.s.types.clear()
	for {
		ctx, cancel := c.ctx()
		list, err := c.s.svc.ListCounters(ctx, shardcounter.ListOptions{Limit: shardcounter.MaxListLimit})
		cancel()
		if err == nil && len(list.Counters) == 0 {
			break
		}
		if err == nil {
			err = c.s.deleteAll(list.Counters)
		}
		if err != nil {
			c.w.Error(errorReply(err))
			return
		}
	}
	c.w.Simple("OK")
}

// flushWorkers is how many deletions FLUSHALL runs at once.
const flushWorkers = 8

// deleteAll deletes counters, flushWorkers at a time, and returns the
// first error other than a counter being gone already.
func (s *Server) deleteAll(cs []*shardcounter.Counter) error {
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	next := make(chan string)
	for range flushWorkers {
		wg.Go(func() {
			for id := range next {
				ctx, cancel := s.ctx()
				err := s.svc.DeleteCounter(ctx, id)
				cancel()
				if err != nil && !errors.Is(err, shardcounter.ErrNotFound) {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, ctr := range cs {
		next <- ctr.ID
	}
	close(next)
	wg.Wait()
	return first
}

// cmdFunction is FUNCTION FLUSH [ASYNC|SYNC], which succeeds with nothing
// to do, and FUNCTION LIST, which lists none: shardcounter runs no
// functions, and test harnesses call these to start clean.
func cmdFunction(c *conn, args [][]byte) {
	switch lower(args[1]) {
	case "flush":
		if len(args) > 3 || len(args) == 3 && lower(args[2]) != "async" && lower(args[2]) != "sync" {
			c.w.Error(errSyntax)
			return
		}
		c.w.Simple("OK")
	case "list":
		c.w.Array(0)
	default:
		c.w.Error("ERR FUNCTION " + strings.ToUpper(clip(args[1])) + " is not supported: shardcounter runs no functions (FUNCTION FLUSH and LIST answer as for none)")
	}
}

// members returns up to limit members of distinct counter key after
// position after, for SMEMBERS and SSCAN; it replies itself and returns
// false for a missing key (with missing) or an error.
func (c *conn) members(key []byte, after string, limit int, missing func()) (*shardcounter.MemberList, bool) {
	id, msg := counterID(key)
	if msg != "" {
		c.w.Error(msg)
		return nil, false
	}
	ctx, cancel := c.ctx()
	list, err := c.s.svc.ListMembers(ctx, id, shardcounter.ListOptions{After: after, Limit: limit})
	cancel()
	switch {
	case errors.Is(err, shardcounter.ErrNotFound):
		c.replyMissing(id, typePlain, missing)
		return nil, false
	case errors.Is(err, shardcounter.ErrInvalid):
		c.w.Error(errWrongType + ": " + shardcounter.ErrorMessage(err))
		return nil, false
	case err != nil:
		c.w.Error(errorReply(err))
		return nil, false
	}
	return list, true
}

// cmdSMembers is SMEMBERS key: every member of a distinct counter, read
// page by page (not one snapshot when they are more than a page).
func cmdSMembers(c *conn, args [][]byte) {
	var all []string
	after := ""
	for {
		list, ok := c.members(args[1], after, shardcounter.MaxListLimit, func() { c.w.Set(0) })
		if !ok {
			return
		}
		all = append(all, list.Members...)
		if list.Next == "" {
			break
		}
		after = list.Next
	}
	c.w.Set(len(all))
	for _, m := range all {
		c.w.BulkString(m)
	}
}

// cmdSScan is SSCAN key cursor [MATCH pattern] [COUNT n]: a page of a
// distinct counter's members, in byte order, and the next cursor.
func cmdSScan(c *conn, args [][]byte) {
	a, msg := parseScan(args[3:], false)
	if msg != "" {
		c.w.Error(msg)
		return
	}
	scope := "s" + string(args[1]) + "\x00"
	after, msg := c.s.scanStart(args[2], scope)
	if msg != "" {
		c.w.Error(msg)
		return
	}
	list, ok := c.members(args[1], after, a.count, func() { c.replyScan(0, nil) })
	if !ok {
		return
	}
	var page []string
	for _, m := range list.Members {
		if a.match == nil || a.match.Match(m) {
			page = append(page, m)
		}
	}
	if list.Next == "" {
		c.replyScan(0, page)
		return
	}
	c.replyScan(c.s.cursors.save(scope+list.Next), page)
}
