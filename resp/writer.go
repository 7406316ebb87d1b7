package resp

import (
	"math"
	"strconv"
)

// Writer encodes replies into a buffer, for RESP2 or RESP3. The caller
// writes Bytes to the connection and then calls Reset. The zero value
// speaks RESP2. It is not safe for concurrent use.
//
// Aggregates (Array, Map) write their header: the caller then writes that
// many elements (twice that many, key then value, for a map).
type Writer struct {
	buf   []byte
	proto int
}

// SetProto sets the protocol version of the replies that follow: 2 or 3.
func (w *Writer) SetProto(v int) { w.proto = v }

// Proto returns the protocol version: 2 or 3.
func (w *Writer) Proto() int {
	if w.proto == 3 {
		return 3
	}
	return 2
}

// Bytes returns the replies encoded since the last Reset.
func (w *Writer) Bytes() []byte { return w.buf }

// Len returns the number of bytes encoded since the last Reset.
func (w *Writer) Len() int { return len(w.buf) }

// Reset empties the buffer, keeping its memory unless it grew large.
func (w *Writer) Reset() {
	if cap(w.buf) > 1<<20 {
		w.buf = nil
		return
	}
	w.buf = w.buf[:0]
}

// Truncate drops what was encoded after the first n bytes, so that a
// reply begun can be replaced by an error.
func (w *Writer) Truncate(n int) { w.buf = w.buf[:n] }

// Simple writes a simple string: "+OK". CR and LF in s become spaces, as
// a simple string cannot hold them.
func (w *Writer) Simple(s string) {
	w.buf = append(w.buf, '+')
	w.line(s)
}

// Error writes an error reply: s starts with its code, "ERR ..." or
// "WRONGTYPE ...". CR and LF in s become spaces.
func (w *Writer) Error(s string) {
	w.buf = append(w.buf, '-')
	w.line(s)
}

func (w *Writer) line(s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		w.buf = append(w.buf, c)
	}
	w.buf = append(w.buf, '\r', '\n')
}

// Int writes an integer.
func (w *Writer) Int(n int64) {
	w.buf = append(w.buf, ':')
	w.buf = strconv.AppendInt(w.buf, n, 10)
	w.buf = append(w.buf, '\r', '\n')
}

// Bulk writes a bulk string.
func (w *Writer) Bulk(b []byte) {
	w.header('$', len(b))
	w.buf = append(w.buf, b...)
	w.buf = append(w.buf, '\r', '\n')
}

// BulkString writes a bulk string.
func (w *Writer) BulkString(s string) {
	w.header('$', len(s))
	w.buf = append(w.buf, s...)
	w.buf = append(w.buf, '\r', '\n')
}

// BulkInt writes the decimal digits of n as a bulk string, as Redis
// replies to GET of a number.
func (w *Writer) BulkInt(n int64) {
	var d [20]byte
	w.Bulk(strconv.AppendInt(d[:0], n, 10))
}

// Null writes the null reply: "_" in RESP3, the null bulk string in RESP2.
func (w *Writer) Null() {
	if w.proto == 3 {
		w.buf = append(w.buf, '_', '\r', '\n')
		return
	}
	w.buf = append(w.buf, '$', '-', '1', '\r', '\n')
}

// NullArray writes the null reply where an array was expected: "_" in
// RESP3, the null array in RESP2.
func (w *Writer) NullArray() {
	if w.proto == 3 {
		w.buf = append(w.buf, '_', '\r', '\n')
		return
	}
	w.buf = append(w.buf, '*', '-', '1', '\r', '\n')
}

// Array writes the header of an array of n elements.
func (w *Writer) Array(n int) { w.header('*', n) }

// Set writes the header of a set of n elements: an array in RESP2.
func (w *Writer) Set(n int) {
	if w.proto == 3 {
		w.header('~', n)
		return
	}
	w.header('*', n)
}

// Map writes the header of a map of n key-value pairs: in RESP2, a flat
// array of 2n elements, keys and values alternating.
func (w *Writer) Map(n int) {
	if w.proto == 3 {
		w.header('%', n)
		return
	}
	w.header('*', 2*n)
}

// Bool writes a boolean: in RESP2, the integer 1 or 0.
func (w *Writer) Bool(b bool) {
	switch {
	case w.proto == 3 && b:
		w.buf = append(w.buf, '#', 't', '\r', '\n')
	case w.proto == 3:
		w.buf = append(w.buf, '#', 'f', '\r', '\n')
	case b:
		w.Int(1)
	default:
		w.Int(0)
	}
}

// Double writes a floating-point number: in RESP2, a bulk string of its
// shortest decimal form, as Redis does.
func (w *Writer) Double(f float64) {
	var s string
	switch {
	case math.IsInf(f, 1):
		s = "inf"
	case math.IsInf(f, -1):
		s = "-inf"
	case math.IsNaN(f):
		s = "nan"
	default:
		s = strconv.FormatFloat(f, 'g', -1, 64)
	}
	if w.proto == 3 {
		w.buf = append(w.buf, ',')
		w.buf = append(w.buf, s...)
		w.buf = append(w.buf, '\r', '\n')
		return
	}
	w.BulkString(s)
}

// Verbatim writes text as a verbatim string of the given three-letter
// format ("txt"), as Redis replies to INFO in RESP3: a bulk string in
// RESP2.
func (w *Writer) Verbatim(format, text string) {
	if w.proto != 3 || len(format) != 3 {
		w.BulkString(text)
		return
	}
	w.header('=', len(text)+4)
	w.buf = append(w.buf, format...)
	w.buf = append(w.buf, ':')
	w.buf = append(w.buf, text...)
	w.buf = append(w.buf, '\r', '\n')
}

func (w *Writer) header(t byte, n int) {
	w.buf = append(w.buf, t)
	w.buf = strconv.AppendInt(w.buf, int64(n), 10)
	w.buf = append(w.buf, '\r', '\n')
}
