package shardcounter

import (
	"errors"
	"math"
	"strings"
)

// Bound, on a delta write (Write.Bound, Increment.Bound), makes the delta
// conditional on the counter's total, as Redis's INCREX: the write keeps
// the total within [Lower, Upper] (inclusive; math.MinInt64 and
// math.MaxInt64 for no bound). Without Saturate a delta that would take
// the total outside is skipped: nothing changes and 0 is applied. With
// Saturate the total becomes old+delta clamped to the range (a total
// already outside moves to the nearer end), and what is applied is that
// minus the old total. The rule judges the counter's exact total, so a
// sharded counter is read whole (package decide); a write's applied
// amount is Outcome.Applied, WriteResult.Applied's companion AppliedDelta.
type Bound struct {
	Lower, Upper int64
	Saturate     bool
}

// Unbounded is a Bound with neither end: a Bound to fill in.
func Unbounded() Bound { return Bound{Lower: math.MinInt64, Upper: math.MaxInt64} }

// Apply returns what a delta under b applies on a total of old, and
// whether that is a representable int64 (a saturated move from far
// outside the range may not be).
func (b Bound) Apply(old, delta int64) (int64, bool) {
	next := old + delta
	overflowed := (delta > 0 && next < old) || (delta < 0 && next > old)
	if !b.Saturate {
		if overflowed || next < b.Lower || next > b.Upper {
			return 0, true
		}
		return delta, true
	}
	if overflowed {
		if delta > 0 {
			next = math.MaxInt64
		} else {
			next = math.MinInt64
		}
	}
	next = min(max(next, b.Lower), b.Upper)
	applied := next - old
	if (next > old && applied < 0) || (next < old && applied > 0) {
		return 0, false
	}
	return applied, true
}

// Skips reports whether a delta under b on a total of old is skipped:
// without Saturate, when the result would leave the range or int64. A
// skipped delta applies 0; so may one that is not (a delta of 0 within
// the range, a saturated one already at the end it moves toward).
func (b Bound) Skips(old, delta int64) bool {
	next := old + delta
	overflowed := (delta > 0 && next < old) || (delta < 0 && next > old)
	return !b.Saturate && (overflowed || next < b.Lower || next > b.Upper)
}

// ValidateBound checks a bound: Lower at most Upper.
func ValidateBound(b Bound) error {
	if b.Lower > b.Upper {
		return Errorf(EINVALID, "lower bound %d is above upper bound %d: give lower ≤ upper", b.Lower, b.Upper)
	}
	return nil
}

// ValidateBoundIncrement checks an increment with Bound as a store that
// decides bounds (package decide) receives it: a sum counter's delta,
// which may be 0 (it then reads the total and applies nothing), and a
// valid bound.
func ValidateBoundIncrement(inc Increment) error {
	if inc.Member != "" || inc.Sketch != nil || inc.Take != nil {
		return Errorf(EINVALID, "a bounded increment is a delta: it has no member, sketch or take")
	}
	if err := ValidateBound(*inc.Bound); err != nil {
		return err
	}
	if inc.Delta == 0 {
		inc.Delta = 1 // a bounded delta of 0 reads the total
	}
	inc.Bound = nil
	return ValidateIncrement(inc)
}

// boundsUnsupported starts the message of ErrBoundsUnsupported's errors.
const boundsUnsupported = "this store does not decide bounded increments"

// ErrBoundsUnsupported is the error of a bounded increment (Increment.Bound)
// on a store that does not decide it through package decide:
// ValidateIncrement, which every store calls, refuses it (Redis Cluster's
// scripts, and items conditional on another on one Redis server).
// IsBoundsUnsupported recognizes it.
func ErrBoundsUnsupported(counter string) error {
	return Errorf(EINVALID, "%s (counter %q): INCREX's bounds are kept on Pebble, bolt, PostgreSQL, Firestore, Datastore and Redis, on a Redis Cluster on counters whose shards share one slot", boundsUnsupported, counter)
}

// ErrBoundsUnsupportedOn is ErrBoundsUnsupported's error on a store that
// decides bounded increments on some counters only (a Redis Cluster):
// why says on which, and what to do. IsBoundsUnsupported recognizes it.
func ErrBoundsUnsupportedOn(counter, why string) error {
	return Errorf(EINVALID, "%s on counter %q: %s", boundsUnsupported, counter, why)
}

// IsBoundsUnsupported reports whether err is ErrBoundsUnsupported's.
func IsBoundsUnsupported(err error) bool {
	var e *Error
	return errors.As(err, &e) && strings.HasPrefix(e.Message, boundsUnsupported)
}
