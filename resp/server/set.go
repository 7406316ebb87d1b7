package server

import (
	"context"
	"errors"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/resp"
)

// SET, GETSET and GETDEL: a counter's reset, over the service's
// shardcounter.Resetter, one step with respect to the server's writes of
// the counter (package expiry). The value is an integer: this server
// holds counters. SET replaces what the key held, a hash or a distinct
// counter too, as Redis's SET replaces any type; GETSET, GETDEL and SET
// … GET on a key of another type are WRONGTYPE.

const (
	errNotCounterValue = "ERR value is not an integer or out of range: this server holds counters, and SET sets one to an integer"
	noTxReset          = "it resets the counter outside the batch a transaction commits; send it before MULTI or after EXEC"
)

// setOptions are SET's options.
type setOptions struct {
	nx, xx, get, keepTTL bool
	at                   *time.Time
}

// parseSet reads SET's options, or returns the error reply.
func parseSet(opts [][]byte, now time.Time) (setOptions, string) {
	var o setOptions
	expiry := false
	for i := 0; i < len(opts); i++ {
		switch opt := lower(opts[i]); opt {
		case "nx", "xx":
			if o.nx || o.xx {
				return o, errSyntax
			}
			o.nx, o.xx = opt == "nx", opt == "xx"
		case "get":
			o.get = true
		case "keepttl":
			if expiry {
				return o, errSyntax
			}
			expiry, o.keepTTL = true, true
		case "ex", "px", "exat", "pxat":
			if expiry || i+1 == len(opts) {
				return o, errSyntax
			}
			expiry = true
			i++
			n, ok := resp.ParseInt(opts[i])
			if !ok {
				return o, errNotInteger
			}
			at, ok := expireTime(now, n, opt == "px" || opt == "pxat", opt == "exat" || opt == "pxat")
			if !ok || n <= 0 {
				return o, "ERR invalid expire time in 'set' command"
			}
			o.at = &at
		default:
			return o, errSyntax
		}
	}
	return o, ""
}

// keyKind says what key holds, for SET: "" nothing, "sum", "distinct",
// "approx" or "hash".
func (c *conn) keyKind(ctx context.Context, id string) (string, error) {
	ctr, err := c.s.svc.GetCounter(ctx, id)
	switch {
	case err == nil && ctr.Kind != shardcounter.KindSum:
		return string(ctr.Kind), nil
	case err == nil:
		return "sum", nil
	case !errors.Is(err, shardcounter.ErrNotFound):
		return "", err
	}
	t, err := c.s.typeOf(ctx, id)
	if err == nil && t == typeHash {
		return "hash", nil
	}
	return "", err
}

func (c *conn) resetter() (shardcounter.Resetter, bool) {
	r, ok := c.s.svc.(shardcounter.Resetter)
	if !ok {
		c.w.Error("ERR this server's service cannot reset counters")
	}
	return r, ok
}

// cmdSet is SET key n [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL].
func cmdSet(c *conn, args [][]byte) {
	o, msg := parseSet(args[3:], time.Now())
	if msg != "" {
		c.w.Error(msg)
		return
	}
	setCommand(c, args, o)
}

// cmdGetSet is GETSET key n: SET key n GET.
func cmdGetSet(c *conn, args [][]byte) { setCommand(c, args, setOptions{get: true}) }

// setCommand sets key to the integer args[2] as o says.
func setCommand(c *conn, args [][]byte, o setOptions) {
	id, msg := counterID(args[1])
	if msg != "" {
		c.w.Error(msg)
		return
	}
	v, ok := resp.ParseInt(args[2])
	if !ok {
		c.w.Error(errNotCounterValue)
		return
	}
	r, ok := c.resetter()
	if !ok {
		return
	}
	ctx, cancel := c.ctx()
	defer cancel()
	kind, err := c.keyKind(ctx, id)
	switch {
	case err != nil:
		c.w.Error(errorReply(err))
		return
	case o.get && kind != "" && kind != "sum":
		c.w.Error(errWrongType)
		return
	case (o.nx && kind != "") || (o.xx && kind == ""):
		c.replyUnset(ctx, id, o.get, kind)
		return
	}
	switch kind {
	case "distinct", "approx":
		err = c.s.svc.DeleteCounter(ctx, id)
	case "hash":
		_, err = c.s.deleteHash(ctx, id)
	}
	var res *shardcounter.ResetResult
	if err == nil {
		res, err = r.ResetCounter(ctx, id, shardcounter.Reset{Value: v, ExpiresAt: o.at, KeepTTL: o.keepTTL})
	}
	c.s.types.forget(id)
	switch {
	case err != nil:
		c.w.Error(errorReply(err))
	case !o.get:
		c.w.Simple("OK")
	case res.Existed:
		c.w.BulkInt(res.Old)
	default:
		c.w.Null()
	}
}

// replyUnset replies to a SET whose NX or XX kept it from setting: nil,
// or with GET the value the key holds.
func (c *conn) replyUnset(ctx context.Context, id string, get bool, kind string) {
	if !get || kind == "" {
		c.w.Null()
		return
	}
	rd, err := c.s.svc.ReadCounter(ctx, id, shardcounter.Strong)
	switch {
	case errors.Is(err, shardcounter.ErrNotFound):
		c.w.Null()
	case err != nil:
		c.w.Error(errorReply(err))
	default:
		c.w.BulkInt(rd.Value)
	}
}

// cmdGetDel is GETDEL key: the counter's value, and the counter deleted
// in the same step.
func cmdGetDel(c *conn, args [][]byte) {
	id, msg := counterID(args[1])
	if msg != "" {
		c.w.Error(msg)
		return
	}
	r, ok := c.resetter()
	if !ok {
		return
	}
	ctx, cancel := c.ctx()
	defer cancel()
	kind, err := c.keyKind(ctx, id)
	switch {
	case err != nil:
		c.w.Error(errorReply(err))
		return
	case kind == "":
		c.w.Null()
		return
	case kind != "sum":
		c.w.Error(errWrongType)
		return
	}
	res, err := r.ResetCounter(ctx, id, shardcounter.Reset{Delete: true})
	c.s.types.forget(id)
	switch {
	case err != nil:
		c.w.Error(errorReply(err))
	case res.Existed:
		c.w.BulkInt(res.Old)
	default:
		c.w.Null()
	}
}
