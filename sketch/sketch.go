// Package sketch holds the HyperLogLog sketches of approximate counters
// (shardcounter.KindApprox): each shard of such a counter keeps one, an add
// inserts a member into the sketch of the member's shard, and the counter's
// value is the estimate of the union of its shards' sketches.
//
// The sketch is github.com/axiomhq/hyperloglog's (HyperLogLog++ with a
// sparse representation for small sets and LogLog-Beta's estimator), at
// precision 14: 16,384 one-byte registers once dense, so a shard's sketch
// never takes more than 16 KiB of registers (Encoded adds an 8-byte
// header), and the estimate's relative standard error is StdError. Its
// merge is the union of the sets the sketches saw, which is what sharding
// needs: shards are merged on read, never summed.
//
// Stores keep a shard's sketch as the bytes Encode returns, and change it
// only through Apply, so that every store decides "did this write change
// the sketch" the same way.
package sketch

import (
	"bytes"
	"fmt"
	"math"

	"github.com/axiomhq/hyperloglog"
)

// Precision is the sketch's precision p: 2^p registers.
const Precision = 14

// StdError is the relative standard error of an estimate, 1.04/√(2^p):
// 0.81 %.
var StdError = 1.04 / math.Sqrt(1<<Precision)

// MaxEncoded is the largest encoding of a sketch: the dense registers and
// the 8-byte header.
const MaxEncoded = 8 + 1<<Precision

// Sketch is one HyperLogLog sketch. It is not safe for concurrent use.
type Sketch struct{ hll *hyperloglog.Sketch }

// New returns an empty sketch.
func New() *Sketch { return &Sketch{hll: hyperloglog.New14()} }

// Decode returns the sketch b encodes; an empty b is an empty sketch. A
// sketch of another precision or a malformed encoding is an error.
func Decode(b []byte) (*Sketch, error) {
	if len(b) == 0 {
		return New(), nil
	}
	if len(b) > MaxEncoded {
		return nil, fmt.Errorf("sketch: %d bytes, more than a sketch of precision %d takes (%d)", len(b), Precision, MaxEncoded)
	}
	if len(b) >= 2 && b[1] != Precision {
		return nil, fmt.Errorf("sketch: precision %d, want %d", b[1], Precision)
	}
	hll := hyperloglog.New14()
	if err := hll.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("sketch: %w", err)
	}
	return &Sketch{hll: hll}, nil
}

// Add inserts a member.
func (s *Sketch) Add(member string) { s.hll.Insert([]byte(member)) }

// Merge makes s the union of s and o.
func (s *Sketch) Merge(o *Sketch) error { return s.hll.Merge(o.hll) }

// Estimate returns the estimated number of distinct members. It costs a
// pass over the registers once the sketch is dense (about half a
// millisecond): callers compute it on read, not on every write.
func (s *Sketch) Estimate() int64 { return int64(s.hll.Estimate()) }

// Encode returns the sketch's bytes, at most MaxEncoded of them. A sparse
// sketch close to the library's switch to dense registers can encode
// longer than the dense registers would (its list and its buffer of
// recent hashes); Encode makes such a sketch dense first, so that a
// shard's sketch never takes more than MaxEncoded.
func (s *Sketch) Encode() []byte {
	b, err := s.hll.MarshalBinary()
	if err != nil { // only a sketch of no precision, which New never makes
		panic(err)
	}
	if len(b) > MaxEncoded {
		d := hyperloglog.NewNoSparse()
		if err := d.Merge(s.hll); err != nil { // same precision: cannot fail
			panic(err)
		}
		s.hll = d
		if b, err = d.MarshalBinary(); err != nil {
			panic(err)
		}
	}
	return b
}

// dense reports whether an encoding holds dense registers (header byte 3
// is 0 for dense, 1 for sparse: the library's documented format).
func dense(b []byte) bool { return len(b) > 8 && b[3] == 0 }

// Apply is one shard's change in one commit: it decodes the shard's
// sketch (empty when the shard has none yet), adds members, merges the
// encoded sketches in merges, and returns the new encoding and whether the
// sketch changed. A store calls it once per shard a batch touches and
// reports every item of that shard in the batch as changed or unchanged
// together (Outcome.Unchanged), so an add's "changed" means the commit
// that carried it changed its shard's sketch.
//
// Changed is decided on what the estimate depends on: the registers once
// dense, the sparse list's size while sparse (whose estimate is a linear
// count of it), so that an add of a member already counted is unchanged.
func Apply(old []byte, members []string, merges [][]byte) (out []byte, changed bool, err error) {
	s, err := Decode(old)
	if err != nil {
		return nil, false, err
	}
	return s.Apply(old, members, merges)
}

// Apply is the function Apply on s, the sketch old decodes to, for a
// caller that decoded old already (to refuse a batch's items on a shard
// whose sketch does not decode as they come). It changes s.
func (s *Sketch) Apply(old []byte, members []string, merges [][]byte) (out []byte, changed bool, err error) {
	var before int64
	wasDense := dense(old)
	if !wasDense {
		before = s.Estimate() // sparse: a linear count, cheap; it also compacts
	}
	for _, m := range members {
		s.Add(m)
	}
	for _, b := range merges {
		o, err := Decode(b)
		if err != nil {
			return nil, false, err
		}
		if err := s.Merge(o); err != nil {
			return nil, false, fmt.Errorf("sketch: %w", err)
		}
	}
	if !wasDense {
		after := s.Estimate() // compacts, so equal sets encode alike
		out = s.Encode()
		return out, after != before || dense(out), nil
	}
	out = s.Encode()
	return out, !bytes.Equal(old[8:], out[8:]), nil
}

// Union returns the union of encoded sketches (nil or empty ones are
// empty).
func Union(encoded [][]byte) (*Sketch, error) {
	u := New()
	for _, b := range encoded {
		if len(b) == 0 {
			continue
		}
		s, err := Decode(b)
		if err != nil {
			return nil, err
		}
		if err := u.Merge(s); err != nil {
			return nil, fmt.Errorf("sketch: %w", err)
		}
	}
	return u, nil
}

// Count returns the estimate of the union of encoded sketches: an approx
// counter's value from its shards' sketches.
func Count(encoded [][]byte) (int64, error) {
	u, err := Union(encoded)
	if err != nil {
		return 0, err
	}
	return u.Estimate(), nil
}
