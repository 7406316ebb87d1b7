package shardcounter

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"
)

// Expiry.
//
// A name (a counter's id, or a hash's name with all its fields) may have a
// deadline, as a Redis key may: past it, the name reads as absent on every
// store, a write to it starts a new counter, and its storage is reclaimed
// by later writes. Package expiry keeps deadlines over any CounterStore in
// records of the store's own (a counter per deadline, another per entry of
// a deadline index), whose ids are internal ids: InternalPrefix followed
// by a tag and a name. Stores hold them as they hold any counter
// (ValidateID accepts them); the engine never lets a caller read or write
// one, and listings skip them.

// InternalPrefix starts the id of every record the project keeps in a
// store for itself: U+001E, the record separator. No name contains it
// (ValidateName refuses control characters), so no user's counter id
// starts with it, and such ids sort before every name.
const InternalPrefix = "\x1e"

// IsInternalID reports whether id is the id of an internal record.
func IsInternalID(id string) bool { return strings.HasPrefix(id, InternalPrefix) }

// validateInternalID checks an internal id: the prefix, a lowercase ASCII
// tag, and up to MaxIDLen+32 bytes of UTF-8 without control characters.
func validateInternalID(kind, id string) error {
	rest := id[len(InternalPrefix):]
	switch {
	case rest == "" || rest[0] < 'a' || rest[0] > 'z':
		return Errorf(EINVALID, "%s starts with U+001E, reserved for internal records: remove it", kind)
	case len(rest) > MaxIDLen+32 || !utf8.ValidString(rest):
		return Errorf(EINVALID, "%s is not an internal record's id: remove U+001E", kind)
	}
	for _, r := range rest {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return Errorf(EINVALID, "%s contains control character %U: remove it", kind, r)
		}
	}
	return nil
}

// Expirer is implemented by a CounterService that keeps deadlines: the
// engine (over any store) and the HTTP client. Names are counter ids or
// hashes' names; a hash's deadline is the whole hash's. A name's deadline
// goes when the name is deleted or reset by SET.
type Expirer interface {
	// ExpireCounter gives name the deadline at, replacing any it had. A
	// deadline not after now deletes the name at once, as Redis's EXPIRE
	// with a negative time does. It returns false, changing nothing,
	// when name holds nothing.
	ExpireCounter(ctx context.Context, name string, at time.Time) (bool, error)
	// PersistCounter removes name's deadline; false when it had none or
	// name holds nothing.
	PersistCounter(ctx context.Context, name string) (bool, error)
	// CounterTTL says whether name holds something and when it expires.
	CounterTTL(ctx context.Context, name string) (*TTL, error)
}

// TTL is a name's state with respect to expiry, as Redis's TTL reports
// it: Exists false for a name that holds nothing (TTL -2), ExpiresAt nil
// for one without a deadline (TTL -1).
type TTL struct {
	Name      string     `json:"name"`
	Exists    bool       `json:"exists"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// RemainingMS is the time left before ExpiresAt in milliseconds, -1
	// without a deadline and -2 when the name holds nothing: Redis's PTTL.
	RemainingMS int64 `json:"remaining_ms"`
}

// NewTTL returns the TTL of name as seen at now: exists, and the deadline
// in Unix milliseconds (0 for none).
func NewTTL(name string, exists bool, deadlineMS int64, now time.Time) *TTL {
	t := &TTL{Name: name, Exists: exists, RemainingMS: -2}
	switch {
	case !exists:
	case deadlineMS == 0:
		t.RemainingMS = -1
	default:
		at := time.UnixMilli(deadlineMS).UTC()
		t.ExpiresAt = &at
		t.RemainingMS = max(0, deadlineMS-now.UnixMilli())
	}
	return t
}

// NameOf returns the name whose deadline governs the counter id: the
// hash's name for a hash's field or marker, the id itself otherwise.
func NameOf(id string) string {
	if hash, _, ok := SplitHashID(id); ok {
		return hash
	}
	return id
}

// MaxTTL bounds a time to live: 100 years, far past any use and far from
// int64 milliseconds' end.
const MaxTTL = 100 * 365 * 24 * time.Hour

// ValidateTTL checks a time to live given at creation or to EXPIRE.
func ValidateTTL(d time.Duration) error {
	if d <= 0 || d > MaxTTL {
		return Errorf(EINVALID, "ttl %s is out of range: give a positive time up to 100 years, such as 30s or 1d", Duration(d))
	}
	return nil
}

// ExpireChange is a change of a name's deadline carried by a Write
// (Write.Expire), so that it joins the group commit of the writes around
// it: Redis's EXPIRE and PERSIST inside and outside MULTI.
type ExpireChange struct {
	// At is the new deadline in Unix milliseconds; 0 removes the deadline
	// (PERSIST). A deadline not after the commit's time deletes the name
	// once the commit is made, as Redis's EXPIRE with a time in the past
	// does.
	At int64
	// Cond is Redis's condition: "" (always), "nx" (no deadline yet),
	// "xx" (a deadline already), "gt" (later than the current one; no
	// deadline counts as infinite) or "lt" (earlier than it).
	Cond string
	// AfterBound makes the change conditional on the write just before
	// it, a bounded write (Write.Bound) of the same name joined to it
	// (Write.JoinNext): the change is made only if that write was not
	// skipped, decided in their one commit. INCREX's deadline options,
	// which leave the deadline as it was when the increment is skipped.
	AfterBound bool
}

// validateExpireWrite checks a write that changes a deadline.
func validateExpireWrite(w Write) error {
	if err := ValidateName("name", w.Counter); err != nil {
		return err
	}
	x := w.Expire
	switch {
	case w.Delta != 0 || w.Member != "" || w.Present != nil || w.RequestID != "":
		return Errorf(EINVALID, "a deadline change takes no delta, member or request id")
	case x.At < 0:
		return Errorf(EINVALID, "deadline %d is before 1970: give Unix milliseconds, or 0 to remove it", x.At)
	case x.At == 0 && x.Cond != "" && x.Cond != "xx":
		return Errorf(EINVALID, "removing a deadline takes no condition but xx")
	}
	switch x.Cond {
	case "", "nx", "xx", "gt", "lt":
		return nil
	}
	return Errorf(EINVALID, "deadline condition %q: give nx, xx, gt, lt or none", x.Cond)
}

// ExpireConditionMet applies a deadline change's condition as Redis
// does to a name whose deadline is cur (Unix ms, 0 for none): no deadline
// is an infinite one, so GT never replaces it and LT always does.
func ExpireConditionMet(cond string, cur, at int64) bool {
	switch cond {
	case "nx":
		return cur == 0
	case "xx":
		return cur != 0
	case "gt":
		return cur != 0 && at > cur
	case "lt":
		return cur == 0 || at < cur
	}
	return true
}
