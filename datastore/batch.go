package datastore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
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
	reqs        map[docstore.Key]*docstore.Own // nil: no such entity
	members     map[docstore.Key]*docstore.Own

	// the view of the last pass over the items, and its decisions
	docstore.View
	sweeps []*datastore.Key
	size   *docstore.Sizes // of the commit's mutations
}

// target is one counter of the batch: the view's (docstore.Target), and
// the entities its transaction read.
type target struct {
	docstore.Target
	id     string
	key    *datastore.Key
	read   bool                 // the counter entity was read
	ent    *counterEntity       // as read; nil when it does not exist
	guess  *counterEntity       // the cached entity, before the read
	shards map[int]*shardEntity // shards read (an absent entity is one with exists false)
	bucket *bucketEntity        // the bucket of now, when read
	full   bool                 // writes read every shard and check the total
	st     *counterEntity       // the entity the items apply to (ent, or the one Decide created)
}

// spec is the spec of t's counter entity for docstore.Wanted: as read
// (false when none was read), or guessed (nil when none), before the
// read; false when t is nil (no counter of a valid id).
func (t *target) spec(read bool) (*shardcounter.Spec, bool) {
	if t == nil || read && t.ent == nil {
		return nil, false
	}
	e := t.guess
	if read {
		e = t.ent
	}
	if e == nil {
		return nil, true
	}
	spec := e.spec()
	return &spec, true
}

func (s *CounterStore) newBatch(tx *datastore.Transaction, incs []shardcounter.Increment, now time.Time) *batch {
	b := &batch{s: s, tx: tx, incs: incs, now: now, cutoff: now.Add(-s.Window()), targets: map[string]*target{},
		reqs: map[docstore.Key]*docstore.Own{}, members: map[docstore.Key]*docstore.Own{}}
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
func (l *loads) run(tx *datastore.Transaction) error {
	for len(l.keys) > 0 {
		n := min(len(l.keys), maxLookup)
		err := tx.GetMulti(l.keys[:n], l.dsts[:n])
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
					t.Err = err
				} else {
					t.ent = e
				}
			}
		})
		if t.guess != nil {
			b.wantShards(&l, t, t.guess)
		}
	}
	reqs, members := docstore.Wanted(b.incs, func(id string) (*shardcounter.Spec, bool) { return b.targets[id].spec(false) })
	for _, k := range reqs {
		b.want(&l, b.reqs, requestKind, k)
	}
	for _, k := range members {
		b.want(&l, b.members, memberKind, k)
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

// readShards reads the shards, buckets and members the counters need, by
// their entities as read, that the transaction has not read yet: the
// first lookup chose them by a guess (the cached entity, or the items'
// Create when none is cached), which the entity may contradict.
func (b *batch) readShards() error {
	var l loads
	for _, id := range b.order {
		if t := b.targets[id]; t.ent != nil {
			if t.bucket != nil && (t.ent.Window == nil || !t.bucket.Start.Equal(t.ent.spec().Window.BucketOf(b.now))) {
				t.bucket = nil // read by a guess of another window
			}
			b.wantShards(&l, t, t.ent)
		}
	}
	_, members := docstore.Wanted(b.incs, func(id string) (*shardcounter.Spec, bool) { return b.targets[id].spec(true) })
	for _, k := range members {
		b.want(&l, b.members, memberKind, k)
	}
	return l.run(b.tx)
}

// want adds to l the entity of k, a request id or a member (kind), to be
// read into m, unless the transaction has read it.
func (b *batch) want(l *loads, m map[docstore.Key]*docstore.Own, kind string, k docstore.Key) {
	if _, ok := m[k]; ok {
		return
	}
	m[k] = nil
	e := new(ownEntity)
	l.add(childKey(b.targets[k.Counter].key, kind, Escape(k.ID)), e, func(found bool) {
		if found {
			m[k] = &docstore.Own{Of: e.Of, At: e.At}
		}
	})
}

// wantShards adds to l the shards of t that its items need under entity e
// (all of them when its writes check the total), and the bucket of now.
func (b *batch) wantShards(l *loads, t *target, e *counterEntity) {
	want := docstore.Shards(b.incs, t.id, int(e.NumShards), t.full || e.full())
	for i := range want {
		if _, ok := t.shards[i]; ok {
			continue
		}
		se := &shardEntity{}
		t.shards[i] = se
		l.add(b.s.ShardKey(t.id, i), se, func(bool) {})
	}
	if e.Window != nil && t.bucket == nil {
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

// decide decides the batch on what the transaction read (the view),
// and makes the entity of a counter it creates. It returns more when a
// counter turned out to need its total checked (a shard would leave its
// zone): its shards are then read and the batch decided again.
func (b *batch) decide(incs []shardcounter.Increment, out []shardcounter.Outcome) (more bool, err error) {
	b.View = docstore.NewView("datastore")
	for _, id := range b.order {
		t := b.targets[id]
		b.Targets[id], t.st = &t.Target, t.ent
		t.Spec, t.Full, t.Vals, t.Sketches, t.Members, t.Bucket = nil, t.full, map[int]int64{}, map[int][]byte{}, map[string]bool{}, nil
		if t.ent == nil {
			continue
		}
		spec := t.ent.spec()
		t.Spec = &spec
		for i, se := range t.shards {
			t.Vals[i], t.Sketches[i] = se.Count, se.Sketch
		}
		if t.bucket != nil { // one another counter of the id left is 0, replaced by the batch's write
			t.Bucket = &shardcounter.Bucket{Start: t.bucket.Start}
			if docstore.Owned(t.bucket.Of, t.ent.CreatedAt) {
				t.Bucket.Value = t.bucket.Count
			}
		}
	}
	b.TakeOwn(b.reqs, b.members, func(id string) time.Time { return b.targets[id].ent.CreatedAt })
	whole, err := b.View.Decide(incs, b.now, b.cutoff, out)
	if len(whole) > 0 {
		for _, id := range whole {
			b.targets[id].full = true
		}
		return true, nil
	}
	if err != nil {
		return false, err
	}
	for _, id := range b.order {
		t := b.targets[id]
		if t.Create {
			t.st = newCounterEntity(id, *t.Spec, b.now.UTC().Truncate(time.Microsecond))
		}
		for _, w := range t.Buckets {
			if !w.Known {
				return false, fmt.Errorf("datastore: counter %q: its bucket decided without its value", id)
			}
		}
	}
	return false, nil
}
