package shardcounter_test

import (
	"math"
	"testing"

	"github.com/shardcounter/shardcounter"
)

// TestBoundApply checks the bounded increment's rule at its edges:
// inside, skipped outside, saturated to the nearer end, past int64, and a
// saturated move too large for an int64.
func TestBoundApply(t *testing.T) {
	b := func(lo, hi int64, sat bool) shardcounter.Bound {
		return shardcounter.Bound{Lower: lo, Upper: hi, Saturate: sat}
	}
	for _, c := range []struct {
		name       string
		b          shardcounter.Bound
		old, delta int64
		want       int64
		wantOK     bool
	}{
		{"inside", b(0, 10, false), 5, 5, 5, true},
		{"above: skipped", b(0, 10, false), 5, 6, 0, true},
		{"below: skipped", b(0, 10, false), 5, -6, 0, true},
		{"above: saturated", b(0, 10, true), 5, 6, 5, true},
		{"below: saturated", b(0, 10, true), 5, -6, -5, true},
		{"outside, landing inside", b(0, 10, false), 20, -15, -15, true},
		{"outside, saturated toward the range", b(0, 10, true), 20, 1, -10, true},
		{"past int64: skipped", shardcounter.Unbounded(), math.MaxInt64, 1, 0, true},
		{"past int64: saturated", b(math.MinInt64, math.MaxInt64, true), math.MaxInt64 - 1, 5, 1, true},
		{"too far for an int64", b(0, 0, true), math.MinInt64, 1, 0, false},
	} {
		got, ok := c.b.Apply(c.old, c.delta)
		if got != c.want || ok != c.wantOK {
			t.Errorf("%s: Apply(%d, %d) = %d, %v; want %d, %v", c.name, c.old, c.delta, got, ok, c.want, c.wantOK)
		}
	}
	if err := shardcounter.ValidateBound(b(2, 1, false)); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
		t.Errorf("an inverted bound: %v, want invalid_argument", err)
	}
}
