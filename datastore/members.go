package datastore

import (
	"context"
	"errors"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// member reads the counter entity and the member's in one lookup, for
// docstore.Reads.IsMember.
func (s *CounterStore) member(ctx context.Context, id, member string) (*shardcounter.Counter, time.Time, bool, error) {
	ck := s.counterKey(id)
	var e counterEntity
	var m ownEntity
	err := s.client.GetMulti(ctx, []*datastore.Key{ck, childKey(ck, memberKind, Escape(member))}, []any{&e, &m})
	var me datastore.MultiError
	if err != nil && !errors.As(err, &me) {
		return nil, time.Time{}, false, readError("read member", err)
	}
	if me != nil {
		var fm *datastore.ErrFieldMismatch
		switch {
		case errors.Is(me[0], datastore.ErrNoSuchEntity):
			return nil, time.Time{}, false, shardcounter.CounterNotFound(id)
		case me[0] != nil && !errors.As(me[0], &fm):
			return nil, time.Time{}, false, readError("read member", me[0])
		case me[1] != nil && !errors.Is(me[1], datastore.ErrNoSuchEntity):
			return nil, time.Time{}, false, readError("read member", me[1])
		}
	}
	if err := e.check(ck); err != nil {
		return nil, time.Time{}, false, err
	}
	return e.counter(id), m.Of, me == nil || me[1] == nil, nil
}

// memberPage reads a page of a counter's member entities in key order,
// which is member order.
func (s *CounterStore) memberPage(ctx context.Context, id, after string, n int) ([]docstore.Listed, error) {
	ck := s.counterKey(id)
	q := datastore.NewQuery(memberKind).Namespace(s.namespace).Ancestor(ck).Order("__key__").Limit(n)
	if after != "" {
		q = q.FilterField("__key__", ">", childKey(ck, memberKind, after))
	}
	var ms []ownEntity
	keys, err := s.client.GetAll(ctx, q, &ms)
	if err != nil {
		return nil, readError("list members", err)
	}
	out := make([]docstore.Listed, len(keys))
	for i, k := range keys {
		out[i] = docstore.Listed{Key: k.Name, Of: ms[i].Of}
		out[i].Name, _ = Unescape(k.Name)
	}
	return out, nil
}

// buckets returns counter id's buckets that start in [from, to), oldest
// first, for docstore.Reads: a key range of its bucket entities.
func (s *CounterStore) buckets(ctx context.Context, id string, from, to time.Time) ([]docstore.Bucket, error) {
	ck := s.counterKey(id)
	lo := from.Unix()
	if from.After(time.Unix(lo, 0)) {
		lo++ // a bucket starts on a whole second
	}
	hi := to.Unix()
	if to.After(time.Unix(hi, 0)) {
		hi++
	}
	q := datastore.NewQuery(bucketKind).Namespace(s.namespace).Ancestor(ck).
		FilterField("__key__", ">=", childKey(ck, bucketKind, bucketName(lo))).
		FilterField("__key__", "<", childKey(ck, bucketKind, bucketName(hi))).Order("__key__")
	var bs []bucketEntity
	if _, err := s.client.GetAll(ctx, q, &bs); err != nil {
		return nil, readError("read window", err)
	}
	out := make([]docstore.Bucket, len(bs))
	for i, b := range bs {
		out[i] = docstore.Bucket{Bucket: shardcounter.Bucket{Start: b.Start.UTC(), Value: b.Count}, Of: b.Of}
	}
	return out, nil
}
