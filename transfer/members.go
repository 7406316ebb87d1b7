package transfer

import (
	"context"
	"fmt"

	"github.com/shardcounter/shardcounter"
)

// memberStream is a source that reads the members of many counters in
// one query (a PostgreSQL snapshot): an export reads a page's members so,
// instead of a query per distinct counter.
type memberStream interface {
	// EachMember calls fn with each member of the counters ids (in byte
	// order), by counter and member in byte order.
	EachMember(ctx context.Context, ids []string, fn func(id, member string) error) error
}

// pageWriter writes a page's counter lines in order, each with its
// members.
type pageWriter struct {
	enc  *Encoder
	recs []*Counter // not yet written
	opts ExportOptions
	st   *Stats
}

// next writes the next counter line and returns its counter.
func (p *pageWriter) next() (*Counter, error) {
	rec := p.recs[0]
	p.recs = p.recs[1:]
	if err := p.enc.Counter(rec); err != nil {
		return nil, err
	}
	p.st.Counters++
	p.opts.Progress.Add(1)
	return rec, nil
}

// withMembers writes the page with its members from one EachMember: the
// counter lines up to each member's counter, then its members, a line of
// up to MembersPerLine at a time, as exportMembers writes them.
func (p *pageWriter) withMembers(ctx context.Context, ms memberStream) error {
	var ids []string
	for _, r := range p.recs {
		if r.Kind == shardcounter.KindDistinct {
			ids = append(ids, r.ID)
		}
	}
	cur := ""
	var buf []string
	flush := func() error {
		err := p.enc.Members(cur, buf)
		p.st.Members += int64(len(buf))
		buf = buf[:0]
		return err
	}
	err := ms.EachMember(ctx, ids, func(id, m string) error {
		if id != cur || len(buf) == MembersPerLine {
			if err := flush(); err != nil {
				return err
			}
		}
		for id != cur {
			if len(p.recs) == 0 {
				return fmt.Errorf("export: a member of %q, which the page does not hold", id)
			}
			rec, err := p.next()
			if err != nil {
				return err
			}
			cur = rec.ID
		}
		buf = append(buf, m)
		return nil
	})
	if err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	for len(p.recs) > 0 {
		if _, err := p.next(); err != nil {
			return err
		}
	}
	return nil
}
