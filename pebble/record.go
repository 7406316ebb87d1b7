package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"

	pdb "github.com/cockroachdb/pebble/v2"

	"github.com/shardcounter/shardcounter/internal/overflow"
)

// A counter is one key, "c" id, whose value is either a whole record or a
// merge operand of deltas, told apart by their first byte:
//
//	'R' uvarint(len(meta)) meta shard values (n × int64, big-endian)
//	'D' (uvarint shard, zigzag varint delta)...
//
// A write to a counter is a blind merge of a 'D' operand: Pebble keeps it
// beside the record until a read or a compaction folds it in (merger
// below), so a write never reads the record. Creating, resharding and
// deleting a counter set or delete the record, under the store's write
// lock, so a record is never set over operands it has not folded in.
//
// Shard values never wrap: the store refuses every write that would take
// a counter's total out of int64 (it holds the totals in memory), and a
// fold that would take one shard out of int64 moves the excess to shards
// with room (fold, below), so the sum of the shards is the exact total
// and each shard an int64. A delta for a shard at or past
// the record's count (written before a reshard that shrank it, folded
// after) lands on shard i mod n, where the reshard folded shard i.
const (
	tagRecord = 'R'
	tagDeltas = 'D'
)

// record is a counter's record decoded: its metadata and shard values.
type record struct {
	meta   meta
	shards []int64
}

// total is the sum of the shard values: exact, since every write kept it
// in int64 (see above).
func (r *record) total() int64 {
	var t int64
	for _, v := range r.shards {
		t += v
	}
	return t
}

func encodeRecord(r *record) []byte {
	m := encodeMeta(r.meta)
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(m)+8*len(r.shards))
	b = append(b, tagRecord)
	b = binary.AppendUvarint(b, uint64(len(m)))
	b = append(b, m...)
	for _, v := range r.shards {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return b
}

var errCorruptRecord = errors.New("pebble: corrupt counter record")

func decodeRecord(b []byte) (*record, error) {
	if len(b) == 0 || b[0] != tagRecord {
		return nil, errCorruptRecord
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n > uint64(len(b)-1-k) {
		return nil, errCorruptRecord
	}
	rest := b[1+k:]
	m, err := decodeMeta(rest[:n])
	if err != nil {
		return nil, err
	}
	rest = rest[n:]
	if len(rest) != 8*m.spec.Shards {
		return nil, fmt.Errorf("%w: %d bytes of shard values for %d shards", errCorruptRecord, len(rest), m.spec.Shards)
	}
	r := &record{meta: m, shards: make([]int64, m.spec.Shards)}
	for i := range r.shards {
		r.shards[i] = int64(binary.BigEndian.Uint64(rest[8*i:]))
	}
	return r, nil
}

// delta is one entry of a 'D' operand.
type delta struct {
	shard int
	v     int64
}

func appendDelta(b []byte, shard int, v int64) []byte {
	if len(b) == 0 {
		b = append(b, tagDeltas)
	}
	b = binary.AppendUvarint(b, uint64(shard))
	return binary.AppendVarint(b, v)
}

// decodeDeltas appends the entries of a 'D' operand to ds.
func decodeDeltas(ds []delta, b []byte) ([]delta, error) {
	if len(b) == 0 || b[0] != tagDeltas {
		return ds, errCorruptRecord
	}
	for b = b[1:]; len(b) > 0; {
		s, k := binary.Uvarint(b)
		if k <= 0 || s >= 1<<16 {
			return ds, errCorruptRecord
		}
		b = b[k:]
		v, k := binary.Varint(b)
		if k <= 0 {
			return ds, errCorruptRecord
		}
		b = b[k:]
		ds = append(ds, delta{int(s), v})
	}
	return ds, nil
}

// merger is the store's Pebble merge operator. Its name is recorded in the
// database: a directory written with it opens only with it.
var merger = &pdb.Merger{
	Name: "shardcounter.counter.v1",
	Merge: func(key, value []byte) (pdb.ValueMerger, error) {
		if len(key) > 0 && key[0] == prefixSketch {
			m := new(sketchMerger) // sketchrec.go
			return m, m.add(value, false)
		}
		m := new(valueMerger)
		return m, m.add(value, false)
	},
}

// valueMerger folds a counter's operands: deltas sum, and a record, when
// one is among the operands, takes them all.
type valueMerger struct {
	base   []byte // the record, when the oldest operand so far is one
	deltas []delta
}

// add takes one operand, newer or older than those it has.
func (m *valueMerger) add(v []byte, newer bool) error {
	switch {
	case len(v) == 0:
		return errCorruptRecord
	case v[0] == tagRecord && newer:
		// A record set after the operands so far replaces them.
		m.base, m.deltas = slices.Clone(v), m.deltas[:0]
		return nil
	case v[0] == tagRecord:
		if m.base == nil {
			m.base = slices.Clone(v)
		}
		return nil
	case m.base != nil && !newer:
		return nil // older than the record: folded into it already
	}
	var err error
	m.deltas, err = decodeDeltas(m.deltas, v)
	return err
}

func (m *valueMerger) MergeNewer(v []byte) error { return m.add(v, true) }
func (m *valueMerger) MergeOlder(v []byte) error { return m.add(v, false) }

// Finish returns the record with the deltas folded in, or, when no record
// was among the operands (a compaction that saw only some of them), one
// operand with a sum per shard.
func (m *valueMerger) Finish(bool) ([]byte, io.Closer, error) {
	if m.base != nil {
		r, err := decodeRecord(m.base)
		if err != nil {
			return nil, nil, err
		}
		fold(r.shards, m.deltas)
		return encodeRecord(r), nil, nil
	}
	slices.SortStableFunc(m.deltas, func(a, b delta) int { return a.shard - b.shard })
	var out []byte
	for i := 0; i < len(m.deltas); {
		s, sum := m.deltas[i].shard, m.deltas[i].v
		for i++; i < len(m.deltas) && m.deltas[i].shard == s; i++ {
			next, ok := overflow.Add(sum, m.deltas[i].v)
			if !ok {
				// Deltas whose sum leaves int64 stay apart: the record
				// they are folded into places what its shard cannot hold.
				out = appendDelta(out, s, sum)
				next = m.deltas[i].v
			}
			sum = next
		}
		out = appendDelta(out, s, sum)
	}
	if out == nil {
		out = []byte{tagDeltas}
	}
	return out, nil, nil
}

// fold adds deltas to shards, each to shard i mod n. The store takes a
// write only when the counter's total stays in int64, never judging one
// shard (out_of_range is a total's verdict), so a shard may be asked to
// hold more than an int64 while the total fits. Then the exact shard
// values are put back in range by moving the excess to shards with room,
// lowest shard first: deterministic (every fold of the same operands
// gives the same record), the total exact, and every shard an int64.
// Some shard always has room, since n shards hold n int64 ranges and the
// total fits in one.
func fold(shards []int64, deltas []delta) {
	n := len(shards)
	for i, d := range deltas {
		j := d.shard % n
		v, ok := overflow.Add(shards[j], d.v)
		if !ok {
			foldWide(shards, deltas[i:])
			return
		}
		shards[j] = v
	}
}

// foldWide is fold's slow path, in arbitrary precision.
func foldWide(shards []int64, deltas []delta) {
	n := len(shards)
	exact := make([]*big.Int, n)
	for i, v := range shards {
		exact[i] = big.NewInt(v)
	}
	for _, d := range deltas {
		j := d.shard % n
		exact[j].Add(exact[j], big.NewInt(d.v))
	}
	lo, hi := big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)
	excess := new(big.Int)
	for i, v := range exact {
		switch {
		case v.Cmp(hi) > 0:
			excess.Add(excess, new(big.Int).Sub(v, hi))
			v.Set(hi)
		case v.Cmp(lo) < 0:
			excess.Add(excess, new(big.Int).Sub(v, lo))
			v.Set(lo)
		}
		shards[i] = v.Int64()
	}
	for i := 0; i < n && excess.Sign() != 0; i++ {
		room := new(big.Int)
		if excess.Sign() > 0 {
			room.Sub(hi, big.NewInt(shards[i]))
			if room.Cmp(excess) > 0 {
				room.Set(excess)
			}
		} else {
			room.Sub(lo, big.NewInt(shards[i]))
			if room.Cmp(excess) < 0 {
				room.Set(excess)
			}
		}
		shards[i] += room.Int64()
		excess.Sub(excess, room)
	}
}
