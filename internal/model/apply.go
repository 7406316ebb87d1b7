package model

import (
	"bytes"
	"encoding/binary"
	"math/big"
	"slices"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/shard"
	"github.com/shardcounter/shardcounter/sketch"
)

// item applies one increment in the contract's order, or says in o why
// it did not: the item itself, its counter (or the one it creates), its
// kind, its request id, then what it does to a counter of that kind.
func (b *batch) item(inc shardcounter.Increment, i int, o *shardcounter.Outcome) {
	if inc.Take != nil && inc.Take.Remove {
		b.remove(inc, o)
		return
	}
	if inc.Take != nil {
		b.take(inc, o)
		return
	}
	if inc.Bound != nil {
		if o.Err = checkBound(inc); o.Err != nil {
			return
		}
	} else if o.Err = check(inc); o.Err != nil {
		return
	}
	c, fresh := b.counter(inc, o)
	if c == nil {
		return
	}
	if o.Err = fits(inc, kind(c)); o.Err != nil {
		return
	}
	now := b.now.UnixNano()
	if at, seen := c.requests[inc.RequestID]; inc.RequestID != "" && seen && now-at < int64(b.s.dedupe) {
		o.Duplicate = true
		return
	}
	switch kind(c) {
	case shardcounter.KindDistinct:
		adding := inc.Delta > 0
		if c.members[inc.Member] == adding {
			o.Unchanged = true
			break
		}
		if adding {
			c.members[inc.Member] = true
		} else {
			delete(c.members, inc.Member)
		}
		c.shards[shard.Of(shard.ForMember(inc.Member), c.c.Shards)] += inc.Delta
	case shardcounter.KindApprox:
		pick := inc.Pick
		if inc.Member != "" {
			pick = shard.ForMember(inc.Member)
		}
		k := sketchKey{c, shard.Of(pick, c.c.Shards)}
		p := b.sketches[k]
		if p == nil {
			p = new(pending)
			b.sketches[k] = p
		}
		if inc.Member != "" {
			p.members = append(p.members, inc.Member)
		} else {
			p.merges = append(p.merges, inc.Sketch)
		}
		p.items = append(p.items, i)
	default:
		if inc.Bound != nil {
			applied, skipped, err := bounded(c.total, inc)
			if o.Err = err; err != nil {
				return
			}
			inc.Delta = applied
			if applied == 0 {
				o.Applied, o.Skipped = &applied, skipped
				if skipped && fresh {
					return // skipped on a missing counter: creates nothing, records nothing
				}
				break
			}
			if o.Err = b.sum(c, inc); o.Err != nil {
				return
			}
			o.Applied = &applied
			break
		}
		if o.Err = b.sum(c, inc); o.Err != nil {
			return
		}
	}
	if fresh {
		b.s.counters[inc.Counter] = c
	}
	if inc.RequestID != "" {
		c.requests[inc.RequestID] = now
	}
}

// counter returns the item's counter, or the one it creates (fresh: made
// only if the item applies; a later item may make it anew); nil, with the
// item's error set, when there is none.
func (b *batch) counter(inc shardcounter.Increment, o *shardcounter.Outcome) (*counter, bool) {
	if c := b.s.counters[inc.Counter]; c != nil {
		return c, false
	}
	if inc.Create == nil {
		o.Err = shardcounter.CounterNotFound(inc.Counter)
		return nil, false
	}
	return newCounter(inc.Counter, *inc.Create, b.now), true
}

// sum adds a delta to a sum counter, refusing it when the total would
// leave int64 or the counter's bounds, or its bucket int64.
func (b *batch) sum(c *counter, inc shardcounter.Increment) error {
	total, ok := add(c.total, inc.Delta)
	switch {
	case !ok:
		return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: %d%+d leaves int64", inc.Counter, c.total, inc.Delta)
	case c.c.Min != nil && total < *c.c.Min:
		return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: %d is below its min %d", inc.Counter, total, *c.c.Min)
	case c.c.Max != nil && total > *c.c.Max:
		return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: %d is above its max %d", inc.Counter, total, *c.c.Max)
	}
	var start, bucket int64
	if w := c.c.Window; w != nil {
		start = w.BucketOf(b.now).UnixNano()
		if bucket, ok = add(c.buckets[start], inc.Delta); !ok {
			return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: its bucket's sum leaves int64", inc.Counter)
		}
		// Past retention: a bucket that starts before the one holding
		// now − retention.
		oldest := w.BucketOf(b.now.Add(-time.Duration(w.Retention))).UnixNano()
		for s := range c.buckets {
			if s < oldest {
				delete(c.buckets, s)
			}
		}
		c.buckets[start] = bucket
	}
	c.total = total
	c.place(shard.Of(inc.Pick, c.c.Shards), inc.Delta)
	return nil
}

// checkBound refuses a bounded item (INCREX's) no counter takes: one
// that is not a delta (a delta of 0 is one: it reads the total), or whose
// lower bound is above its upper one; and what check refuses.
func checkBound(inc shardcounter.Increment) error {
	switch {
	case inc.Member != "" || inc.Sketch != nil:
		return shardcounter.Errorf(shardcounter.EINVALID, "a bounded item is a delta")
	case inc.Bound.Lower > inc.Bound.Upper:
		return shardcounter.Errorf(shardcounter.EINVALID, "the lower bound is above the upper")
	}
	if inc.Delta == 0 {
		inc.Delta = 1
	}
	return check(inc)
}

// bounded returns what a bounded item applies on a counter whose total
// is total: all of its delta when the result lies within the bounds;
// else, saturating, what takes the total to old+delta clamped to the
// bounds (out_of_range if that is no int64), or nothing: skipped. Computed
// on unbounded integers, so that no overflow is mistaken for a value.
func bounded(total int64, inc shardcounter.Increment) (int64, bool, error) {
	t := new(big.Int).Add(big.NewInt(total), big.NewInt(inc.Delta))
	lo, hi := big.NewInt(inc.Bound.Lower), big.NewInt(inc.Bound.Upper)
	inside := t.Cmp(lo) >= 0 && t.Cmp(hi) <= 0
	switch {
	case inside:
		return inc.Delta, false, nil
	case !inc.Bound.Saturate:
		return 0, true, nil
	case t.Cmp(lo) < 0:
		t = lo
	default:
		t = hi
	}
	applied := new(big.Int).Sub(t, big.NewInt(total))
	if !applied.IsInt64() {
		return 0, false, shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: saturating moves it by more than an int64", inc.Counter)
	}
	return applied.Int64(), false, nil
}

// check refuses an item no counter takes, as Increment's doc describes
// one: a sketch with no member and delta 0, a member with delta ±1, or a
// non-zero delta; valid names; a valid Create spec.
func check(inc shardcounter.Increment) error {
	invalid := func(msg string) error { return shardcounter.Errorf(shardcounter.EINVALID, "%s", msg) }
	switch {
	case inc.Sketch != nil:
		if inc.Member != "" || inc.Delta != 0 {
			return invalid("a sketch item takes no member and delta 0")
		}
		if _, err := sketch.Decode(inc.Sketch); err != nil {
			return invalid("the sketch cannot be read: " + err.Error())
		}
	case inc.Member != "":
		if inc.Delta != 1 && inc.Delta != -1 {
			return invalid("a member item has delta +1 or -1")
		}
		if err := shardcounter.ValidateID("member", inc.Member); err != nil {
			return err
		}
	case inc.Delta == 0:
		return invalid("delta 0")
	}
	if err := shardcounter.ValidateID(shardcounter.CounterIDKind, inc.Counter); err != nil {
		return err
	}
	if inc.RequestID != "" {
		if err := shardcounter.ValidateID("request id", inc.RequestID); err != nil {
			return err
		}
	}
	if inc.Create != nil {
		return shardcounter.ValidateSpec(*inc.Create)
	}
	return nil
}

// fits refuses an item meant for another kind than its counter's: by its
// Kind, or by its shape (a sum counter takes deltas, a distinct one
// member adds and removals, an approx one member adds and sketches).
func fits(inc shardcounter.Increment, k shardcounter.Kind) error {
	wrong := func(what string) error {
		return shardcounter.Errorf(shardcounter.EINVALID, "counter %q is a %s counter: %s", inc.Counter, k, what)
	}
	if inc.Kind != "" && inc.Kind != k {
		return wrong("the item is meant for a " + string(inc.Kind) + " counter")
	}
	switch k {
	case shardcounter.KindDistinct:
		if inc.Member == "" {
			return wrong("it takes members")
		}
	case shardcounter.KindApprox:
		if inc.Member == "" && inc.Sketch == nil {
			return wrong("it takes members and sketches")
		}
		if inc.Member != "" && inc.Delta != 1 {
			return wrong("its members cannot be removed")
		}
	default:
		if inc.Member != "" || inc.Sketch != nil {
			return wrong("it takes deltas")
		}
	}
	return nil
}

// apply returns a shard's new sketch: the old one with the commit's
// members added and its sketches merged.
func apply(old []byte, members []string, merges [][]byte) []byte {
	s, err := sketch.Decode(old)
	if err != nil {
		panic(err)
	}
	for _, m := range members {
		s.Add(m)
	}
	for _, m := range merges {
		o, err := sketch.Decode(m)
		if err != nil {
			panic(err) // check decoded it
		}
		if err := s.Merge(o); err != nil {
			panic(err)
		}
	}
	return s.Encode()
}

// sameSketch reports whether two encoded sketches hold the same thing:
// the same sparse hashes while sparse, the same registers once dense. It
// reads the encoding itself (the format github.com/axiomhq/hyperloglog
// documents on UnmarshalBinary), so that "unchanged" is decided here and
// not by the code the stores use.
func sameSketch(a, b []byte) bool {
	da, ka := content(a)
	db, kb := content(b)
	return bytes.Equal(da, db) && slices.Equal(ka, kb)
}

// content returns an encoded sketch's dense registers, or its sparse keys
// in order when it is sparse.
func content(enc []byte) (registers []byte, keys []uint32) {
	if len(enc) == 0 {
		return nil, nil
	}
	s, err := sketch.Decode(enc)
	if err != nil {
		panic(err)
	}
	enc = s.Encode() // the current version of the format
	if enc[3] == 0 { // dense: a uint32 count, then the registers
		return enc[8:], nil
	}
	// Sparse: a uint32 count of unsorted keys and the keys, then a list
	// of sorted keys: uint32 count, last and size, then size bytes of
	// delta-encoded varints.
	set := map[uint32]bool{}
	n := int(binary.BigEndian.Uint32(enc[4:8]))
	at := 8
	for range n {
		set[binary.BigEndian.Uint32(enc[at:])] = true
		at += 4
	}
	count := int(binary.BigEndian.Uint32(enc[at:]))
	at += 12
	var x uint32
	for range count {
		var d uint32
		for shift := 0; ; shift += 7 {
			c := enc[at]
			at++
			d |= uint32(c&0x7f) << shift
			if c&0x80 == 0 {
				break
			}
		}
		x += d
		set[x] = true
	}
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return nil, keys
}
