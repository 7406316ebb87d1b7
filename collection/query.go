package collection

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/shardcounter/shardcounter"
)

// plan is a validated query, ready to run: which index range to read, in
// which order, between which exclusive bounds (the time range and the page
// token folded together), and how many documents to return.
type plan struct {
	c             *shardcounter.Collection
	index, value  string
	order         shardcounter.Order
	limit         int
	after, before *shardcounter.Position
	fingerprint   uint64
}

// QueryDocuments returns a page of the documents that match q, merged from
// every shard of the collection.
func (s *Service) QueryDocuments(ctx context.Context, name string, q shardcounter.Query) (*shardcounter.QueryResult, error) {
	if err := shardcounter.ValidateQueryShape(q); err != nil {
		return nil, err
	}
	var tok *pageToken
	if q.PageToken != "" {
		t, err := decodeToken(q.PageToken)
		if err != nil {
			return nil, err
		}
		tok = &t
	}
	c, err := s.GetCollection(ctx, name)
	if err != nil {
		return nil, err
	}
	p, err := newPlan(c, q, tok)
	if err != nil {
		return nil, err
	}
	docs, err := s.merge(ctx, p)
	if err != nil {
		return nil, err
	}
	res := &shardcounter.QueryResult{Documents: docs}
	if len(docs) > p.limit {
		res.Documents = docs[:p.limit]
		res.NextPageToken = encodeToken(pageToken{
			order:       p.order,
			shards:      c.Shards,
			fingerprint: p.fingerprint,
			last:        docs[p.limit-1].Position(),
		})
	}
	s.stats.Queries.Add(1)
	s.stats.DocumentsReturned.Add(int64(len(res.Documents)))
	return res, nil
}

// newPlan validates q against c and resolves its defaults, its time range
// and its page token into one plan.
func newPlan(c *shardcounter.Collection, q shardcounter.Query, tok *pageToken) (*plan, error) {
	p := &plan{c: c, order: q.Order, limit: q.Limit}
	if p.order == "" {
		p.order = shardcounter.Desc
	}
	if p.limit == 0 {
		p.limit = shardcounter.DefaultQueryLimit
	}
	if len(q.Where) == 1 {
		var err error
		if p.index, p.value, err = shardcounter.ValidateFilter(c, q.Where[0]); err != nil {
			return nil, err
		}
	}
	// Timestamps are whole microseconds, so "after A" is "at or after the
	// first microsecond past A", and "before B" is "before B rounded up to
	// a microsecond". An empty id sorts before every document at its time.
	if !q.After.IsZero() {
		t := q.After.UTC().Truncate(time.Microsecond).Add(time.Microsecond)
		p.after = &shardcounter.Position{Time: t}
	}
	if !q.Before.IsZero() {
		b := q.Before.UTC()
		t := b.Truncate(time.Microsecond)
		if !t.Equal(b) {
			t = t.Add(time.Microsecond)
		}
		p.before = &shardcounter.Position{Time: t}
	}
	p.fingerprint = fingerprint(c, p.index, p.value, q, p.order)
	if tok != nil {
		switch {
		case tok.fingerprint != p.fingerprint || tok.order != p.order:
			return nil, badToken("it belongs to another query or collection")
		case tok.shards > c.Shards:
			return nil, badToken("it was made for more shards than the collection has")
		}
		last := tok.last
		if p.order == shardcounter.Desc {
			if p.before == nil || last.Compare(*p.before) < 0 {
				p.before = &last
			}
		} else if p.after == nil || last.Compare(*p.after) > 0 {
			p.after = &last
		}
	}
	return p, nil
}

// source is one stream of the merge: an ordered read of a chunk of shards,
// fetched in batches. buf[pos:] are fetched documents not yet merged;
// cursor is the position of the last document fetched, where the next
// batch starts (exclusive).
type source struct {
	shards []int
	buf    []*shardcounter.Document
	pos    int
	cursor *shardcounter.Position
	asked  int  // the size of the last batch asked for
	done   bool // the last batch came back short: nothing more to fetch
}

func (src *source) head() shardcounter.Position { return src.buf[src.pos].Position() }

// sources is a heap of the sources that have a document to offer, the one
// whose next document comes first in the query's order on top.
type sources struct {
	srcs []*source
	desc bool
}

func (h *sources) Len() int { return len(h.srcs) }
func (h *sources) Less(i, j int) bool {
	c := h.srcs[i].head().Compare(h.srcs[j].head())
	if h.desc {
		return c > 0
	}
	return c < 0
}
func (h *sources) Swap(i, j int) { h.srcs[i], h.srcs[j] = h.srcs[j], h.srcs[i] }
func (h *sources) Push(x any)    { h.srcs = append(h.srcs, x.(*source)) }
func (h *sources) Pop() any {
	x := h.srcs[len(h.srcs)-1]
	h.srcs = h.srcs[:len(h.srcs)-1]
	return x
}

// merge returns the first limit+1 documents of the plan (the one past the
// page tells whether a next page exists). It reads a first batch from every
// source at once, then takes documents off the heap, and fetches another
// batch from a source only when its buffer is empty and the page is not yet
// full. Each batch asks for at most what the page still needs.
func (s *Service) merge(ctx context.Context, p *plan) ([]*shardcounter.Document, error) {
	if p.after != nil && p.before != nil && p.after.Compare(*p.before) >= 0 {
		return nil, nil
	}
	need := p.limit + 1
	srcs := s.chunks(p.c.Shards)
	first := min(need, (need+len(srcs)-1)/len(srcs)+1)

	errs := make([]error, len(srcs))
	sem := make(chan struct{}, s.cfg.Parallel)
	var wg sync.WaitGroup
	for i, src := range srcs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = s.fetch(ctx, p, src, first)
		})
	}
	wg.Wait()
	h := &sources{desc: p.order == shardcounter.Desc}
	for i, src := range srcs {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if len(src.buf) > 0 {
			h.srcs = append(h.srcs, src)
		}
	}
	heap.Init(h)

	out := make([]*shardcounter.Document, 0, need)
	for len(out) < need && h.Len() > 0 {
		src := h.srcs[0]
		out = append(out, src.buf[src.pos])
		src.pos++
		if src.pos < len(src.buf) {
			heap.Fix(h, 0)
			continue
		}
		if src.done || len(out) == need {
			heap.Pop(h)
			continue
		}
		if err := s.fetch(ctx, p, src, min(need-len(out), 2*src.asked)); err != nil {
			return nil, err
		}
		if len(src.buf) == 0 {
			heap.Pop(h)
			continue
		}
		heap.Fix(h, 0)
	}
	return out, nil
}

// chunks splits shards 0..n-1 into sources of at most the chunk size the
// service and the store allow.
func (s *Service) chunks(n int) []*source {
	size := min(s.cfg.ChunkSize, s.store.MaxScanShards())
	if size < 1 {
		size = 1
	}
	var srcs []*source
	for lo := 0; lo < n; lo += size {
		src := &source{}
		for i := lo; i < min(lo+size, n); i++ {
			src.shards = append(src.shards, i)
		}
		srcs = append(srcs, src)
	}
	return srcs
}

// fetch reads the next batch of up to n documents of src into its buffer,
// and checks that the store kept the contract: no more than asked, from
// the source's shards, strictly in order, inside the bounds. A store that
// breaks it would break the merge silently, so that is an internal error.
func (s *Service) fetch(ctx context.Context, p *plan, src *source, n int) error {
	r := shardcounter.ScanRange{
		Index: p.index, Value: p.value, Shards: src.shards, Order: p.order, Limit: n,
		After: p.after, Before: p.before,
	}
	if src.cursor != nil {
		if p.order == shardcounter.Desc {
			r.Before = src.cursor
		} else {
			r.After = src.cursor
		}
	}
	docs, err := s.store.ScanDocuments(ctx, p.c, r)
	s.stats.Scans.Add(1)
	if err != nil {
		return err
	}
	s.stats.DocumentsRead.Add(int64(len(docs)))
	if len(docs) > n {
		return shardcounter.Errorf(shardcounter.EINTERNAL, "store returned %d documents for a scan of %d", len(docs), n)
	}
	lo, hi := src.shards[0], src.shards[len(src.shards)-1]
	prev := r.Before
	if p.order == shardcounter.Asc {
		prev = r.After
	}
	for _, d := range docs {
		pos := d.Position()
		if d.Shard < lo || d.Shard > hi {
			return shardcounter.Errorf(shardcounter.EINTERNAL, "store returned document %q of shard %d for a scan of shards %d to %d", d.ID, d.Shard, lo, hi)
		}
		inOrder := prev == nil || (p.order == shardcounter.Desc && pos.Compare(*prev) < 0) || (p.order == shardcounter.Asc && pos.Compare(*prev) > 0)
		outside := (r.After != nil && pos.Compare(*r.After) <= 0) || (r.Before != nil && pos.Compare(*r.Before) >= 0)
		if !inOrder || outside {
			return shardcounter.Errorf(shardcounter.EINTERNAL, "store returned document %q out of order or outside the scanned range", d.ID)
		}
		prev = &pos
	}
	src.buf, src.pos, src.asked = docs, 0, n
	src.done = len(docs) < n
	if len(docs) > 0 {
		last := docs[len(docs)-1].Position()
		src.cursor = &last
	}
	return nil
}
