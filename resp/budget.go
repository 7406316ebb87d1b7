package resp

import "sync/atomic"

// Budget bounds the bytes of input that many Readers buffer together: the
// unparsed input of all a server's connections. A Reader takes its buffer
// from the Budget before it allocates it, and every growth of it, and
// gives them back when it drops the buffer (Release, Close); a Reader that
// finds no room returns a *ProtocolError, so that the server answers and
// closes that connection rather than hold more. A nil *Budget bounds
// nothing. A Budget is safe for concurrent use.
type Budget struct {
	limit int64
	used  atomic.Int64
}

// NewBudget returns a Budget of limit bytes.
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// Limit returns the Budget's limit, and Used the bytes taken now.
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

func (b *Budget) take(n int) bool {
	if b == nil {
		return true
	}
	if b.used.Add(int64(n)) > b.limit {
		b.used.Add(-int64(n))
		return false
	}
	return true
}

func (b *Budget) give(n int) {
	if b != nil && n > 0 {
		b.used.Add(-int64(n))
	}
}
