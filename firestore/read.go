package firestore

import (
	"context"
	"errors"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
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

// read reads the counters and all their shards in one read-only
// transaction (getSnapshot): the counter documents and the shards the
// store expects them to have. When a counter turns out to have
// another shard count (resharded since), it reads again, all of them in
// one call, so the result is always one snapshot. Missing counters are
// absent from metas.
func (s *CounterStore) read(ctx context.Context, ids []string) (*snapshot, error) {
	guess := make(map[string]int, len(ids))
	for _, id := range ids {
		if st, ok := s.cache.Peek(id); ok {
			guess[id] = st.meta.spec.Shards
		}
	}
	for range 50 { // each a snapshot: only a reshard between two makes another
		var refs []*firestore.DocumentRef
		for _, id := range ids {
			ref := s.counterRef(id)
			refs = append(refs, ref)
			for i := range guess[id] {
				refs = append(refs, shardRef(ref, i))
			}
		}
		snaps, err := s.getSnapshot(ctx, refs)
		if err != nil {
			return nil, readError("read counters", err)
		}
		sn := &snapshot{metas: make(map[string]meta), Snapshot: docstore.Snapshot{Counters: make(map[string]*shardcounter.Counter), Values: make(map[string][]int64), Sketches: make(map[string][][]byte)}}
		again := false
		k := 0
		for _, id := range ids {
			c := snaps[k]
			k++
			if sn.At.Before(c.ReadTime) {
				sn.At = c.ReadTime
			}
			if !c.Exists() {
				k += guess[id]
				continue
			}
			m, err := decodeMeta(c)
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
				vals[i] = s.shardFromSnap(snaps[k]).value
				if sks != nil {
					sks[i] = sketchOf(snaps[k])
				}
				k++
			}
			sn.metas[id], sn.Values[id], sn.Counters[id] = m, vals, m.counter(id)
		}
		if !again {
			return sn, nil
		}
	}
	return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "firestore: counters kept being resharded while read; try again")
}

// getSnapshot reads the documents as of one moment, in a read-only
// transaction. A BatchGetDocuments outside a transaction is not one
// snapshot: the emulator answered one with part of a commit (a counter
// bounded to [0, 8] read as -1), and Google's client asks again for the
// documents a broken stream had not sent yet, at a later moment. The
// transaction costs two more round trips (begin and commit), which the
// Go client does not let a BatchGetDocuments save by beginning it.
func (s *CounterStore) getSnapshot(ctx context.Context, refs []*firestore.DocumentRef) ([]*firestore.DocumentSnapshot, error) {
	var snaps []*firestore.DocumentSnapshot
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		var err error
		snaps, err = tx.GetAll(refs)
		return err
	}, firestore.ReadOnly)
	return snaps, err
}

// ListCounters lists counter documents in document-id order, which is id
// order (Escape keeps it).
func (s *CounterStore) ListCounters(ctx context.Context, prefix, after string, limit int) ([]*shardcounter.Counter, error) {
	if limit <= 0 {
		limit = shardcounter.DefaultListLimit
	}
	col := s.client.Collection(countersCollection)
	q := col.OrderBy(firestore.DocumentID, firestore.Asc)
	switch {
	case after >= prefix && after != "":
		q = q.Where(firestore.DocumentID, ">", col.Doc(Escape(after)))
	case prefix != "":
		q = q.Where(firestore.DocumentID, ">=", col.Doc(Escape(prefix)))
	}
	it := q.Documents(ctx)
	defer it.Stop()
	var out []*shardcounter.Counter
	for len(out) < limit {
		snap, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, readError("list counters", err)
		}
		id, err := Unescape(snap.Ref.ID)
		if err != nil {
			continue // not a document of ours
		}
		if !strings.HasPrefix(id, prefix) {
			break
		}
		m, err := decodeMeta(snap)
		if err != nil {
			continue
		}
		out = append(out, m.counter(id))
	}
	return out, nil
}

// IsMember reads the member's document with the counter's, one snapshot.
func (s *CounterStore) IsMember(ctx context.Context, id, member string) (bool, error) {
	if err := shardcounter.ValidateID("member", member); err != nil {
		return false, err
	}
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return false, err
	}
	ref := s.counterRef(id)
	snaps, err := s.getSnapshot(ctx, []*firestore.DocumentRef{ref, ref.Collection(membersCollection).Doc(Escape(member))})
	if err != nil {
		return false, readError("read member", err)
	}
	if !snaps[0].Exists() {
		return false, shardcounter.CounterNotFound(id)
	}
	m, err := decodeMeta(snaps[0])
	if err != nil {
		return false, err
	}
	if kindOf(m.spec) != shardcounter.KindDistinct {
		return false, docstore.HasNoMembers(id, m.spec.Kind)
	}
	return snaps[1].Exists() && sameTime(snaps[1].Data()[fieldOf], m.created), nil
}

// ListMembers lists member documents in document-id order, which is
// member order.
func (s *CounterStore) ListMembers(ctx context.Context, id, after string, limit int) ([]string, error) {
	m, err := s.getMeta(ctx, id)
	if err != nil {
		return nil, err
	}
	if kindOf(m.spec) != shardcounter.KindDistinct {
		return nil, docstore.HasNoMembers(id, m.spec.Kind)
	}
	if limit <= 0 {
		limit = shardcounter.DefaultListLimit
	}
	col := s.counterRef(id).Collection(membersCollection)
	q := col.OrderBy(firestore.DocumentID, firestore.Asc)
	if after != "" {
		q = q.Where(firestore.DocumentID, ">", col.Doc(Escape(after)))
	}
	it := q.Documents(ctx)
	defer it.Stop()
	var out []string
	for len(out) < limit {
		snap, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, readError("list members", err)
		}
		member, err := Unescape(snap.Ref.ID)
		if err != nil || !sameTime(snap.Data()[fieldOf], m.created) {
			continue // not a member of this incarnation of the counter
		}
		out = append(out, member)
	}
	return out, nil
}

// buckets returns a windowed counter's buckets that start in [from, to),
// oldest first, with the counter.
func (s *CounterStore) buckets(ctx context.Context, id string, from, to time.Time) (*shardcounter.Counter, []shardcounter.Bucket, error) {
	m, err := s.getMeta(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if m.spec.Window == nil {
		return nil, nil, shardcounter.CounterHasNoWindow(id)
	}
	docs, err := s.counterRef(id).Collection(bucketsCollection).
		Where(fieldStart, ">=", from).Where(fieldStart, "<", to).OrderBy(fieldStart, firestore.Asc).
		Documents(ctx).GetAll()
	if err != nil {
		return nil, nil, readError("read window", err)
	}
	var out []shardcounter.Bucket
	for _, d := range docs {
		start, _ := d.Data()[fieldStart].(time.Time)
		v, _ := d.Data()[s.field].(int64)
		if v != 0 {
			out = append(out, shardcounter.Bucket{Start: start.UTC(), Value: v})
		}
	}
	return m.counter(id), out, nil
}
