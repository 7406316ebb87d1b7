package datastore

import (
	"context"
	"errors"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// batch is one attempt of Apply: what its transaction read, and the
// decisions of its last pass over the items.
type batch struct {
	s           *CounterStore
	tx          *datastore.Transaction
	incs        []shardcounter.Increment
	now, cutoff time.Time
	targets     map[string]*target
	order       []string
	reqs        map[requestKey]*ownEntity // nil: no such entity
	members     map[requestKey]*ownEntity

	// decisions of the last pass
	seen     map[requestKey]bool
	recorded int
	records  []requestKey
	sweeps   []*datastore.Key
}

type requestKey struct{ counter, id string }

// target is one counter of the batch.
type target struct {
	id     string
	key    *datastore.Key
	read   bool           // the counter entity was read
	ent    *counterEntity // as read; nil when it does not exist
	guess  *counterEntity // the cached entity, before the read
	err    error
	shards map[int]*shardEntity // shards read (an absent entity is one with exists false)
	bucket *bucketEntity        // the bucket of now, when read
	full   bool                 // writes read every shard and check the total

	// the last pass's decisions
	st      *counterEntity // the entity the items apply to (ent, or the one created)
	create  bool
	touched bool
	vals    []int64
	dirty   map[int]bool
	wide    bool // the commit marks the counter entity wide
	total   int64
	summed  bool
	present map[string]bool // member → present, as the pass leaves it
	bdelta  int64
	// approx counters: what the pass adds to each shard, and the
	// sketches the commit writes.
	approx    map[int]*approxShard
	newSketch map[int][]byte
}

func (s *CounterStore) newBatch(tx *datastore.Transaction, incs []shardcounter.Increment, now time.Time) *batch {
	b := &batch{s: s, tx: tx, incs: incs, now: now, cutoff: now.Add(-time.Duration(s.window.Load())), targets: map[string]*target{},
		reqs: map[requestKey]*ownEntity{}, members: map[requestKey]*ownEntity{}}
	for _, inc := range incs {
		if _, ok := b.targets[inc.Counter]; ok || shardcounter.ValidateID("counter id", inc.Counter) != nil {
			continue
		}
		t := &target{id: inc.Counter, key: s.counterKey(inc.Counter), shards: map[int]*shardEntity{}}
		if g, ok := s.shards.Get(inc.Counter); ok {
			t.guess = g
		}
		b.targets[inc.Counter] = t
		b.order = append(b.order, inc.Counter)
	}
	return b
}

// loads gathers keys and their destinations for one lookup.
type loads struct {
	keys []*datastore.Key
	dsts []any
	done []func(found bool)
}

func (l *loads) add(k *datastore.Key, dst any, done func(found bool)) {
	l.keys = append(l.keys, k)
	l.dsts = append(l.dsts, dst)
	l.done = append(l.done, done)
}

// run reads the keys in the transaction, maxLookup a call.
func (l *loads) run(tx *datastore.Transaction) error { return l.runIn(context.Background(), nil, tx) }

// runIn reads the keys in tx, or outside any transaction with client
// when tx is nil, maxLookup a call.
func (l *loads) runIn(ctx context.Context, client *datastore.Client, tx *datastore.Transaction) error {
	for len(l.keys) > 0 {
		n := min(len(l.keys), maxLookup)
		var err error
		if tx != nil {
			err = tx.GetMulti(l.keys[:n], l.dsts[:n])
		} else {
			err = client.GetMulti(ctx, l.keys[:n], l.dsts[:n])
		}
		var me datastore.MultiError
		if err != nil && !errors.As(err, &me) {
			return txError("read", err)
		}
		for i := range n {
			var e error
			if me != nil {
				e = me[i]
			}
			var fm *datastore.ErrFieldMismatch
			switch {
			case e == nil || errors.As(e, &fm):
				l.done[i](true)
			case errors.Is(e, datastore.ErrNoSuchEntity):
				l.done[i](false)
			default:
				return txError("read", e)
			}
		}
		l.keys, l.dsts, l.done = l.keys[n:], l.dsts[n:], l.done[n:]
	}
	return nil
}

// maxLookup is the most keys one Datastore lookup takes.
const maxLookup = 1000

// readFirst reads, in one lookup, the counter entities, the request ids
// and members of the batch, and the shards and bucket each counter needs
// by the cached guess of its entity; then whatever the entities read show
// to be missing.
func (b *batch) readFirst(ctx context.Context) error {
	var l loads
	for _, id := range b.order {
		t := b.targets[id]
		e := new(counterEntity)
		l.add(t.key, e, func(found bool) {
			t.read = true
			if found {
				if err := e.check(t.key); err != nil {
					t.err = err
				} else {
					t.ent = e
				}
			}
		})
		if t.guess != nil {
			b.wantShards(&l, t, t.guess)
		}
	}
	for _, inc := range b.incs {
		t := b.targets[inc.Counter]
		if t == nil {
			continue
		}
		if inc.RequestID != "" && shardcounter.ValidateID("request id", inc.RequestID) == nil {
			k := requestKey{inc.Counter, inc.RequestID}
			if _, ok := b.reqs[k]; !ok {
				b.reqs[k] = nil
				e := new(ownEntity)
				l.add(childKey(t.key, requestKind, Escape(inc.RequestID)), e, func(found bool) {
					if found {
						b.reqs[k] = e
					}
				})
			}
		}
		if inc.Member != "" && b.wantsMember(t, inc) && shardcounter.ValidateID("member", inc.Member) == nil {
			k := requestKey{inc.Counter, inc.Member}
			if _, ok := b.members[k]; !ok {
				b.members[k] = nil
				e := new(ownEntity)
				l.add(childKey(t.key, memberKind, Escape(inc.Member)), e, func(found bool) {
					if found {
						b.members[k] = e
					}
				})
			}
		}
	}
	if err := l.run(b.tx); err != nil {
		return err
	}
	for _, id := range b.order {
		t := b.targets[id]
		if t.ent != nil {
			t.full = t.ent.full()
			if t.guess == nil || t.guess.NumShards != t.ent.NumShards || t.guess.Wide != t.ent.Wide || !t.guess.CreatedAt.Equal(t.ent.CreatedAt) {
				b.s.shards.Add(id, t.ent)
			}
		} else {
			b.s.shards.Remove(id)
		}
	}
	return b.readShards()
}

// readShards reads the shards and buckets the counters need, by their
// entities as read, that the transaction has not read yet.
func (b *batch) readShards() error {
	var l loads
	for _, id := range b.order {
		if t := b.targets[id]; t.ent != nil {
			if t.bucket != nil && (t.ent.Bucket == 0 || !t.bucket.Start.Equal(t.ent.spec().Window.BucketOf(b.now))) {
				t.bucket = nil // read by a guess of another window
			}
			b.wantShards(&l, t, t.ent)
		}
	}
	return l.run(b.tx)
}

// wantShards adds to l the shards of t that its items need under entity e
// (all of them when its writes check the total), and the bucket of now.
func (b *batch) wantShards(l *loads, t *target, e *counterEntity) {
	n := int(e.NumShards)
	want := map[int]bool{}
	if t.full || e.full() {
		for i := range n {
			want[i] = true
		}
	} else {
		for _, inc := range b.incs {
			if inc.Counter != t.id {
				continue
			}
			pick := inc.Pick
			if inc.Member != "" {
				pick = shard.ForMember(inc.Member)
			}
			want[shard.Of(pick, n)] = true
		}
	}
	for i := range want {
		if _, ok := t.shards[i]; ok {
			continue
		}
		se := &shardEntity{}
		t.shards[i] = se
		l.add(b.s.ShardKey(t.id, i), se, func(bool) {})
	}
	if e.Bucket > 0 && t.bucket == nil {
		start := e.spec().Window.BucketOf(b.now).Unix()
		be := &bucketEntity{Start: time.Unix(start, 0).UTC()}
		t.bucket = be
		l.add(childKey(t.key, bucketKind, bucketName(start)), be, func(found bool) {
			if !found {
				be.Count = 0
			}
		})
	}
}

// decide makes one pass over the items on what the transaction read. It
// returns more when a counter turned out to need its total checked (a
// shard would leave its zone): its shards are then read and the pass made
// again.
func (b *batch) decide(incs []shardcounter.Increment, out []shardcounter.Outcome) (more bool, err error) {
	clear(out)
	b.seen, b.recorded, b.records = map[requestKey]bool{}, 0, nil
	for _, t := range b.targets {
		t.st, t.create, t.touched, t.vals, t.dirty, t.wide, t.summed, t.present, t.bdelta = nil, false, false, nil, map[int]bool{}, false, false, map[string]bool{}, 0
		t.approx, t.newSketch = nil, map[int][]byte{}
		if t.ent != nil {
			t.st = t.ent
			t.vals = make([]int64, t.ent.NumShards)
			for i, se := range t.shards {
				if i < len(t.vals) {
					t.vals[i] = se.Count
				}
			}
		}
	}
	for i, inc := range incs {
		if full := b.apply(inc, &out[i]); full != nil {
			full.full = true // a counter the batch creates has every shard known, at 0
			return true, nil
		}
	}
	return false, b.decideSketches()
}

// apply decides one item, or sets why it fails in o. It returns the target
// when the item needs the counter's total checked and the counter is not
// yet read so.
func (b *batch) apply(inc shardcounter.Increment, o *shardcounter.Outcome) *target {
	if err := shardcounter.ValidateIncrement(inc); err != nil {
		o.Err = err
		return nil
	}
	t := b.targets[inc.Counter]
	if t.err != nil {
		o.Err = t.err
		return nil
	}
	if t.st == nil {
		if inc.Create == nil {
			o.Err = shardcounter.CounterNotFound(inc.Counter)
			return nil
		}
		spec := *inc.Create
		if err := shardcounter.ValidateIncrementKind(inc, kindOf(spec)); err != nil {
			o.Err = err
			return nil
		}
		t.st, t.create = newCounterEntity(inc.Counter, spec, b.now.UTC().Truncate(time.Microsecond)), true
		t.vals = make([]int64, spec.Shards)
		t.full = t.full || t.st.full()
	}
	if o.Err = shardcounter.ValidateIncrementKind(inc, shardcounter.Kind(t.st.Kind)); o.Err != nil {
		return nil
	}
	var rk requestKey
	if inc.RequestID != "" {
		rk = requestKey{inc.Counter, inc.RequestID}
		if b.seen[rk] || b.duplicate(rk, t.st) {
			o.Duplicate = true
			return nil
		}
	}
	n := int(t.st.NumShards)
	pick := inc.Pick
	if inc.Member != "" {
		pick = shard.ForMember(inc.Member)
	}
	if isApprox(t.st.Kind) {
		b.takeApprox(t, shard.Of(pick, n), inc, rk, o)
		return nil
	}
	if inc.Member != "" && b.memberUnchanged(t, inc) {
		o.Unchanged = true
		t.touched = true
		b.record(rk)
		return nil
	}
	k := shard.Of(pick, n)
	v, ok := overflow.Add(t.vals[k], inc.Delta)
	if t.full {
		if !t.summed {
			t.total, _ = overflow.Sum(t.vals)
			t.summed = true
		}
		sum, sumOK := overflow.Add(t.total, inc.Delta)
		if !sumOK {
			o.Err = outOfRange(inc)
			return nil
		}
		if err := bounds(inc.Counter, t.st.spec(), inc.Delta, sum); err != nil {
			o.Err = err
			return nil
		}
		if !ok && inc.Member == "" {
			k = roomFor(t.vals, inc.Delta) // the total has room, so some shard has
			v, ok = t.vals[k]+inc.Delta, true
		}
		if !ok {
			o.Err = outOfRange(inc)
			return nil
		}
		t.total = sum
		if v > zone(n) || v < -zone(n) {
			t.wide = true
		}
	} else if !ok || v > zone(n) || v < -zone(n) {
		return t
	}
	if t.st.Bucket > 0 && t.bucket != nil && !t.create {
		if _, ok := overflow.Add(t.bucket.Count+t.bdelta, inc.Delta); !ok {
			o.Err = outOfRange(inc)
			return nil
		}
	}
	t.touched = true
	t.vals[k] = v
	t.dirty[k] = true
	if inc.Member != "" {
		t.present[inc.Member] = inc.Delta > 0
	}
	t.bdelta += inc.Delta
	b.record(rk)
	return nil
}

// memberUnchanged reports whether a member item leaves its member as it
// is: an add of one present, a removal of one absent, as the pass has
// left it so far.
func (b *batch) memberUnchanged(t *target, inc shardcounter.Increment) bool {
	present, ok := t.present[inc.Member]
	if !ok {
		me := b.members[requestKey{inc.Counter, inc.Member}]
		present = me != nil && me.Of.Equal(t.st.CreatedAt)
	}
	return present == (inc.Delta > 0)
}

func roomFor(vals []int64, delta int64) int {
	for i, v := range vals {
		if _, ok := overflow.Add(v, delta); ok {
			return i
		}
	}
	panic("datastore: no shard has room for a write the total has room for")
}

// duplicate reports whether the request id was recorded for this
// incarnation of the counter within the dedupe window.
func (b *batch) duplicate(k requestKey, st *counterEntity) bool {
	e := b.reqs[k]
	return e != nil && e.At.After(b.cutoff) && e.Of.Equal(st.CreatedAt)
}

func (b *batch) record(k requestKey) {
	if k.id == "" {
		return
	}
	b.seen[k] = true
	b.recorded++
	b.records = append(b.records, k)
}

func outOfRange(inc shardcounter.Increment) error {
	return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it outside the int64 range", inc.Counter, inc.Delta)
}

// bounds refuses a write that would take a bounded counter's total to
// sum, outside its Min and Max.
func bounds(id string, spec shardcounter.Spec, delta, sum int64) error {
	if spec.Min != nil && sum < *spec.Min {
		return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it to %d, below its min %d", id, delta, sum, *spec.Min)
	}
	if spec.Max != nil && sum > *spec.Max {
		return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it to %d, above its max %d", id, delta, sum, *spec.Max)
	}
	return nil
}
