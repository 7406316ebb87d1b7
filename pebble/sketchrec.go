package pebble

import (
	"encoding/binary"
	"errors"
	"io"
	"slices"

	"github.com/shardcounter/shardcounter/sketch"
)

// A shard sketch's key holds a whole sketch or a merge operand of
// register updates, told apart by their first byte:
//
//	'S' sketch (package sketch's encoding)
//	'U' (register index uint16, value uint8)...
//
// A batch that changes a dense sketch (sketch.MaxEncoded bytes of
// registers) into another dense one merges the registers that changed, a
// few bytes a member, rather than setting the 16 KiB sketch again; a
// sparse sketch, which is small, and every reshard set the whole sketch.
// A register only grows (an HLL register is the maximum rank seen), so
// updates fold by maximum in any order, and a whole sketch set after
// updates replaces them (sketchMerger).
const (
	tagSketch  = 'S'
	tagUpdates = 'U'
)

var errCorruptSketch = errors.New("pebble: corrupt sketch record")

// denseRegs returns the registers of a dense encoding, nil for another.
func denseRegs(b []byte) []byte {
	if len(b) != sketch.MaxEncoded || b[3] != 0 {
		return nil
	}
	return b[8:]
}

// sketchValue returns what a batch writes for a shard's sketch going
// from old to out: the updates of the registers that changed when both
// are dense (merge true), else the whole sketch.
func sketchValue(old, out []byte) (v []byte, merge bool) {
	ro, rn := denseRegs(old), denseRegs(out)
	if ro == nil || rn == nil {
		return append([]byte{tagSketch}, out...), false
	}
	v = []byte{tagUpdates}
	for w := 0; w < len(rn); w += 8 { // a word at a time: few registers change
		if binary.LittleEndian.Uint64(rn[w:]) == binary.LittleEndian.Uint64(ro[w:]) {
			continue
		}
		for i := w; i < w+8; i++ {
			if rn[i] != ro[i] {
				v = binary.BigEndian.AppendUint16(v, uint16(i))
				v = append(v, rn[i])
			}
		}
	}
	return v, true
}

// decodeSketchRecord returns the sketch of a folded record.
func decodeSketchRecord(v []byte) ([]byte, error) {
	if len(v) == 0 || v[0] != tagSketch {
		return nil, errCorruptSketch
	}
	return slices.Clone(v[1:]), nil
}

// sketchMerger folds a shard sketch's operands: updates by maximum, and a
// whole sketch, when one is among them, takes the updates newer than it.
type sketchMerger struct {
	base    []byte          // the whole sketch ('S' record), when the oldest operand so far is one
	updates map[uint16]byte // the highest value of each register updated
}

func (m *sketchMerger) add(v []byte, newer bool) error {
	switch {
	case len(v) == 0:
		return errCorruptSketch
	case v[0] == tagSketch && newer:
		m.base, m.updates = slices.Clone(v), nil
		return nil
	case v[0] == tagSketch:
		if m.base == nil {
			m.base = slices.Clone(v)
		}
		return nil
	case v[0] != tagUpdates || (len(v)-1)%3 != 0:
		return errCorruptSketch
	case m.base != nil && !newer:
		return nil // older than the sketch: in it already
	}
	if m.updates == nil {
		m.updates = make(map[uint16]byte)
	}
	for b := v[1:]; len(b) > 0; b = b[3:] {
		i := binary.BigEndian.Uint16(b)
		m.updates[i] = max(m.updates[i], b[2])
	}
	return nil
}

func (m *sketchMerger) MergeNewer(v []byte) error { return m.add(v, true) }
func (m *sketchMerger) MergeOlder(v []byte) error { return m.add(v, false) }

// Finish returns the sketch with the updates in it, or, without one
// among the operands (a compaction that saw only some), one operand of
// the updates.
func (m *sketchMerger) Finish(bool) ([]byte, io.Closer, error) {
	if m.base != nil {
		if len(m.updates) == 0 {
			return m.base, nil, nil
		}
		regs := denseRegs(m.base[1:])
		if regs == nil {
			return nil, nil, errCorruptSketch // updates only ever follow a dense sketch
		}
		for i, r := range m.updates {
			if int(i) >= len(regs) {
				return nil, nil, errCorruptSketch
			}
			regs[i] = max(regs[i], r)
		}
		return m.base, nil, nil
	}
	idx := make([]uint16, 0, len(m.updates))
	for i := range m.updates {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	out := []byte{tagUpdates}
	for _, i := range idx {
		out = binary.BigEndian.AppendUint16(out, i)
		out = append(out, m.updates[i])
	}
	return out, nil, nil
}
