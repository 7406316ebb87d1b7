package firestore

import (
	"context"
	"errors"
	"math"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// errConflict is an attempt whose reads were out of date at its commit
// (a precondition failed, a document it would create existed) or that
// Firestore aborted for contention: nothing was applied, and the batch is
// tried again on fresh reads.
var errConflict = errors.New("firestore: conflict")

// errFull is an attempt that found a counter whose total must be checked
// over every shard: it starts again at once, reading them all.
var errFull = errors.New("firestore: counter needs its total")

// Add adds delta to shard pick mod n: the seed's increment, one commit of
// one shard document (see Apply).
func (s *CounterStore) Add(ctx context.Context, id string, delta int64, pick uint64) error {
	out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: delta, Pick: pick}})
	if err != nil {
		return err
	}
	return out[0].Err
}

// Apply applies the batch in one Firestore commit: the shard documents'
// new values, each write stating the version it was decided on as its
// precondition, with the request ids, members and buckets of the batch
// beside them. A conflict (a precondition that no longer holds) applies
// nothing; the batch is decided again on fresh reads and committed again,
// with backoff, and counted in Stats.Conflicts. A batch whose commit
// would pass Firestore's 10 MiB is split between counters, a commit a
// part (docstore.Split).
func (s *CounterStore) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	return docstore.Split(ctx, "firestore", incs, s.commitLimit, s.applyWhole)
}

// applyWhole applies the batch in one commit (see Apply), or refuses it,
// nothing sent, with a *docstore.TooLarge when the commit would pass
// limit (0 for none).
func (s *CounterStore) applyWhole(ctx context.Context, incs []shardcounter.Increment, limit int) ([]shardcounter.Outcome, error) {
	out := make([]shardcounter.Outcome, len(incs))
	if len(incs) == 0 {
		return out, nil
	}
	m := docstore.NewMarker[sentAttempt]("firestore", incs)
	r := docstore.Attempts[sentAttempt]{Store: "firestore", Stats: s.Stats(), Marker: m, Conflict: errConflict, Again: errFull, Done: s.settled,
		Try: func() (int, bool, error) {
			n, err := s.applyOnce(ctx, incs, out, m, limit)
			return n, false, err
		},
		Get: func(ctx context.Context) (int64, bool, error) { return markerAttempt(ctx, s.markerRef(m)) },
	}
	recorded, err := r.Run(ctx, out)
	if err != nil {
		return nil, err
	}
	s.expire(ctx, recorded)
	return out, nil
}

// target is one counter of a batch: the view's (docstore.Target), and
// the documents its commit states as preconditions.
type target struct {
	docstore.Target
	id     string
	ref    *firestore.DocumentRef
	st     *counterState // nil while the counter does not exist
	shards map[int]bool  // shards read for the batch
	// bucketWrite is the bucket the commit writes, nil for none.
	bucketWrite *bucketWrite
}

// applyOnce makes one attempt, its commit marked by m (see marker.go); it
// returns how many request ids it recorded, and the marker, on commit. A
// commit that would pass limit is not sent: its error is a
// *docstore.TooLarge.
func (s *CounterStore) applyOnce(ctx context.Context, incs []shardcounter.Increment, out []shardcounter.Outcome, m *marker, limit int) (int, error) {
	clear(out)
	now := s.now()
	targets, order, err := s.targets(ctx, incs, now)
	if err != nil {
		return 0, err
	}
	unlock := s.lockShards(targets, order)
	defer unlock()
	reqs, members, err := s.readForBatch(ctx, incs, targets, order, now)
	if err != nil {
		return 0, err
	}
	if s.ShardWriteInterval() > 0 {
		if err := s.pace(ctx, targets, order); err != nil {
			return 0, err
		}
		now = s.now()
		if err := s.readBuckets(ctx, targets, order, now); err != nil { // now's may be another
			return 0, err
		}
	}
	b := &batchState{s: s, now: now, targets: targets, reqs: reqs, members: members}
	if err := b.decide(incs, out, order); err != nil {
		return 0, err
	}
	if err := s.sweepBuckets(ctx, b, order); err != nil {
		return 0, err
	}
	wb := s.client.Batch() //nolint:staticcheck // the one atomic commit in one round trip; a transaction takes two more
	shardWrites := b.writes(wb, order)
	if len(b.writesList) == 0 {
		return len(b.Records), nil
	}
	b.size.For("")
	mref := s.markerRef(m)
	b.count(mref, markerFields(b.now, m.Attempt+1), nil)
	if err := b.size.Check("firestore", limit); err != nil {
		return 0, err
	}
	m.Attempt++
	wb.Create(mref, markerFields(b.now, m.Attempt))
	m.Send(sentAttempt{b: b, sw: shardWrites, order: order}, out, len(b.Records))
	results, err := wb.Commit(ctx)
	if err != nil {
		for _, id := range order {
			s.cache.Remove(id)
		}
		err = commitError(err)
		if errors.Is(err, errConflict) || shardcounter.IsOutcomeUnknown(err) {
			m.Failed(err) // perhaps after a first send applied it
		}
		return 0, err
	}
	b.committed(results, shardWrites, order)
	return len(b.Records), nil
}

// targets reads the counters of incs that the store does not know yet,
// and decides which shards each batch item needs.
func (s *CounterStore) targets(ctx context.Context, incs []shardcounter.Increment, now time.Time) (map[string]*target, []string, error) {
	targets := make(map[string]*target)
	var order []string
	var missing []*firestore.DocumentRef
	for _, inc := range incs {
		if _, ok := targets[inc.Counter]; ok || shardcounter.ValidateID("counter id", inc.Counter) != nil {
			continue
		}
		t := &target{id: inc.Counter, ref: s.counterRef(inc.Counter), shards: map[int]bool{}}
		targets[inc.Counter] = t
		order = append(order, inc.Counter)
		if st, ok := s.cache.Get(inc.Counter); ok {
			t.st = st.clone()
		} else {
			missing = append(missing, t.ref)
		}
	}
	if len(missing) > 0 {
		snaps, err := s.client.GetAll(ctx, missing)
		if err != nil {
			return nil, nil, readError("read counters", err)
		}
		for _, snap := range snaps {
			id, _ := Unescape(snap.Ref.ID)
			t := targets[id]
			if !snap.Exists() {
				continue
			}
			m, err := decodeMeta(snap)
			if err != nil {
				t.Err = err
				continue
			}
			t.st = &counterState{meta: m, shards: make([]shardState, m.spec.Shards), full: m.spec.Bounded()}
		}
	}
	for _, id := range order {
		if t := targets[id]; t.st != nil && !t.st.full {
			if _, ok := s.fullHint.Load(id); ok {
				t.st.full = true
			}
		}
	}
	for _, id := range order {
		if t := targets[id]; t.st != nil {
			t.shards = docstore.Shards(incs, id, t.st.meta.spec.Shards, t.st.full)
		}
	}
	return targets, order, nil
}

// lockShards takes the in-process locks of the shards the batch reads.
func (s *CounterStore) lockShards(targets map[string]*target, order []string) func() {
	var keys []int
	for _, id := range order {
		t := targets[id]
		for i := range t.shards {
			keys = append(keys, docstore.StripeOf(id, i))
		}
		if t.st == nil { // created by the batch, perhaps: its future shards
			keys = append(keys, docstore.StripeOf(id, 0))
		} else if t.st.meta.spec.Window != nil { // its bucket, which every write of it writes
			keys = append(keys, docstore.StripeOf(id, t.st.meta.spec.Shards))
		}
	}
	return s.Locks.Lock(keys)
}

// readForBatch reads, in one round trip, the shard versions the store
// does not know, the windowed counters' buckets of now it does not know
// (wantBuckets), and the request ids and members of the batch (nil:
// none).
func (s *CounterStore) readForBatch(ctx context.Context, incs []shardcounter.Increment, targets map[string]*target, order []string, now time.Time) (reqs, members map[docstore.Key]*docstore.Own, err error) {
	type slot struct {
		t      *target
		shard  int
		own    map[docstore.Key]*docstore.Own // of a request id or member: k
		k      docstore.Key
		bucket time.Time // of a bucket: its start
	}
	var refs []*firestore.DocumentRef
	var slots []slot
	for _, t := range wantBuckets(targets, order, now) {
		start := t.st.meta.spec.Window.BucketOf(now)
		refs = append(refs, bucketRef(t.ref, start))
		slots = append(slots, slot{t: t, bucket: start})
	}
	for _, id := range order {
		t := targets[id]
		if t.st == nil {
			continue
		}
		for i := range t.shards {
			// An approx shard is read for its sketch, which is not cached.
			if !t.st.shards[i].known || isApprox(t.st.meta.spec) {
				refs = append(refs, shardRef(t.ref, i))
				slots = append(slots, slot{t: t, shard: i})
			}
		}
	}
	reqKeys, memKeys := docstore.Wanted(incs, func(id string) (*shardcounter.Spec, bool) {
		if t := targets[id]; t != nil && t.st != nil {
			return &t.st.meta.spec, true
		}
		return nil, targets[id] != nil
	})
	reqs, members = map[docstore.Key]*docstore.Own{}, map[docstore.Key]*docstore.Own{}
	for _, k := range reqKeys {
		refs = append(refs, targets[k.Counter].ref.Collection(requestsCollection).Doc(Escape(k.ID)))
		slots = append(slots, slot{own: reqs, k: k})
	}
	for _, k := range memKeys {
		refs = append(refs, targets[k.Counter].ref.Collection(membersCollection).Doc(Escape(k.ID)))
		slots = append(slots, slot{own: members, k: k})
	}
	if len(refs) == 0 {
		return reqs, members, nil
	}
	snaps, err := s.client.GetAll(ctx, refs)
	if err != nil {
		return nil, nil, readError("read shards", err)
	}
	for i, snap := range snaps {
		sl := slots[i]
		switch {
		case sl.own != nil:
			sl.own[sl.k] = ownOf(snap)
		case !sl.bucket.IsZero():
			sl.t.st.bucket = s.bucketFromSnap(snap, sl.bucket, sl.t.st.meta.created)
		default:
			sh := s.shardFromSnap(snap)
			if sh.n != 0 && sh.n != int64(sl.t.st.meta.spec.Shards) {
				// A reshard committed after the shard count was cached: the
				// shard's version is fresh, so its precondition alone would
				// let a member be counted on the old count's shard.
				s.cache.Remove(sl.t.id)
				return nil, nil, errConflict
			}
			sl.t.st.shards[sl.shard] = sh
			if isApprox(sl.t.st.meta.spec) {
				if sl.t.Sketches == nil {
					sl.t.Sketches = make(map[int][]byte)
				}
				sl.t.Sketches[sl.shard] = sketchOf(snap)
			}
			if sl.t.st.shards[sl.shard].wide {
				sl.t.st.full = true
			}
		}
	}
	for _, id := range order {
		if t := targets[id]; t.st != nil && t.st.full && !t.allKnown() {
			s.cache.Add(id, t.st) // remember it is full: the next attempt reads every shard
			return nil, nil, errFull
		}
	}
	return reqs, members, nil
}

// wantBuckets returns the windowed counters among targets whose bucket of
// now the store does not know: a batch decides a write to a windowed
// counter on its bucket's value, as package decide judges it (a write
// that would take it outside int64 is refused), and its commit writes the
// bucket's new value under the update time it was decided on.
func wantBuckets(targets map[string]*target, order []string, now time.Time) []*target {
	var out []*target
	for _, id := range order {
		t := targets[id]
		if t.st == nil || t.st.meta.spec.Window == nil {
			continue
		}
		if !t.st.bucket.start.Equal(t.st.meta.spec.Window.BucketOf(now)) {
			out = append(out, t)
		}
	}
	return out
}

// readBuckets reads the buckets of now that wantBuckets names, in one
// round trip when there are any: after a pace moved the batch's time.
func (s *CounterStore) readBuckets(ctx context.Context, targets map[string]*target, order []string, now time.Time) error {
	ts := wantBuckets(targets, order, now)
	if len(ts) == 0 {
		return nil
	}
	refs := make([]*firestore.DocumentRef, len(ts))
	for i, t := range ts {
		refs[i] = bucketRef(t.ref, t.st.meta.spec.Window.BucketOf(now))
	}
	snaps, err := s.client.GetAll(ctx, refs)
	if err != nil {
		return readError("read window buckets", err)
	}
	for i, t := range ts {
		t.st.bucket = s.bucketFromSnap(snaps[i], t.st.meta.spec.Window.BucketOf(now), t.st.meta.created)
	}
	return nil
}

// bucketFromSnap reads a bucket document's value and version, as the
// bucket of the counter created at created: one another counter of the
// id left (docstore.Owned) holds 0, and the batch's write replaces it
// under its update time.
func (s *CounterStore) bucketFromSnap(snap *firestore.DocumentSnapshot, start, created time.Time) bucketState {
	if snap == nil || !snap.Exists() {
		return bucketState{start: start}
	}
	bs := bucketState{start: start, ut: snap.UpdateTime, exists: true}
	if b := s.bucketOf(snap); docstore.Owned(b.Of, created) {
		bs.value = b.Value
	}
	return bs
}

func (t *target) allKnown() bool {
	for _, sh := range t.st.shards {
		if !sh.known {
			return false
		}
	}
	return true
}

func sameTime(v any, t time.Time) bool {
	u, ok := v.(time.Time)
	return ok && u.Equal(t)
}

// ownOf reads a request id's or a member's document; nil when there is
// none.
func ownOf(snap *firestore.DocumentSnapshot) *docstore.Own {
	if snap == nil || !snap.Exists() {
		return nil
	}
	o := &docstore.Own{Version: snap.UpdateTime}
	o.Of, _ = snap.Data()[fieldOf].(time.Time)
	o.At, _ = snap.Data()[fieldAt].(time.Time)
	return o
}

// shardFromSnap reads a shard document's value and version.
func (s *CounterStore) shardFromSnap(snap *firestore.DocumentSnapshot) shardState {
	if !snap.Exists() {
		return shardState{known: true}
	}
	d := snap.Data()
	v, _ := d[s.field].(int64)
	wide, _ := d[fieldWide].(bool)
	n, _ := d[fieldNumShards].(int64)
	by, _ := d[fieldBy].(string)
	return shardState{value: v, ut: snap.UpdateTime, exists: true, known: true, wide: wide, n: n, mine: by == s.writer}
}

// fieldWide marks every shard of a counter whose shards are not all
// within ±MaxInt64/n: writes to it check its total (see the package doc).
const fieldWide = "sc_wide"

// fieldBy names the store (one a process, random) that last committed a
// shard document: its own commits are the engine's to pace, another's
// the store's (see pace).
const fieldBy = docstore.PropBy

// zone is the bound within which every shard of a counter of n shards
// keeps its total in int64.
func zone(n int) int64 { return math.MaxInt64 / int64(n) }

// commitError maps a failed commit. Firestore commits atomically: a
// refused precondition, an existing document or an abort applied nothing;
// a commit cut off on the way may have been applied.
func commitError(err error) error {
	switch status.Code(err) {
	case codes.FailedPrecondition, codes.AlreadyExists, codes.NotFound, codes.Aborted:
		return errConflict
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.ResourceExhausted:
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "firestore: commit refused, nothing applied: %v", status.Convert(err).Message())
	}
	return shardcounter.OutcomeUnknownf("firestore: commit failed (%v)", err)
}
