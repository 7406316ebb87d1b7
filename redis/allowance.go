package redis

import (
	"math"
	"math/big"
	"strconv"
)

// Allowances keep a counter's total inside the int64 range although no
// script sees all of its shards (on a cluster they live on different
// masters). It is the escrow method: each shard holds, beside its value v,
// how far v may still move up (field up) and down (field dn) without
// asking. The rooms are handed out so that, whatever each shard does within
// its own, the total stays in range:
//
//	Σ (v + up) ≤ MaxInt64   and   Σ (v − dn − 1) ≥ MinInt64
//
// (dn is stored one less than the room down, so that a room of 2^63 fits
// in an int64). A write moves v and spends room in the same script, so the
// sums above never change under writes. A write that finds too little room
// on its shard changes nothing and asks for more: a rebalance, a reshard to
// the same shard count (see finishReshard), freezes the shards, reads the
// exact total, refuses the write when the total would leave the range, and
// otherwise hands the free room out again, first what the write needs to
// its shard. With the room split evenly a shard of a counter near 0 may
// move by 2^63/n, so real counters never rebalance; the mechanism exists
// so that the rule holds at the edges too, as bolt's single transaction
// keeps it.

// room is the allowance of one shard, as its up and dn fields hold it.
type room struct{ up, dn int64 }

// need is the write that asked for a rebalance: it wants delta on shard.
type need struct {
	shard int
	delta int64
}

var (
	bigMax = big.NewInt(math.MaxInt64)
	bigMin = big.NewInt(math.MinInt64)
)

// allowances divides the room between the total of vals and the int64
// range among the shards: what w needs to its shard first (when it fits),
// the rest evenly. It is a pure function of its arguments, so every client
// that finishes one rebalance hands out the same rooms.
func allowances(vals []int64, w *need) []room {
	n := len(vals)
	total := new(big.Int)
	for _, v := range vals {
		total.Add(total, big.NewInt(v))
	}
	up := new(big.Int).Sub(bigMax, total) // free room up, ≥ 0 while the total is in range
	dn := new(big.Int).Sub(total, bigMin) // free room down
	ups, dns := make([]*big.Int, n), make([]*big.Int, n)
	for i := range n {
		ups[i], dns[i] = new(big.Int), new(big.Int)
	}
	if w != nil && w.shard >= 0 && w.shard < n {
		d := big.NewInt(w.delta)
		if w.delta > 0 && d.Cmp(up) <= 0 {
			ups[w.shard].Set(d)
			up.Sub(up, d)
		} else if w.delta < 0 && new(big.Int).Neg(d).Cmp(dn) <= 0 {
			dns[w.shard].Neg(d)
			dn.Add(dn, d)
		}
	}
	share(ups, up)
	share(dns, dn)
	out := make([]room, n)
	for i, v := range vals {
		// A shard's value must stay an int64 too: v + up ≤ MaxInt64 and
		// v − room down ≥ MinInt64. Both rooms must fit in an int64;
		// cutting a room only makes it safer.
		u := minBig(ups[i], new(big.Int).Sub(bigMax, big.NewInt(v)))
		r := minBig(dns[i], new(big.Int).Sub(big.NewInt(v), bigMin))
		out[i] = room{up: clamp(u), dn: clamp(r.Sub(r, big.NewInt(1)))}
	}
	return out
}

// share adds pool to parts, evenly, the remainder to the first ones.
func share(parts []*big.Int, pool *big.Int) {
	if pool.Sign() <= 0 {
		return
	}
	q, r := new(big.Int).QuoRem(pool, big.NewInt(int64(len(parts))), new(big.Int))
	rest := r.Int64()
	for i, p := range parts {
		p.Add(p, q)
		if int64(i) < rest {
			p.Add(p, big.NewInt(1))
		}
	}
}

func minBig(a, b *big.Int) *big.Int {
	if a.Cmp(b) <= 0 {
		return new(big.Int).Set(a)
	}
	return new(big.Int).Set(b)
}

// clamp returns x within [-1, MaxInt64]: a room is never negative (dn's −1
// is no room), and a room past the int64 range is cut to it.
func clamp(x *big.Int) int64 {
	if x.Cmp(bigMax) > 0 {
		return math.MaxInt64
	}
	if x.Sign() < 0 {
		return -1
	}
	return x.Int64()
}

// levelShares splits the total of vals into len(vals) shares that differ
// by at most one and sum to it exactly: floor(total/n) each, one more for
// the first total mod n. Each is an int64 when the total is, and has room
// for any write the total has room for: a share lies between 0 and the
// total, so total + d in range puts share + d in range too.
func levelShares(vals []int64) []int64 {
	total := new(big.Int)
	for _, v := range vals {
		total.Add(total, big.NewInt(v))
	}
	n := big.NewInt(int64(len(vals)))
	q, r := new(big.Int).DivMod(total, n, new(big.Int)) // r in [0, n)
	out := make([]int64, len(vals))
	for i := range out {
		out[i] = q.Int64()
		if int64(i) < r.Int64() {
			out[i]++
		}
	}
	return out
}

// negate returns −d as the scripts take it: for MinInt64, whose negation
// is not an int64, MaxInt64, one short, which only gives back a little
// less room than was taken.
func negate(d int64) string {
	if d == math.MinInt64 {
		return strconv.FormatInt(math.MaxInt64, 10)
	}
	return strconv.FormatInt(-d, 10)
}
