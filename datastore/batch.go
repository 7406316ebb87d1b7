package datastore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
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
	reqs        map[requestKey]*ownEntity // nil: no such entity
	members     map[requestKey]*ownEntity

	// the view of the last pass over the items, and its decisions
	docstore.View
	sweeps []*datastore.Key
	size   *docstore.Sizes // of the commit's mutations
}

type requestKey = docstore.Key

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

func (s *CounterStore) newBatch(tx *datastore.Transaction, incs []shardcounter.Increment, now time.Time) *batch {
	b := &batch{s: s, tx: tx, incs: incs, now: now, cutoff: now.Add(-s.Window()), targets: map[string]*target{},
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
	// The request ids deciding may ask about: a take's also under
	// shardcounter.RefusedRequestID, where a refused take records it.
	for _, r := range decide.Reads(b.incs) {
		t := b.targets[r.Counter]
		if t == nil || r.RequestID == "" {
			continue
		}
		k := requestKey{Counter: r.Counter, ID: r.RequestID}
		if _, ok := b.reqs[k]; !ok {
			b.reqs[k] = nil
			e := new(ownEntity)
			l.add(childKey(t.key, requestKind, Escape(r.RequestID)), e, func(found bool) {
				if found {
					b.reqs[k] = e
				}
			})
		}
	}
	for _, inc := range b.incs {
		t := b.targets[inc.Counter]
		if t == nil {
			continue
		}
		if b.wantsMember(t, inc) {
			b.wantMember(&l, t, inc.Member)
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
	for _, inc := range b.incs {
		if t := b.targets[inc.Counter]; t != nil && t.ent != nil && !isApprox(t.ent.Kind) {
			b.wantMember(&l, t, inc.Member)
		}
	}
	return l.run(b.tx)
}

// wantMember adds to l the entity of t's member, unless the transaction
// has read it, or it is no member (none, or invalid: the item fails).
func (b *batch) wantMember(l *loads, t *target, member string) {
	if member == "" || shardcounter.ValidateID("member", member) != nil {
		return
	}
	k := requestKey{Counter: t.id, ID: member}
	if _, ok := b.members[k]; ok {
		return
	}
	b.members[k] = nil
	e := new(ownEntity)
	l.add(childKey(t.key, memberKind, Escape(member)), e, func(found bool) {
		if found {
			b.members[k] = e
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
	b.View = docstore.View{Store: "datastore", Targets: map[string]*docstore.Target{}, Requests: map[docstore.Key]docstore.Request{}}
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
		if t.bucket != nil {
			t.Bucket = &shardcounter.Bucket{Start: t.bucket.Start, Value: t.bucket.Count}
		}
	}
	// An id entity is the counter's when of its incarnation (of).
	for k, e := range b.reqs {
		if t := b.targets[k.Counter]; e != nil && t.ent != nil {
			b.Requests[k] = docstore.Request{At: e.At, Seen: e.Of.Equal(t.ent.CreatedAt)}
		}
	}
	for k, e := range b.members {
		if t := b.targets[k.Counter]; t.ent != nil {
			t.Members[k.ID] = e != nil && e.Of.Equal(t.ent.CreatedAt)
		}
	}
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
