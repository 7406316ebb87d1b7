package overflow_test

import (
	"math"
	"math/big"
	"testing"

	"github.com/shardcounter/shardcounter/internal/overflow"
)

func bigSum(vs []int64) *big.Int {
	s := new(big.Int)
	for _, v := range vs {
		s.Add(s, big.NewInt(v))
	}
	return s
}

func checkSum(t *testing.T, vs []int64) {
	got, ok := overflow.Sum(vs)
	want := bigSum(vs)
	if fits := want.IsInt64(); ok != fits || (ok && got != want.Int64()) {
		t.Fatalf("Sum(%v) = %d, %v; want %s (fits int64: %v)", vs, got, ok, want, fits)
	}
}

func TestSum(t *testing.T) {
	const max, min = math.MaxInt64, math.MinInt64
	for _, vs := range [][]int64{
		nil, {1, 2, 3}, {max, 1, -2}, {max, max, -max, -max}, {min, -1, 1}, {min, min, max, max, 2},
		{max, 1}, {min, -1}, {max, max, max, min, min, min}, {min}, {max, max, max, max, max, max, max},
	} {
		checkSum(t, vs)
	}
}

func FuzzSum(f *testing.F) {
	f.Add(int64(math.MaxInt64), int64(1), int64(-5), int64(0))
	f.Add(int64(math.MinInt64), int64(-1), int64(math.MaxInt64), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, a, b, c, d int64) {
		checkSum(t, []int64{a, b, c, d})
		s, ok := overflow.Add(a, b)
		want := new(big.Int).Add(big.NewInt(a), big.NewInt(b))
		if ok != want.IsInt64() || (ok && s != want.Int64()) {
			t.Fatalf("Add(%d, %d) = %d, %v; want %s", a, b, s, ok, want)
		}
	})
}
