package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"
)

// The index of counter ids is spread over indexBuckets sorted sets in as
// many slots (see bucketKey), so that no one master holds it: with a
// master down, counters whose keys live on the others can still be
// created, and no key takes every create. Listing merges the buckets the
// way a collection query merges its shards.

// merge reads the members of several sorted sets (all scores 0) between
// two ZRANGEBYLEX bounds in byte order: a k-way merge that fetches a chunk
// of each set at a time, and more of a set only when its next member is
// needed. It merges the index buckets for ListCounters and a distinct
// counter's shards for ListMembers.
type merge struct {
	hi    string
	chunk int64
	heads []*bucketCursor
}

type bucketCursor struct {
	key  string
	lo   string   // ZRANGEBYLEX bound of the next fetch
	buf  []string // fetched ids not yet taken
	done bool     // the bucket has nothing past buf
}

func newMerge(keys []string, lo, hi string, chunk int) *merge {
	m := &merge{hi: hi, chunk: int64(chunk)}
	for _, k := range keys {
		m.heads = append(m.heads, &bucketCursor{key: k, lo: lo})
	}
	return m
}

// indexKeys returns the keys of every index bucket.
func indexKeys(prefix string) []string {
	out := make([]string, indexBuckets)
	for b := range out {
		out[b] = bucketKey(prefix, b)
	}
	return out
}

// next returns up to n more ids in order, none when every bucket is done.
func (m *merge) next(ctx context.Context, c goredis.UniversalClient, n int) ([]string, error) {
	var out []string
	for len(out) < n {
		if err := m.fill(ctx, c); err != nil {
			return nil, err
		}
		var min *bucketCursor
		for _, h := range m.heads {
			if len(h.buf) > 0 && (min == nil || h.buf[0] < min.buf[0]) {
				min = h
			}
		}
		if min == nil {
			break // every bucket is done
		}
		// Take ids while they stay below every other bucket's head and
		// no other bucket needs fetching.
		for len(out) < n && len(min.buf) > 0 && m.leads(min) {
			out = append(out, min.buf[0])
			min.lo = "(" + min.buf[0]
			min.buf = min.buf[1:]
		}
	}
	return out, nil
}

// leads reports whether h's next id comes before every other bucket's.
func (m *merge) leads(h *bucketCursor) bool {
	for _, o := range m.heads {
		if o == h {
			continue
		}
		if len(o.buf) == 0 && !o.done {
			return false // unknown until fetched
		}
		if len(o.buf) > 0 && o.buf[0] < h.buf[0] {
			return false
		}
	}
	return true
}

// fill fetches the next chunk of every bucket whose buffer is empty and
// which is not done, in one pipeline: one round trip per master.
func (m *merge) fill(ctx context.Context, c goredis.UniversalClient) error {
	var need []*bucketCursor
	for _, h := range m.heads {
		if len(h.buf) == 0 && !h.done {
			need = append(need, h)
		}
	}
	if len(need) == 0 {
		return nil
	}
	cmds := make([]*goredis.StringSliceCmd, len(need))
	if _, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, h := range need {
			cmds[i] = p.ZRangeByLex(ctx, h.key, &goredis.ZRangeBy{Min: h.lo, Max: m.hi, Count: m.chunk})
		}
		return nil
	}); err != nil {
		return err
	}
	for i, h := range need {
		h.buf = cmds[i].Val()
		h.done = int64(len(h.buf)) < m.chunk
	}
	return nil
}
