package server

import (
	"context"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/resp"
)

// CL.THROTTLE key max_burst count period [quantity], as redis-cell (and
// Dragonfly) answer it: a GCRA take of quantity tokens from key, where
// count tokens flow in a period of seconds and max_burst + 1 fit at once.
// It is decided by the engine in the group commit, durably, on the
// store's clock (engine.Throttle): the same arguments share key's state,
// other arguments for the same key keep another (docs/RESP.md).

// throttler is the service of CL.THROTTLE, the engine: its WriteBatch
// decides takes (Write.Take).
type throttler interface {
	Throttle(ctx context.Context, key string, p shardcounter.LimitPolicy, cost int64, peek bool) (*shardcounter.LimitResult, error)
}

const (
	errNoThrottle    = "ERR this server's service keeps no rate limits"
	errThrottleStore = "ERR this store does not decide rate limits: keep CL.THROTTLE's keys on a store that does (docs/LIMITS.md lists them)"
	noTxThrottle     = "this store applies a transaction with a script of its own, which carries no take (takes are a script of their own on Redis); send it before MULTI or after EXEC"
)

// txTaker is a service that says whether its stores' transactions carry
// takes (engine.TakesInTransactions).
type txTaker interface{ TakesInTransactions() bool }

// throttleNoTx says why CL.THROTTLE cannot be part of a transaction on
// s's service, "" when it can: in a transaction a take is one of the
// writes EXEC commits as one batch, decided in that commit with them.
func throttleNoTx(s *Server) string {
	if t, ok := s.svc.(txTaker); ok && !t.TakesInTransactions() {
		return noTxThrottle
	}
	return ""
}

// throttleArgs reads CL.THROTTLE's arguments after the key: the policy
// and the quantity, or the error reply.
func throttleArgs(args [][]byte) (shardcounter.LimitPolicy, int64, string) {
	var p shardcounter.LimitPolicy
	if len(args) != 5 && len(args) != 6 {
		return p, 0, "ERR wrong number of arguments for 'cl.throttle' command"
	}
	var n [4]int64
	n[3] = 1 // quantity
	for i, a := range args[2:] {
		v, ok := resp.ParseInt(a)
		if !ok {
			return p, 0, errNotInteger
		}
		n[i] = v
	}
	burst, count, period, quantity := n[0], n[1], n[2], n[3]
	switch {
	case burst < 0:
		return p, 0, "ERR max_burst must be 0 or more"
	case count < 1:
		return p, 0, "ERR count per period must be 1 or more"
	case period < 1:
		return p, 0, "ERR period must be 1 second or more"
	case quantity < 0:
		return p, 0, "ERR quantity must be 0 or more"
	case burst >= shardcounter.MaxLimitQuota || count > shardcounter.MaxLimitQuota:
		return p, 0, "ERR max_burst and count must be below 1099511627776"
	case period > int64(shardcounter.MaxLimitPeriod/shardcounter.Duration(time.Second)):
		return p, 0, "ERR period must be at most 31622400 seconds (366 days)"
	}
	p = shardcounter.LimitPolicy{Kind: shardcounter.LimitGCRA, Limit: count,
		Period: shardcounter.Duration(period) * shardcounter.Duration(time.Second), Burst: burst + 1}
	if err := shardcounter.ValidateLimitPolicy(p); err != nil {
		return p, 0, "ERR " + shardcounter.ErrorMessage(err)
	}
	return p, quantity, ""
}

// writeThrottle is CL.THROTTLE as a write of the batch: a take of the
// key's state (engine.ThrottleKeyID), decided in the group commit with
// the writes around it, so that many connections' throttles share
// commits. quantity 0 is a peek of 1, answered as never limited.
func writeThrottle(c *conn, args [][]byte, ws []shardcounter.Write) ([]shardcounter.Write, string) {
	p, quantity, msg := throttleArgs(args)
	if msg != "" {
		return ws, msg
	}
	p = p.WithDefaults()
	if c.thr.id == "" || c.thr.p != p || c.thr.key != string(args[1]) {
		key := string(args[1])
		if err := shardcounter.ValidateName(shardcounter.CounterIDKind, key); err != nil {
			return ws, "ERR " + shardcounter.ErrorMessage(err)
		}
		c.thr = throttleID{key: key, p: p, id: engine.ThrottleKeyID(p, key)}
	}
	if _, ok := c.s.svc.(throttler); !ok {
		return ws, errNoThrottle
	}
	t := &shardcounter.LimitTake{Policy: p, Cost: max(quantity, 1), Peek: quantity == 0}
	return append(ws, shardcounter.Write{Counter: c.thr.id, Take: t}), ""
}

// throttleID is a connection's last CL.THROTTLE key and policy (with its
// defaults), and the id of the key's state under it: a client that
// throttles one key again and again makes the id (two renderings of the
// policy and a hash of it) once.
type throttleID struct {
	key string
	p   shardcounter.LimitPolicy
	id  string
}

// replyThrottle replies five integers: limited (0 or 1), the limit
// (max_burst + 1), the tokens remaining, the seconds until the same take
// would be allowed (-1 when it was, or when quantity is above the limit
// and never would be) and the seconds until the bucket is full again.
// Seconds are whole, rounded down, as redis-cell gives them. A quantity
// of 0 takes nothing and is never limited: a probe.
func replyThrottle(c *conn, args [][]byte, ws []shardcounter.Write, res []shardcounter.WriteResult) {
	r := res[0]
	switch {
	case r.Error != nil && shardcounter.IsLimitsUnsupported(r.Error):
		c.w.Error(errThrottleStore)
		return
	case r.Error != nil:
		c.w.Error(errorReply(r.Error))
		return
	case r.Limit == nil:
		c.w.Error("ERR internal error: the service gave no decision for the take")
		return
	}
	t := ws[0].Take
	limited, retry := int64(0), int64(-1)
	if !r.Limit.Allowed && !t.Peek {
		limited = 1
		if r.Limit.RetryAfterMS >= 0 {
			retry = r.Limit.RetryAfterMS / 1000
		}
	}
	c.w.Array(5)
	c.w.Int(limited)
	c.w.Int(t.Policy.Burst)
	c.w.Int(r.Limit.Remaining)
	c.w.Int(retry)
	c.w.Int(r.Limit.ResetAfterMS / 1000)
}

func init() {
	register(&command{name: "cl.throttle", arity: -5, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1,
		noTxOn: throttleNoTx, write: writeThrottle, reply: replyThrottle, group: "shardcounter",
		summary: "redis-cell's GCRA take: key max_burst count period [quantity]; replies limited, limit, remaining, retry after and reset after (seconds). Quantity 0 probes. Decided durably in the group commit."})
}
