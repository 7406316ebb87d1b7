package redis

import (
	"math"
	"math/big"
	"testing"
)

// FuzzAllowances checks the invariant the scripts rely on: whatever each
// shard does within its room, neither it nor the total leaves the int64
// range; and a write that fits gets its room.
func FuzzAllowances(f *testing.F) {
	f.Add(int64(0), int64(0), int64(0), 0, int64(5))
	f.Add(int64(math.MaxInt64), int64(-10), int64(5), 1, int64(math.MinInt64))
	f.Add(int64(math.MinInt64), int64(0), int64(0), 0, int64(-1))
	f.Add(int64(math.MaxInt64), int64(math.MinInt64), int64(0), 2, int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, a, b, c int64, k int, d int64) {
		vals := []int64{a, b, c}
		sum := new(big.Int)
		for _, v := range vals {
			sum.Add(sum, big.NewInt(v))
		}
		if sum.Cmp(bigMax) > 0 || sum.Cmp(bigMin) < 0 {
			return // not a state a counter can be in
		}
		var w *need
		if d != 0 {
			w = &need{shard: k, delta: d}
		}
		rooms := allowances(vals, w)
		hi, lo := new(big.Int), new(big.Int)
		for i, r := range rooms {
			if r.up < 0 || r.dn < -1 {
				t.Fatalf("shard %d: negative room %+v", i, r)
			}
			h := new(big.Int).Add(big.NewInt(vals[i]), big.NewInt(r.up))
			l := new(big.Int).Sub(big.NewInt(vals[i]), big.NewInt(r.dn))
			l.Sub(l, big.NewInt(1))
			if h.Cmp(bigMax) > 0 || l.Cmp(bigMin) < 0 {
				t.Fatalf("shard %d = %d may leave int64 with room %+v", i, vals[i], r)
			}
			hi.Add(hi, h)
			lo.Add(lo, l)
		}
		if hi.Cmp(bigMax) > 0 || lo.Cmp(bigMin) < 0 {
			t.Fatalf("rooms %+v of %v let the total reach [%v, %v]", rooms, vals, lo, hi)
		}
		inRange := func(x *big.Int) bool { return x.Cmp(bigMax) <= 0 && x.Cmp(bigMin) >= 0 }
		if w != nil && k >= 0 && k < len(vals) && inRange(new(big.Int).Add(sum, big.NewInt(d))) && inRange(new(big.Int).Add(big.NewInt(vals[k]), big.NewInt(d))) {
			if r := rooms[k]; d > 0 && r.up < d || d < 0 && new(big.Int).Add(big.NewInt(r.dn), big.NewInt(1)).Cmp(new(big.Int).Neg(big.NewInt(d))) < 0 {
				t.Fatalf("a write of %d to shard %d of %v fits, but its room is %+v", d, k, vals, r)
			}
		}
	})
}
