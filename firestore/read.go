package firestore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
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

// snapshot is counters read at one moment: each one's metadata and shard
// values.
type snapshot struct {
	metas  map[string]meta
	values map[string][]int64
	// sketches are an approx counter's shards' sketches (its values are
	// 0: shardValues turns them into estimates).
	sketches map[string][][]byte
	at       time.Time
}

// read reads the counters and all their shards in one BatchGetDocuments,
// which Firestore answers as of one moment: the counter documents and the
// shards the store expects them to have. When a counter turns out to have
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
	for range 10 {
		var refs []*firestore.DocumentRef
		for _, id := range ids {
			ref := s.counterRef(id)
			refs = append(refs, ref)
			for i := range guess[id] {
				refs = append(refs, shardRef(ref, i))
			}
		}
		snaps, err := s.client.GetAll(ctx, refs)
		if err != nil {
			return nil, readError("read counters", err)
		}
		sn := &snapshot{metas: make(map[string]meta), values: make(map[string][]int64), sketches: make(map[string][][]byte)}
		again := false
		k := 0
		for _, id := range ids {
			c := snaps[k]
			k++
			if sn.at.Before(c.ReadTime) {
				sn.at = c.ReadTime
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
				sn.sketches[id] = sks
			}
			for i := range vals {
				vals[i] = s.shardFromSnap(snaps[k]).value
				if sks != nil {
					sks[i] = sketchOf(snaps[k])
				}
				k++
			}
			sn.metas[id], sn.values[id] = m, vals
		}
		if !again {
			return sn, nil
		}
	}
	return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "firestore: counters kept being resharded while read; try again")
}

// ReadCounter sums the counter's shards, read in one round trip with its
// document (one snapshot: linearizable).
func (s *CounterStore) ReadCounter(ctx context.Context, id string) (*shardcounter.Reading, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	rs, err := s.ReadCounters(ctx, []string{id})
	if err != nil {
		return nil, err
	}
	if rs[0] == nil {
		return nil, shardcounter.CounterNotFound(id)
	}
	return rs[0], nil
}

// ReadCounters reads many counters in one round trip, one snapshot.
func (s *CounterStore) ReadCounters(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	if err := shardcounter.CheckReadBatch(len(ids)); err != nil {
		return nil, err
	}
	out := make([]*shardcounter.Reading, len(ids))
	var uniq []string
	seen := make(map[string]bool)
	for _, id := range ids {
		if !seen[id] && shardcounter.ValidateID("counter id", id) == nil {
			seen[id] = true
			uniq = append(uniq, id)
		}
	}
	if len(uniq) == 0 {
		return out, nil
	}
	sn, err := s.read(ctx, uniq)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		m, ok := sn.metas[id]
		if !ok {
			continue
		}
		v, ok := overflow.Sum(sn.values[id])
		if !ok {
			return nil, shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: its shards sum to more than int64 holds", id)
		}
		if isApprox(m.spec) {
			if v, err = approxValue(id, sn.sketches[id]); err != nil {
				return nil, err
			}
		}
		out[i] = &shardcounter.Reading{ID: id, Value: v, Shards: m.spec.Shards, Consistency: shardcounter.Strong, AsOf: sn.at}
	}
	return out, nil
}

// ReadShards returns the counter and each shard's value, one snapshot.
func (s *CounterStore) ReadShards(ctx context.Context, id string) (*shardcounter.Counter, []int64, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, nil, err
	}
	sn, err := s.read(ctx, []string{id})
	if err != nil {
		return nil, nil, err
	}
	m, ok := sn.metas[id]
	if !ok {
		return nil, nil, shardcounter.CounterNotFound(id)
	}
	vals, err := sn.shardValues(id)
	if err != nil {
		return nil, nil, err
	}
	return m.counter(id), vals, nil
}

// shardValues returns a counter's shard values: an approx counter's are
// each shard's own estimate.
func (sn *snapshot) shardValues(id string) ([]int64, error) {
	if sks, ok := sn.sketches[id]; ok {
		return shardEstimates(id, sks)
	}
	return sn.values[id], nil
}

// Placement names each shard's document as its node: Firestore spreads
// documents over its servers itself.
func (s *CounterStore) Placement(ctx context.Context, id string) (*shardcounter.Placement, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	sn, err := s.read(ctx, []string{id})
	if err != nil {
		return nil, err
	}
	m, ok := sn.metas[id]
	if !ok {
		return nil, shardcounter.CounterNotFound(id)
	}
	p := &shardcounter.Placement{ID: id, Shards: m.spec.Shards, AsOf: sn.at}
	vals, err := sn.shardValues(id)
	if err != nil {
		return nil, err
	}
	for i, v := range vals {
		p.Places = append(p.Places, shardcounter.ShardPlacement{Shard: i, Value: v, Node: s.node(id) + "/shards/" + strconv.Itoa(i)})
	}
	return p, nil
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

// IsMember reads the member's document with the counter's, one round trip.
func (s *CounterStore) IsMember(ctx context.Context, id, member string) (bool, error) {
	if err := shardcounter.ValidateID("member", member); err != nil {
		return false, err
	}
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return false, err
	}
	ref := s.counterRef(id)
	snaps, err := s.client.GetAll(ctx, []*firestore.DocumentRef{ref, ref.Collection(membersCollection).Doc(Escape(member))})
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
		return false, hasNoMembers(id, m.spec)
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
		return nil, hasNoMembers(id, m.spec)
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
func (s *CounterStore) buckets(ctx context.Context, id string, from, to time.Time) (meta, []shardcounter.Bucket, error) {
	m, err := s.getMeta(ctx, id)
	if err != nil {
		return meta{}, nil, err
	}
	if m.spec.Window == nil {
		return meta{}, nil, shardcounter.CounterHasNoWindow(id)
	}
	docs, err := s.counterRef(id).Collection(bucketsCollection).
		Where(fieldStart, ">=", from).Where(fieldStart, "<", to).OrderBy(fieldStart, firestore.Asc).
		Documents(ctx).GetAll()
	if err != nil {
		return meta{}, nil, readError("read window", err)
	}
	var out []shardcounter.Bucket
	for _, d := range docs {
		start, _ := d.Data()[fieldStart].(time.Time)
		v, _ := d.Data()[s.field].(int64)
		if v != 0 {
			out = append(out, shardcounter.Bucket{Start: start.UTC(), Value: v})
		}
	}
	return m, out, nil
}

// ReadWindow sums the buckets that start in [from, to).
func (s *CounterStore) ReadWindow(ctx context.Context, id string, from, to time.Time) (*shardcounter.Reading, error) {
	if !to.After(from) {
		m, err := s.getMetaWindow(ctx, id)
		if err != nil {
			return nil, err
		}
		return s.windowReading(id, m, 0, from, to), nil
	}
	m, bs, err := s.buckets(ctx, id, from, to)
	if err != nil {
		return nil, err
	}
	var sum int64
	for _, b := range bs {
		var ok bool
		if sum, ok = overflow.Add(sum, b.Value); !ok {
			return nil, shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: its window sums to more than int64 holds", id)
		}
	}
	return s.windowReading(id, m, sum, from, to), nil
}

func (s *CounterStore) getMetaWindow(ctx context.Context, id string) (meta, error) {
	m, err := s.getMeta(ctx, id)
	if err == nil && m.spec.Window == nil {
		err = shardcounter.CounterHasNoWindow(id)
	}
	return m, err
}

func (s *CounterStore) windowReading(id string, m meta, v int64, from, to time.Time) *shardcounter.Reading {
	return &shardcounter.Reading{ID: id, Value: v, Shards: m.spec.Shards, Consistency: shardcounter.Strong, AsOf: s.now(), Window: &shardcounter.Interval{From: from, To: to}}
}

// ReadSeries returns the non-zero buckets that start in [from, to).
func (s *CounterStore) ReadSeries(ctx context.Context, id string, from, to time.Time) ([]shardcounter.Bucket, error) {
	if !to.After(from) {
		_, err := s.getMetaWindow(ctx, id)
		return nil, err
	}
	_, bs, err := s.buckets(ctx, id, from, to)
	return bs, err
}
