// Package overflow adds int64 values without wrapping: each function
// reports when the exact result cannot be represented, so that stores and
// the engine refuse such a write (ErrOutOfRange) instead of storing a
// wrapped value.
package overflow

import "math"

// Add returns a+b, and false when the sum leaves the int64 range.
// Stores use it so that values never wrap.
func Add(a, b int64) (int64, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, false
	}
	return s, true
}

// Sum adds values and reports false when the total, or any partial
// sum on the way, cannot be represented. Because partial sums can leave the
// range and come back, it adds with 128-bit headroom.
func Sum(values []int64) (int64, bool) {
	var hi, lo int64 // total = hi*2^63 + lo, with lo kept in [0, 2^63)
	for _, v := range values {
		if v >= 0 {
			lo += v
			if lo < 0 { // passed 2^63
				lo -= math.MaxInt64
				lo--
				hi++
			}
		} else {
			lo += v
			if lo < 0 {
				lo += math.MaxInt64
				lo++
				hi--
			}
		}
	}
	switch hi {
	case 0:
		return lo, true
	case -1:
		return lo + math.MinInt64, true
	}
	return 0, false
}
