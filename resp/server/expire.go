package server

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/resp"
)

// Expiry: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL, EXPIRETIME,
// PEXPIRETIME and PERSIST, over the service's shardcounter.Expirer. A
// deadline is a name's: a counter's, or a hash's with all its fields.
// The EXPIRE family are writes of the batch (Write.Expire), in a
// transaction in their turn among its writes. TTL, PERSIST and their kin
// run on their own; in a transaction after its writes commit, in their
// turn, so a write queued after one of them on the same key is refused
// while queueing (the order could not be kept), and EXEC aborts.

const errNoExpiry = "ERR this server's service keeps no deadlines"

func (c *conn) expirer() (shardcounter.Expirer, bool) {
	x, ok := c.s.svc.(shardcounter.Expirer)
	if !ok {
		c.w.Error(errNoExpiry)
	}
	return x, ok
}

// expireTime returns the deadline n means for the command, false when it
// leaves int64 milliseconds (Redis's "invalid expire time").
func expireTime(now time.Time, n int64, ms, abs bool) (time.Time, bool) {
	if !ms {
		if n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
			return time.Time{}, false
		}
		n *= 1000
	}
	if !abs {
		base := now.UnixMilli()
		if (n > 0 && base > math.MaxInt64-n) || (n < 0 && base < math.MinInt64-n) {
			return time.Time{}, false
		}
		n += base
	}
	if n > now.Add(shardcounter.MaxTTL).UnixMilli() {
		return time.Time{}, false // past what a deadline may be here
	}
	return time.UnixMilli(n), true
}

func writeExpire(c *conn, args [][]byte, ws []shardcounter.Write) ([]shardcounter.Write, string) {
	return expireWrite(c, args, ws, "expire", false, false)
}

func writePExpire(c *conn, args [][]byte, ws []shardcounter.Write) ([]shardcounter.Write, string) {
	return expireWrite(c, args, ws, "pexpire", true, false)
}

func writeExpireAt(c *conn, args [][]byte, ws []shardcounter.Write) ([]shardcounter.Write, string) {
	return expireWrite(c, args, ws, "expireat", false, true)
}

func writePExpireAt(c *conn, args [][]byte, ws []shardcounter.Write) ([]shardcounter.Write, string) {
	return expireWrite(c, args, ws, "pexpireat", true, true)
}

// expireWrite is EXPIRE key n [NX|XX|GT|LT] and its kin as a write of the
// batch (shardcounter.Write.Expire): the deadline change joins the group
// commit of the writes around it, in a transaction those before it, and
// costs no commit or read of its own where the service knows the key's
// deadline. replyExpire replies 1 when the deadline was set (or, for a
// time not in the future, the key deleted), 0 when the key holds nothing
// or the condition was not met.
func expireWrite(c *conn, args [][]byte, ws []shardcounter.Write, name string, ms, abs bool) ([]shardcounter.Write, string) {
	id, msg := counterID(args[1])
	if msg != "" {
		return ws, msg
	}
	n, ok := resp.ParseInt(args[2])
	if !ok {
		return ws, errNotInteger
	}
	cond, msg := expireCondition(args[3:])
	if msg != "" {
		return ws, msg
	}
	if _, ok := c.s.svc.(shardcounter.Expirer); !ok {
		return ws, errNoExpiry
	}
	at, ok := expireTime(time.Now(), n, ms, abs)
	if !ok {
		return ws, "ERR invalid expire time in '" + name + "' command"
	}
	x := &shardcounter.ExpireChange{At: max(at.UnixMilli(), 1), Cond: cond}
	return append(ws, shardcounter.Write{Counter: id, Expire: x}), ""
}

// replyExpire is the reply of the EXPIRE family: 1 when the deadline
// changed. A change that deleted the key (a time not in the future)
// drops the key's type from the server's cache.
func replyExpire(c *conn, args [][]byte, ws []shardcounter.Write, res []shardcounter.WriteResult) {
	switch {
	case len(res) == 0:
		c.w.Int(0)
	case res[0].Error != nil:
		c.w.Error(errorReply(res[0].Error))
	default:
		if res[0].Applied && ws[0].Expire.At <= time.Now().UnixMilli() {
			c.s.types.forget(ws[0].Counter)
		}
		c.w.Int(b2i(res[0].Applied))
	}
}

// expireCondition reads EXPIRE's options: "", "nx", "xx", "gt" or "lt".
func expireCondition(opts [][]byte) (string, string) {
	var nx, xx, gt, lt bool
	for _, o := range opts {
		switch lower(o) {
		case "nx":
			nx = true
		case "xx":
			xx = true
		case "gt":
			gt = true
		case "lt":
			lt = true
		default:
			return "", "ERR Unsupported option " + clip(o)
		}
	}
	switch {
	case nx && (xx || gt || lt):
		return "", "ERR NX and XX, GT or LT options at the same time are not compatible"
	case gt && lt:
		return "", "ERR GT and LT options at the same time are not compatible"
	case nx:
		return "nx", ""
	case gt:
		return "gt", ""
	case lt:
		return "lt", ""
	case xx:
		return "xx", ""
	}
	return "", ""
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func cmdTTL(c *conn, args [][]byte)         { ttlCommand(c, args, false, false) }
func cmdPTTL(c *conn, args [][]byte)        { ttlCommand(c, args, true, false) }
func cmdExpireTime(c *conn, args [][]byte)  { ttlCommand(c, args, false, true) }
func cmdPExpireTime(c *conn, args [][]byte) { ttlCommand(c, args, true, true) }

// ttlCommand is TTL key and its kin: -2 when the key holds nothing, -1
// without a deadline, else the time left (or the deadline), rounded to
// seconds as Redis rounds.
func ttlCommand(c *conn, args [][]byte, ms, abs bool) {
	withExpirer(c, args[1], func(ctx context.Context, x shardcounter.Expirer, id string) error {
		ttl, err := x.CounterTTL(ctx, id)
		if err != nil {
			return err
		}
		v := ttl.RemainingMS
		if v >= 0 {
			if abs {
				v = ttl.ExpiresAt.UnixMilli()
			}
			if !ms {
				v = (v + 500) / 1000
			}
		}
		c.w.Int(v)
		return nil
	})
}

// withExpirer checks a one-key command's key and runs fn with its id, the
// server's Expirer and the command's context, answering what fails.
func withExpirer(c *conn, key []byte, fn func(ctx context.Context, x shardcounter.Expirer, id string) error) {
	id, msg := counterID(key)
	if msg != "" {
		c.w.Error(msg)
		return
	}
	x, ok := c.expirer()
	if !ok {
		return
	}
	ctx, cancel := c.ctx()
	defer cancel()
	if err := fn(ctx, x, id); err != nil {
		c.w.Error(errorReply(err))
	}
}

// cmdPersist is PERSIST key: 1 when a deadline was removed.
func cmdPersist(c *conn, args [][]byte) {
	withExpirer(c, args[1], func(ctx context.Context, x shardcounter.Expirer, id string) error {
		done, err := x.PersistCounter(ctx, id)
		if err == nil {
			c.w.Int(b2i(done))
		}
		return err
	})
}

// expiryOrder notes, in a transaction being queued, the key of a command
// that runs after the commit (the EXPIRE family), and refuses a write
// queued after one on the same key: it would commit before it.
func (tx *txState) expiryOrder(cmd *command, args [][]byte) string {
	if cmd.afterCommit {
		if tx.afterCommit == nil {
			tx.afterCommit = make(map[string]bool)
		}
		tx.afterCommit[string(args[1])] = true
		return ""
	}
	if cmd.write == nil || cmd.firstKey == 0 || len(args) <= cmd.firstKey || !tx.afterCommit[string(args[cmd.firstKey])] {
		return ""
	}
	return "ERR " + strings.ToUpper(cmd.name) + " after PERSIST, TTL, PTTL, EXPIRETIME or PEXPIRETIME of the same key in one transaction: those run after " +
		"the transaction's writes commit, so this write would come first; put them after the writes"
}
