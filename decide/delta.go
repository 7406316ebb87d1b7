package decide

// The rules of an item that changes a shard: floors, ceilings and int64 on
// the counter's total, a bound's skip or saturate, and a full shard's
// delta sent to a shard with room. Apart from decide.go so that each file
// holds one concern.

import (
	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
)

// delta decides an item that changes a shard: a sum counter's delta on
// shard k (or on another shard with room), or a distinct counter's member
// added or removed on its shard k. Floors, ceilings and int64 are judged
// on the counter's total; a partial view decides what keeps its shard in
// the zone and asks for the rest to be read whole.
func (d *decider) delta(st *state, spec *shardcounter.Spec, inc *shardcounter.Increment, k int, rq *RequestWrite, i int) error {
	o := &d.out[i]
	v, known, err := d.shard(st, k)
	if err != nil {
		return err
	}
	dv := inc.Delta
	if inc.Bound != nil {
		// A bound is judged on the exact total: a partial view reads the
		// counter whole first.
		switch st.sum {
		case SumExact:
			var ok bool
			if dv, ok = inc.Bound.Apply(st.total, inc.Delta); !ok {
				o.Err = ErrInt64(inc.Counter, inc.Delta)
				return nil
			}
			o.Applied = &dv
			if dv == 0 {
				o.Skipped = inc.Bound.Skips(st.total, inc.Delta)
				if o.Skipped && !st.exists {
					// A skipped item on a missing counter does nothing:
					// its Create takes no effect, and it records no
					// request id (Redis 8.8's INCREX leaves the key
					// missing). Its total is a missing counter's, 0.
					return nil
				}
				d.apply(st, inc, rq, i)
				return nil
			}
		case SumInZone, SumUnknown:
			d.needWhole(st)
			return nil
		default:
			o.Err = ErrSumOverflows(inc.Counter)
			return nil
		}
	}
	nv, fits := overflow.Add(v, dv)
	total := st.total
	switch st.sum {
	case SumExact:
		var ok bool
		if total, ok = overflow.Add(st.total, dv); !ok {
			o.Err = ErrInt64(inc.Counter, dv)
			return nil
		}
		if spec.Bounded() {
			if o.Err = CheckBounds(inc.Counter, *spec, dv, total); o.Err != nil {
				o.Applied = nil
				return nil
			}
		}
		if known && !fits {
			// The shard picked is full, and then another has room (see
			// roomFor); a member's shard is its own.
			if inc.Member == "" {
				if k, nv, err = d.roomFor(st, spec.Shards, k, dv); err != nil {
					return err
				}
			}
			if inc.Member != "" || k < 0 {
				o.Err, o.Applied = ErrInt64(inc.Counter, dv), nil
				return nil
			}
		}
	case SumInZone:
		if !spec.Bounded() && known && fits && InZone(nv, spec.Shards) {
			break
		}
		d.needWhole(st)
		return nil
	case SumUnknown:
		d.needWhole(st)
		return nil
	default:
		o.Err = ErrSumOverflows(inc.Counter)
		return nil
	}
	var bv int64
	var bknown bool
	if w := spec.Window; w != nil {
		if bv, bknown, err = d.bucket(st, w); err != nil {
			return err
		}
		if _, ok := overflow.Add(bv, dv); bknown && !ok {
			o.Err, o.Applied = ErrBucketInt64(inc.Counter, dv), nil
			return nil
		}
	}

	d.apply(st, inc, rq, i)
	st.total = total
	d.writeShard(st, k, dv, nv, known)
	if inc.Member != "" {
		d.setMember(st, inc.Member, k, dv > 0)
	}
	if w := spec.Window; w != nil {
		d.addBucket(st, w, dv, bv, bknown)
	}
	return nil
}

// roomFor returns the first shard after shard k (of n) whose known value
// can take delta, with its value then; -1 when none can. When the total
// plus delta is an int64, one can: if every shard v_i had v_i + delta
// past MaxInt64 (delta > 0), the total would exceed n·(MaxInt64 − delta)
// ≥ MaxInt64 − delta, and so the total plus delta would too; the same
// holds below. A shard's value is where its writes happened to land, and
// only the sum is the counter's value, so any shard will do; a request id
// is kept by counter, whatever shard its delta lands on.
func (d *decider) roomFor(st *state, n, k int, delta int64) (int, int64, error) {
	for i := 1; i < n; i++ {
		j := (k + i) % n
		v, known, err := d.shard(st, j)
		if err != nil {
			return -1, 0, err
		}
		if nv, ok := overflow.Add(v, delta); known && ok {
			return j, nv, nil
		}
	}
	return -1, 0, nil
}
