package server

import (
	"github.com/shardcounter/shardcounter"
)

// Replies Redis gives word for word, so that clients that match them work.
const (
	errNoAuth      = "NOAUTH Authentication required."
	errWrongPass   = "WRONGPASS invalid username-password pair or user is disabled."
	errNotInteger  = "ERR value is not an integer or out of range"
	errOverflow    = "ERR increment or decrement would overflow"
	errDecOverflow = "ERR decrement would overflow"
	errWrongType   = "WRONGTYPE Operation against a key holding the wrong kind of value"
	errSyntax      = "ERR syntax error"
)

// errorReply turns a service error into an error reply that begins with
// the word Redis uses for the same condition:
//
//   - invalid_argument, not_found, payload_too_large: ERR and the message
//   - out_of_range: ERR value is out of range
//   - already_exists: EXISTS
//   - unavailable: TRYAGAIN (the store cannot be reached; nothing was
//     applied, so the command can be sent again as it is)
//   - resource_exhausted: "ERR resource exhausted: ..." (RESP itself
//     slows failed AUTH rather than refuse them, see conn.auth)
//   - outcome_unknown: "UNKNOWN ...": the write may or may not have been
//     applied; sending it again with the same request id is safe
//   - internal: "ERR internal error: ..." (a bug)
func errorReply(err error) string {
	msg := shardcounter.ErrorMessage(err)
	switch shardcounter.ErrorCode(err) {
	case shardcounter.EUNAVAILABLE:
		return "TRYAGAIN " + msg
	case shardcounter.EEXISTS:
		return "EXISTS " + msg
	case shardcounter.EOUTOFRANGE:
		return "ERR value is out of range: " + msg
	case shardcounter.EUNAUTHENTICATED:
		return errNoAuth
	case shardcounter.EEXHAUSTED:
		return "ERR resource exhausted: " + msg
	case shardcounter.EOUTCOMEUNKNOWN:
		return "UNKNOWN " + msg
	case shardcounter.EINTERNAL:
		if shardcounter.IsOutcomeUnknown(err) {
			return "UNKNOWN " + msg
		}
		return "ERR internal error: " + msg
	}
	return "ERR " + msg
}

// writeErrorReply is errorReply for a write the service refused on its
// own (not the whole batch). A write that passed validation is invalid
// only for the counter's kind: a delta on a distinct counter or a member
// on a sum counter, which Redis calls WRONGTYPE. Out of range is the
// int64 overflow Redis reports for INCR, unless the counter has bounds.
func (c *conn) writeErrorReply(w shardcounter.Write, err error) string {
	switch shardcounter.ErrorCode(err) {
	case shardcounter.EINVALID:
		return errWrongType + ": " + shardcounter.ErrorMessage(err)
	case shardcounter.EOUTOFRANGE:
		// Bounds are the rarer cause, and an error is a rare path: one
		// more call to tell them apart.
		ctx, cancel := c.ctx()
		defer cancel()
		if ctr, gerr := c.s.svc.GetCounter(ctx, w.Counter); gerr == nil && ctr.Bounded() {
			return "ERR value would leave the counter's bounds: " + shardcounter.ErrorMessage(err)
		}
		return errOverflow
	}
	return errorReply(err)
}
