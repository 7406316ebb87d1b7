package decide

import (
	"fmt"
	"strings"

	"github.com/shardcounter/shardcounter"
)

// The reasons an item is refused, beyond validation, its counter
// (shardcounter.CounterNotFound) and its kind (CheckKind). A store that
// decides elsewhere (Redis's scripts) builds its outcomes with these, so
// every store words a refusal alike. They are not inlined: a refusal is
// the cold path, and the frames of the hot one stay small (see valid).

// ErrInt64 is the out_of_range error of a delta that would take its
// counter's total outside int64.
//
//go:noinline
func ErrInt64(counter string, delta int64) error {
	return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it outside the int64 range", counter, delta)
}

// ErrSumOverflows is the out_of_range error of a write to a counter whose
// shards already sum outside int64.
//
//go:noinline
func ErrSumOverflows(counter string) error {
	return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: the sum of its shards is outside the int64 range", counter)
}

// ErrBucketInt64 is the out_of_range error of a delta that would take its
// window bucket outside int64.
//
//go:noinline
func ErrBucketInt64(counter string, delta int64) error {
	return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take its window bucket outside the int64 range", counter, delta)
}

// CheckBounds returns the out_of_range error of a delta that would take
// a bounded counter's total to total, outside its Min and Max; nil when
// total is within them.
func CheckBounds(counter string, spec shardcounter.Spec, delta, total int64) error {
	if spec.Min != nil && total < *spec.Min {
		return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it to %d, below its min %d", counter, delta, total, *spec.Min)
	}
	if spec.Max != nil && total > *spec.Max {
		return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it to %d, above its max %d", counter, delta, total, *spec.Max)
	}
	return nil
}

// ErrSketch is the internal error of the items of a shard whose stored
// sketch does not decode (nothing this module writes).
func ErrSketch(counter string, shard int, err error) error {
	return shardcounter.Errorf(shardcounter.EINTERNAL, "counter %q shard %d: %v", counter, shard, err)
}

// NeedWhole is Decide's error when a view that does not know a counter's
// total (SumInZone, SumUnknown) cannot decide a write without it: the
// store reads the counters named whole (every shard, Sum SumExact) and
// decides the batch again. Nothing of the decision is to be written.
type NeedWhole struct {
	Counters []string // in the order the batch met them
}

func (e *NeedWhole) Error() string {
	return fmt.Sprintf("decide: counters %s must be read whole", strings.Join(e.Counters, ", "))
}

// ErrNotLimitState is the error of a take on a counter that is not a
// key's state under policy p: its spec is not the state's.
func ErrNotLimitState(counter string, p shardcounter.LimitPolicy) error {
	return shardcounter.Errorf(shardcounter.EINVALID, "counter %q is not the state of a key of a %s limit", counter, p)
}

// ErrStateUnknown is the error of a take on a view that does not give the
// shard values of its key's state: a store that keeps limits answers
// them (View.Shard).
func ErrStateUnknown(counter string) error {
	return shardcounter.Errorf(shardcounter.EINTERNAL, "the store did not read the state of limit key %q", counter)
}
