package docstore

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
)

// Listed is one record of a page of a listing, in key order: Key its
// document id (entity key name), which the next page starts after; Name
// the counter id or member it escapes, "" for a record that is not one of
// the store's (skipped); C a counter record's counter, nil when it does
// not decode (skipped); Of a member record's counter created_at.
type Listed struct {
	Key, Name string
	C         *shardcounter.Counter
	Of        time.Time
}

// ListCounters lists the counters in id order, which is key order
// (Escape keeps it), a page of records at a time.
func (r *Reads) ListCounters(ctx context.Context, prefix, after string, limit int) ([]*shardcounter.Counter, error) {
	if limit <= 0 {
		limit = shardcounter.DefaultListLimit
	}
	from, incl := "", false
	switch {
	case after >= prefix && after != "":
		from = Escape(after)
	case prefix != "":
		from, incl = Escape(prefix), true
	}
	var out []*shardcounter.Counter
	for len(out) < limit {
		page := limit - len(out) + 8 // a few to spare for records not of ours
		rs, err := r.CounterPage(ctx, from, incl, page)
		if err != nil {
			return nil, err
		}
		for _, rec := range rs {
			if rec.Name == "" || rec.C == nil {
				continue // not a record of ours
			}
			if !strings.HasPrefix(rec.Name, prefix) || len(out) == limit {
				return out, nil
			}
			out = append(out, rec.C)
		}
		if len(rs) < page {
			break
		}
		from, incl = rs[len(rs)-1].Key, false
	}
	return out, nil
}

// IsMember reads the member's record with the counter's, one snapshot.
func (r *Reads) IsMember(ctx context.Context, id, member string) (bool, error) {
	if err := shardcounter.ValidateID("member", member); err != nil {
		return false, err
	}
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return false, err
	}
	c, of, found, err := r.Member(ctx, id, member)
	if err != nil {
		return false, err
	}
	if KindOf(c.Spec) != shardcounter.KindDistinct {
		return false, HasNoMembers(id, c.Spec.Kind)
	}
	return found && of.Equal(c.CreatedAt), nil
}

// ListMembers lists a distinct counter's members in member order, which
// is key order, a page of records at a time.
func (r *Reads) ListMembers(ctx context.Context, id, after string, limit int) ([]string, error) {
	c, err := r.Meta(ctx, id)
	if err != nil {
		return nil, err
	}
	if KindOf(c.Spec) != shardcounter.KindDistinct {
		return nil, HasNoMembers(c.ID, c.Spec.Kind)
	}
	if limit <= 0 {
		limit = shardcounter.DefaultListLimit
	}
	return r.members(ctx, c.ID, c.CreatedAt, after, limit)
}

// Members lists every member of counter id, the one created at created:
// what a reshard counts again per shard. Its reads follow the shards' in
// the reshard's snapshot, so that a member added after them changes a
// shard the reshard then fails to write over.
func (r *Reads) Members(ctx context.Context, id string, created time.Time) ([]string, error) {
	return r.members(ctx, id, created, "", math.MaxInt)
}

// members lists up to limit members of counter id, the one created at
// created, after member after, a page of records at a time.
func (r *Reads) members(ctx context.Context, id string, created time.Time, after string, limit int) ([]string, error) {
	from := ""
	if after != "" {
		from = Escape(after)
	}
	var out []string
	for len(out) < limit {
		page := min(limit-len(out), 1000)
		rs, err := r.MemberPage(ctx, id, from, page)
		if err != nil {
			return nil, err
		}
		for _, rec := range rs {
			if rec.Name != "" && rec.Of.Equal(created) { // else not a member of this incarnation of the counter
				out = append(out, rec.Name)
			}
		}
		if len(rs) < page {
			break
		}
		from = rs[len(rs)-1].Key
	}
	return out, nil
}
