package server

import (
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/resp"
)

// This file holds INCREX: an increment kept within bounds, as Redis 8.8
// defines it, decided by the core on the counter's exact total
// (shardcounter.Bound).

// increx is INCREX's arguments once parsed.
type increx struct {
	key   []byte
	delta int64
	bound shardcounter.Bound
	// expire, when set, is the deadline change made in the increment's
	// commit: EX, PX, EXAT, PXAT (At), PERSIST (At 0), with ENX (Cond
	// "nx": only when the key has no deadline yet).
	expire *shardcounter.ExpireChange
}

// parseIncrEx parses INCREX key [BYINT n] [LBOUND lo] [UBOUND hi]
// [SATURATE]: an increment of 1 unless BYINT says otherwise, and no bound
// on a side not given; [EX s|PX ms|EXAT t|PXAT t|PERSIST] [ENX] change
// the key's deadline in the same commit (a time that is not in the future
// is refused), ENX only when it has none. BYFLOAT is refused (counters
// hold integers). Its message is Redis's error reply, "" when the
// arguments are good. now is the time EX and PX count from.
func parseIncrEx(args [][]byte, now time.Time) (increx, string) {
	x := increx{key: args[1], delta: 1, bound: shardcounter.Unbounded()}
	var seen [4]bool // BYINT, LBOUND, UBOUND, SATURATE
	enx := false
	for i := 2; i < len(args); i++ {
		opt := lower(args[i])
		var at int
		var v *int64
		switch opt {
		case "byint":
			at, v = 0, &x.delta
		case "lbound":
			at, v = 1, &x.bound.Lower
		case "ubound":
			at, v = 2, &x.bound.Upper
		case "saturate":
			if seen[3] {
				return x, errSyntax + ": SATURATE given twice"
			}
			seen[3], x.bound.Saturate = true, true
			continue
		case "byfloat":
			return x, "ERR BYFLOAT is not supported: counters hold integers, use BYINT"
		case "enx":
			if enx {
				return x, errSyntax + ": ENX given twice"
			}
			enx = true
			continue
		case "persist":
			if x.expire != nil {
				return x, errSyntax + ": give one of EX, PX, EXAT, PXAT and PERSIST"
			}
			x.expire = &shardcounter.ExpireChange{}
			continue
		case "ex", "px", "exat", "pxat":
			if x.expire != nil {
				return x, errSyntax + ": give one of EX, PX, EXAT, PXAT and PERSIST"
			}
			if i+1 >= len(args) {
				return x, errSyntax + ": " + opt + " needs an integer"
			}
			n, ok := resp.ParseInt(args[i+1])
			if !ok {
				return x, errNotInteger
			}
			at, ok := expireTime(now, n, opt == "px" || opt == "pxat", opt == "exat" || opt == "pxat")
			if !ok || !at.After(now) {
				return x, "ERR invalid expire time in 'increx' command"
			}
			x.expire = &shardcounter.ExpireChange{At: at.UnixMilli()}
			i++
			continue
		default:
			return x, errSyntax + ": unknown option '" + clip(args[i]) + "': use BYINT, LBOUND, UBOUND or SATURATE"
		}
		if seen[at] {
			return x, errSyntax + ": " + opt + " given twice"
		}
		if i+1 >= len(args) {
			return x, errSyntax + ": " + opt + " needs an integer"
		}
		n, ok := resp.ParseInt(args[i+1])
		if !ok {
			return x, errNotInteger
		}
		seen[at], *v = true, n
		i++
	}
	if x.bound.Lower > x.bound.Upper {
		return x, "ERR LBOUND is above UBOUND: give LBOUND ≤ UBOUND"
	}
	if enx {
		if x.expire == nil {
			return x, errSyntax + ": ENX goes with EX, PX, EXAT, PXAT or PERSIST"
		}
		x.expire.Cond = "nx"
	}
	return x, ""
}

// writeIncrEx is INCREX: one bounded write, committed on its own, and
// its deadline change joined to the same commit, made only if the write
// is not skipped (ExpireChange.AfterBound), as Redis 8.8 leaves the TTL
// of a skipped increment untouched.
func writeIncrEx(c *conn, args [][]byte, ws []shardcounter.Write) ([]shardcounter.Write, string) {
	x, msg := parseIncrEx(args, time.Now())
	if msg != "" {
		return ws, msg
	}
	id, msg := counterID(x.key)
	if msg != "" {
		return ws, msg
	}
	if _, ok := c.s.svc.(shardcounter.Expirer); x.expire != nil && !ok {
		return ws, errNoExpiry
	}
	b := x.bound
	ws = append(ws, shardcounter.Write{Counter: id, Delta: x.delta, Bound: &b, WantValue: true, JoinNext: x.expire != nil})
	if x.expire != nil {
		x.expire.AfterBound = true // a skipped increment leaves the deadline as it was
		ws = append(ws, shardcounter.Write{Counter: id, Expire: x.expire})
	}
	return ws, ""
}

// replyIncrEx replies to INCREX: the value after the commit and the
// increment applied (0 when it was skipped, out of bounds).
func replyIncrEx(c *conn, args [][]byte, ws []shardcounter.Write, res []shardcounter.WriteResult) {
	switch r := res[0]; {
	case r.Error != nil:
		c.w.Error(c.writeErrorReply(ws[0], r.Error))
	case r.Value == nil || r.AppliedDelta == nil:
		c.w.Error("ERR internal error: the service gave no value after the write")
	default:
		c.w.Array(2)
		c.w.Int(*r.Value)
		c.w.Int(*r.AppliedDelta)
	}
}
