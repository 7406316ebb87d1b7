package firestore

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// GetCounter returns the counter's metadata.
func (s *CounterStore) GetCounter(ctx context.Context, id string) (*shardcounter.Counter, error) {
	m, err := s.getMeta(ctx, id)
	if err != nil {
		return nil, err
	}
	return m.counter(id), nil
}

func (s *CounterStore) getMeta(ctx context.Context, id string) (meta, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return meta{}, err
	}
	snap, err := s.counterRef(id).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return meta{}, shardcounter.CounterNotFound(id)
	}
	if err != nil {
		return meta{}, readError("read counter", err)
	}
	return decodeMeta(snap)
}

// snapshot is counters read at one moment: each one's metadata beside
// the shared reading.
type snapshot struct {
	docstore.Snapshot
	metas map[string]meta
}

// snap is read for docstore.Reads.
func (s *CounterStore) snap(ctx context.Context, ids []string) (*docstore.Snapshot, error) {
	sn, err := s.read(ctx, ids)
	if err != nil {
		return nil, err
	}
	return &sn.Snapshot, nil
}

// read reads the counters and all their shards in one snapshot
// (getSnapshot, two round trips): the counter documents and the shards the
// store expects them to have: as its writes left them, or as its last
// read found them (shardsSeen). When a counter turns out to have
// another shard count (resharded since, or not read before), it reads
// again, all of them in one call, so the result is always one snapshot.
// Missing counters are absent from metas.
func (s *CounterStore) read(ctx context.Context, ids []string) (*snapshot, error) {
	guess := make(map[string]int, len(ids))
	for _, id := range ids {
		if st, ok := s.cache.Peek(id); ok {
			guess[id] = st.meta.spec.Shards
		} else if n, ok := s.shardsSeen.Peek(id); ok {
			guess[id] = n
		}
	}
	for range 50 { // each a snapshot: only a reshard between two makes another
		var paths []string
		for _, id := range ids {
			ref := s.counterRef(id)
			paths = append(paths, ref.Path)
			for i := range guess[id] {
				paths = append(paths, shardRef(ref, i).Path)
			}
		}
		snaps, err := s.getSnapshot(ctx, paths)
		if err != nil {
			return nil, readError("read counters", err)
		}
		sn := &snapshot{metas: make(map[string]meta), Snapshot: docstore.Snapshot{Counters: make(map[string]*shardcounter.Counter), Values: make(map[string][]int64), Sketches: make(map[string][][]byte)}}
		again := false
		k := 0
		for _, id := range ids {
			c := snaps[k]
			k++
			if sn.At.Before(c.read) {
				sn.At = c.read
			}
			if !c.exists {
				k += guess[id]
				s.shardsSeen.Remove(id)
				continue
			}
			m, err := metaOf(c.path, c.fields, c.created, c.updated)
			if err != nil {
				return nil, err
			}
			if m.spec.Shards != guess[id] {
				k += guess[id]
				guess[id] = m.spec.Shards
				again = true
				continue
			}
			vals := make([]int64, guess[id])
			var sks [][]byte
			if isApprox(m.spec) {
				sks = make([][]byte, guess[id])
				sn.Sketches[id] = sks
			}
			for i := range vals {
				vals[i], _ = snaps[k].fields[s.field].(int64)
				if sks != nil {
					sks[i], _ = snaps[k].fields[fieldSketch].([]byte)
				}
				k++
			}
			sn.metas[id], sn.Values[id], sn.Counters[id] = m, vals, m.counter(id)
		}
		if !again {
			for id, m := range sn.metas {
				s.shardsSeen.Add(id, m.spec.Shards)
			}
			return sn, nil
		}
	}
	return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "firestore: counters kept being resharded while read; try again")
}

// counterPage reads a page of counter documents in document-id order,
// which is id order (Escape keeps it), for docstore.Reads.ListCounters.
func (s *CounterStore) counterPage(ctx context.Context, from string, incl bool, n int) ([]docstore.Listed, error) {
	col := s.client.Collection(countersCollection)
	return s.page(ctx, "list counters", col, from, incl, n, func(d *firestore.DocumentSnapshot, l *docstore.Listed) {
		if m, err := decodeMeta(d); err == nil {
			l.C = m.counter(l.Name)
		}
	})
}

// memberPage reads a page of a counter's member documents in
// document-id order, which is member order.
func (s *CounterStore) memberPage(ctx context.Context, id, after string, n int) ([]docstore.Listed, error) {
	col := s.counterRef(id).Collection(membersCollection)
	return s.page(ctx, "list members", col, after, false, n, func(d *firestore.DocumentSnapshot, l *docstore.Listed) {
		l.Of, _ = d.Data()[fieldOf].(time.Time)
	})
}

// page reads up to n documents of col in document-id order from the one
// of id from (after it unless incl), each taken in by f when its id is
// one Escape makes.
func (s *CounterStore) page(ctx context.Context, op string, col *firestore.CollectionRef, from string, incl bool, n int, f func(*firestore.DocumentSnapshot, *docstore.Listed)) ([]docstore.Listed, error) {
	q := col.OrderBy(firestore.DocumentID, firestore.Asc).Limit(n)
	switch {
	case from != "" && incl:
		q = q.Where(firestore.DocumentID, ">=", col.Doc(from))
	case from != "":
		q = q.Where(firestore.DocumentID, ">", col.Doc(from))
	}
	docs, err := q.Documents(ctx).GetAll()
	if err != nil {
		return nil, readError(op, err)
	}
	out := make([]docstore.Listed, len(docs))
	for i, d := range docs {
		out[i].Key = d.Ref.ID
		if name, err := Unescape(d.Ref.ID); err == nil {
			out[i].Name = name
			f(d, &out[i])
		}
	}
	return out, nil
}

// member reads the counter document and the member's in one snapshot,
// for docstore.Reads.IsMember.
func (s *CounterStore) member(ctx context.Context, id, member string) (*shardcounter.Counter, time.Time, bool, error) {
	ref := s.counterRef(id)
	snaps, err := s.getSnapshot(ctx, []string{ref.Path, ref.Collection(membersCollection).Doc(Escape(member)).Path})
	if err != nil {
		return nil, time.Time{}, false, readError("read member", err)
	}
	c := snaps[0]
	if !c.exists {
		return nil, time.Time{}, false, shardcounter.CounterNotFound(id)
	}
	m, err := metaOf(c.path, c.fields, c.created, c.updated)
	if err != nil {
		return nil, time.Time{}, false, err
	}
	of, _ := snaps[1].fields[fieldOf].(time.Time)
	return m.counter(id), of, snaps[1].exists, nil
}

// buckets returns counter id's buckets that start in [from, to), oldest
// first, for docstore.Reads.
func (s *CounterStore) buckets(ctx context.Context, id string, from, to time.Time) ([]docstore.Bucket, error) {
	docs, err := s.counterRef(id).Collection(bucketsCollection).
		Where(fieldStart, ">=", from).Where(fieldStart, "<", to).OrderBy(fieldStart, firestore.Asc).
		Documents(ctx).GetAll()
	if err != nil {
		return nil, readError("read window", err)
	}
	out := make([]docstore.Bucket, len(docs))
	for i, d := range docs {
		out[i] = s.bucketOf(d)
	}
	return out, nil
}

// bucketOf reads a bucket document.
func (s *CounterStore) bucketOf(d *firestore.DocumentSnapshot) docstore.Bucket {
	var b docstore.Bucket
	start, _ := d.Data()[fieldStart].(time.Time)
	b.Start = start.UTC()
	b.Value, _ = d.Data()[s.field].(int64)
	b.Of, _ = d.Data()[fieldOf].(time.Time)
	return b
}
