package shardcounter

import (
	"errors"
	"fmt"
	"strings"
)

// Error codes. Each maps to one HTTP status in package http and is the
// "code" field of the API's error body (see SPEC.md).
const (
	EINVALID         = "invalid_argument"  // 400: bad id, shard count, amount, JSON, filter, page token
	EOUTOFRANGE      = "out_of_range"      // 400: a value would leave the int64 range
	EUNAUTHENTICATED = "unauthenticated"   // 401: missing or wrong bearer token
	ENOTFOUND        = "not_found"         // 404: no such counter
	EEXISTS          = "already_exists"    // 409: create of something that exists
	ETOOLARGE        = "payload_too_large" // 413: body or batch over its limit
	EUNAVAILABLE     = "unavailable"       // 503: the store cannot be reached; the write was not applied
	EINTERNAL        = "internal"          // 500: a bug; never a store's failure
)

// EOUTCOMEUNKNOWN is the code of a write the store did not confirm before
// the write's deadline: it may or may not be applied. HTTP answers it 504
// and RESP "-UNKNOWN ...". It has a code of its own, apart from
// EUNAVAILABLE (which promises nothing was applied) and EINTERNAL (a bug),
// because its cure is specific: a retry with the same request id is safe
// and counts the write once.
const EOUTCOMEUNKNOWN = "outcome_unknown"

// EEXHAUSTED is the code of a request refused because its client used up
// an allowance: too many failed authentications from its address. HTTP
// answers it 429 with Retry-After; nothing was done.
const EEXHAUSTED = "resource_exhausted"

// EPERMISSION is the code of a request refused because its user may not
// run it, or may not touch one of its keys (package acl): HTTP answers it
// 403, RESP "-NOPERM ...". Nothing was done.
const EPERMISSION = "permission_denied"

// Error is the error type of the domain: a machine-readable Code and a
// message for people. Stores, the engine and the HTTP client all return
// *Error for every failure a caller may act on, so one mapping (ErrorCode)
// turns any failure into an API error code.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`

	// OutcomeUnknown is set on a write error when the write may have been
	// applied: the store was asked to commit and no answer came back. A
	// caller that must not double-count retries with the same request id.
	// Such an error has code EOUTCOMEUNKNOWN (or EINTERNAL for a reply
	// that reports a bug of the server), never EUNAVAILABLE, which
	// promises that nothing was applied.
	OutcomeUnknown bool `json:"-"`
}

// Error implements the error interface.
func (e *Error) Error() string {
	return fmt.Sprintf("shardcounter: %s: %s", e.Code, e.Message)
}

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, ErrNotFound) matches every not-found error whatever its
// message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Sentinel errors for library callers, to use with errors.Is. Each matches
// any *Error carrying its code.
var (
	// ErrInvalid is returned when an argument (id, shard count, amount,
	// request) cannot be used.
	ErrInvalid = &Error{Code: EINVALID, Message: "invalid argument"}
	// ErrOutOfRange is returned when a write would take a value outside the
	// int64 range. Values never wrap.
	ErrOutOfRange = &Error{Code: EOUTOFRANGE, Message: "value out of range"}
	// ErrNotFound is returned when a counter does not exist.
	ErrNotFound = &Error{Code: ENOTFOUND, Message: "not found"}
	// ErrExists is returned when creating a counter that already exists.
	ErrExists = &Error{Code: EEXISTS, Message: "already exists"}
	// ErrUnavailable is returned when the store cannot be reached. A write
	// that returns it was not applied.
	ErrUnavailable = &Error{Code: EUNAVAILABLE, Message: "store unavailable"}
	// ErrExhausted is returned when a client has used up an allowance
	// (failed authentications from its address): nothing was done; try
	// again after the delay the reply gives.
	ErrExhausted = &Error{Code: EEXHAUSTED, Message: "resource exhausted"}
	// ErrOutcomeUnknown matches a write error whose outcome is unknown:
	// the store did not confirm the commit before the write's deadline.
	// A retry with the same request id is safe.
	ErrOutcomeUnknown = &Error{Code: EOUTCOMEUNKNOWN, Message: "outcome unknown", OutcomeUnknown: true}
)

// crossSlotPrefix starts the message of CrossSlot's errors: the error
// code a Redis Cluster gives for keys that one command cannot reach
// together, which Redis clients recognize.
const crossSlotPrefix = "CROSSSLOT "

// CrossSlot returns the error of an increment of a transaction
// (Increment.Txn) that a store refused, with the rest of the transaction,
// because it cannot apply them in one atomic step: no Redis Cluster master
// holds a shard of each of its counters. Nothing of the transaction was
// applied. Its code is EINVALID: sent again unchanged it is refused again.
func CrossSlot(format string, args ...any) *Error {
	return &Error{Code: EINVALID, Message: crossSlotPrefix + fmt.Sprintf(format, args...)}
}

// IsCrossSlot reports whether err is an error made by CrossSlot.
func IsCrossSlot(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == EINVALID && strings.HasPrefix(e.Message, crossSlotPrefix)
}

// CounterNotFound returns the ErrNotFound of counter id, the one message
// every store and service gives for it.
func CounterNotFound(id string) error {
	return Errorf(ENOTFOUND, "counter %q not found", id)
}

// CollectionNotFound returns the ErrNotFound of collection name.
func CollectionNotFound(name string) error {
	return Errorf(ENOTFOUND, "collection %q not found", name)
}

// DocumentNotFound returns the ErrNotFound of document id in collection.
func DocumentNotFound(collection, id string) error {
	return Errorf(ENOTFOUND, "document %q not found in collection %q", id, collection)
}

// CounterHasNoMembers returns the ErrInvalid of a member read (IsMember,
// ListMembers) of counter id, which is a sum counter.
func CounterHasNoMembers(id string) error {
	return Errorf(EINVALID, "counter %q is a sum counter: it has no members; create a distinct counter to count members", id)
}

// CounterHasNoWindow returns the ErrInvalid of a windowed read (ReadWindow,
// ReadSeries) of counter id, which was created without a window.
func CounterHasNoWindow(id string) error {
	return Errorf(EINVALID, "counter %q has no window, so it keeps no sums over time: create a counter with a window (bucket and retention) to read spans of time", id)
}

// ErrorCode returns the code of the first *Error in err's chain, or
// EINTERNAL when there is none (an error nobody classified is a bug).
// It returns "" for a nil error.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the message of the first *Error in err's chain, or
// "internal error" when there is none, so internal details are not shown to
// API callers. It returns "" for a nil error.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// OutcomeUnknownf returns the error of a write that may have been applied:
// code EOUTCOMEUNKNOWN (never EUNAVAILABLE, which promises nothing was
// applied) with OutcomeUnknown set, and a message that ends by naming the
// cure.
func OutcomeUnknownf(format string, args ...any) *Error {
	return &Error{Code: EOUTCOMEUNKNOWN, OutcomeUnknown: true,
		Message: fmt.Sprintf(format, args...) + OutcomeUnknownCure}
}

// OutcomeUnknownCure ends the message of every outcome-unknown error, so
// that each one names the safe move.
const OutcomeUnknownCure = "; the write may or may not have been applied: a retry with the same request id is safe and counts it once"

// IsOutcomeUnknown reports whether err says that a write may have been
// applied despite the error: its code is EOUTCOMEUNKNOWN, or it is flagged
// so (a 500 reply to a write, a reply lost in transit).
func IsOutcomeUnknown(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.OutcomeUnknown || e.Code == EOUTCOMEUNKNOWN)
}
