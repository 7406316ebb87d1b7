package expiry

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/shardcounter/shardcounter"
)

// Deadline records (see the package documentation): a distinct counter
// per name whose members are the deadlines set, newest first.

// entry is what is known of a name's deadline record: the deadline of
// its newest member (0 for none) and that member ("" when the record
// holds none); and the time of the index entry this Store last added to
// for the name (0 when unknown), which a change in the same second need
// not add to again.
type entry struct {
	deadline int64
	member   string
	indexed  int64
}

// recordSpec is the spec of a deadline record; indexSpec that of an
// index entry.
var (
	recordSpec = &shardcounter.Spec{Shards: 1, Kind: shardcounter.KindDistinct}
	indexSpec  = &shardcounter.Spec{Shards: 1, Kind: shardcounter.KindSum}
)

// member returns the member of a deadline at ms set at stamp: the
// stamp's complement first, so that the newest member sorts first.
func member(stamp, ms int64) string {
	var b [32]byte
	hex16(b[:16], uint64(math.MaxInt64-stamp))
	hex16(b[16:], uint64(ms))
	return string(b[:]) // one allocation a change, where fmt's boxing made three
}

// hex16 writes v into b as 16 lowercase hex digits, zero-padded: %016x.
func hex16(b []byte, v uint64) {
	const digits = "0123456789abcdef"
	for i := 15; i >= 0; i-- {
		b[i] = digits[v&0xf]
		v >>= 4
	}
}

// parseMember returns the deadline a member holds.
func parseMember(m string) (int64, bool) {
	if len(m) != 32 {
		return 0, false
	}
	ms, err := strconv.ParseUint(m[16:], 16, 63)
	if err != nil {
		return 0, false
	}
	return int64(ms), true
}

// stamp returns a stamp for a new member: the clock in nanoseconds,
// strictly increasing within this process, so that of two members the
// later one set sorts first here, and across processes the one set
// later by the clocks.
func (s *Store) stamp() int64 {
	for {
		last := s.lastStamp.Load()
		v := max(time.Now().UnixNano(), last+1)
		if s.lastStamp.CompareAndSwap(last, v) {
			return v
		}
	}
}

// bucket returns the index entry's time of a deadline at ms: the next
// whole second, so that a name given a new deadline many times a second
// (a rate limit's EXPIRE on every hit) adds to one entry, not one each.
func bucket(ms int64) int64 { return (ms + 999) / 1000 * 1000 }

// Reader is what ReadDeadlines reads records with: a store, or a
// snapshot of one.
type Reader interface {
	ReadCounters(ctx context.Context, ids []string) ([]*shardcounter.Reading, error)
	ListMembers(ctx context.Context, id, after string, limit int) ([]string, error)
}

// ReadDeadlines returns the deadline of each name in Unix ms (0 for
// none), read from the store's records past any cache: for an export.
func ReadDeadlines(ctx context.Context, r Reader, names []string) ([]int64, error) {
	es, _, err := readRecords(ctx, r, names)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(names))
	for i, e := range es {
		out[i] = e.deadline
	}
	return out, nil
}

// readRecords reads the records of names: one ReadCounters a
// MaxReadBatch of names, then the newest member of each record that
// holds one. untidy lists the indexes of the names whose records hold more than one
// member (set by two processes at once, or a removal that failed).
func readRecords(ctx context.Context, r Reader, names []string) ([]entry, []int, error) {
	out := make([]entry, len(names))
	var untidy []int
	for lo := 0; lo < len(names); lo += shardcounter.MaxReadBatch {
		part := names[lo:min(lo+shardcounter.MaxReadBatch, len(names))]
		ids := make([]string, len(part))
		for i, n := range part {
			ids[i] = RecordID(n)
		}
		rs, err := r.ReadCounters(ctx, ids)
		if err != nil {
			return nil, nil, err
		}
		for i, rd := range rs {
			if rd == nil || rd.Value <= 0 {
				continue
			}
			ms, err := r.ListMembers(ctx, ids[i], "", 1)
			if err != nil {
				return nil, nil, err
			}
			if len(ms) == 0 {
				continue
			}
			d, _ := parseMember(ms[0])
			out[lo+i] = entry{deadline: d, member: ms[0]}
			if rd.Value > 1 {
				untidy = append(untidy, lo+i)
			}
		}
	}
	return out, untidy, nil
}

// tidyBatch is how many members tidy removes in one Apply.
const tidyBatch = 100

// tidy removes every member but the newest from name's record: the
// older ones no longer count. A member newer than newest, set meanwhile
// by another process, sorts before it and is kept.
func (s *Store) tidy(ctx context.Context, name, newest string) error {
	rec := RecordID(name)
	for {
		ms, err := s.CounterStore.ListMembers(ctx, rec, newest, tidyBatch)
		if err != nil || len(ms) == 0 {
			return err
		}
		incs := make([]shardcounter.Increment, len(ms))
		for i, m := range ms {
			incs[i] = shardcounter.Increment{Counter: rec, Member: m, Delta: -1}
		}
		if _, err := s.CounterStore.Apply(ctx, incs); err != nil {
			return err
		}
		if len(ms) < tidyBatch {
			return nil
		}
	}
}
