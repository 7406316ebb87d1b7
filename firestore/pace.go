package firestore

import (
	"context"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// pace waits until every shard document the batch writes that another
// writer (another server, by its fieldBy stamp) committed last was committed at least an
// interval ago, by the document's own update time; the engine paces this
// store's own commits. So the pace holds across servers: the commit
// states each shard's update time as its precondition, so a commit by
// another server since (a cached update time out of date) fails it, and
// the attempt reads the shard again and waits from its new update time.
// No shard document takes two commits within an interval, by the
// service's clock and this one's (the two are taken to agree).
//
// Before waiting, a counter whose items are all plain increments (no
// request id, member, take, bound or transaction: any shard will do)
// moves off a shard another server committed within the interval onto
// one nobody did, as far as the store knows (see repick): waiting on a
// shard another server holds is what makes servers on one hot counter
// slow each other down. It returns incs, with the moved items' picks.
func (s *CounterStore) pace(ctx context.Context, incs []shardcounter.Increment, targets map[string]*target, order []string) ([]shardcounter.Increment, error) {
	incs, moved, err := s.repick(ctx, incs, targets, order)
	if err != nil {
		return nil, err
	}
	interval, now := s.ShardWriteInterval(), time.Now()
	var last time.Time
	for _, id := range order {
		t := targets[id]
		if t.st == nil {
			continue
		}
		for i := range t.shards {
			// A shard the batch moved to, or one an earlier batch moved
			// to, is waited for whoever committed it: the engine paced
			// the ones it picked, not these.
			if sh := t.st.shards[i]; (!sh.mine || moved[id] || s.moves.recent(id, i, now, interval)) && sh.ut.After(last) {
				last = sh.ut
			}
		}
	}
	if wait := time.Until(last.Add(interval)); wait > 0 {
		if err := docstore.Sleep(ctx, wait); err != nil {
			return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "firestore: a shard document another server committed was not due before %v; nothing applied", err)
		}
	}
	return incs, nil
}

// repick moves each movable counter (movable) whose one shard another
// server committed within the interval to a shard committed by nobody
// within it, picked at random among those (so that servers knowing the
// same do not all move to one), or, when every shard is busy, to the one
// due first if that is sooner. It first reads, in one round trip, the
// shards of those counters that the store does not know (after a
// conflict it knows only what it read again). The items of a moved
// counter get the new shard as their pick, in a copy of incs; moved
// names the counters moved.
func (s *CounterStore) repick(ctx context.Context, incs []shardcounter.Increment, targets map[string]*target, order []string) ([]shardcounter.Increment, map[string]bool, error) {
	interval := s.ShardWriteInterval()
	now := time.Now()
	var busy []*target
	for _, id := range order {
		t := targets[id]
		if k, ok := movable(t, incs); ok {
			if sh := t.st.shards[k]; (!sh.mine || s.moves.recent(id, k, now, interval)) && sh.ut.Add(interval).After(now) {
				busy = append(busy, t)
			}
		}
	}
	if len(busy) == 0 {
		return incs, nil, nil
	}
	if err := s.readUnknown(ctx, busy); err != nil {
		return nil, nil, err
	}
	now = time.Now()
	moved := make(map[string]bool)
	var to map[string]int
	for _, t := range busy {
		k, _ := movable(t, incs)
		due := t.st.shards[k].ut.Add(interval)
		var free []int
		best := -1
		for i, sh := range t.st.shards {
			if i == k || !sh.known || !sh.exists || sh.wide || (sh.n != 0 && sh.n != int64(len(t.st.shards))) {
				continue
			}
			d := sh.ut.Add(interval)
			if !d.After(now) {
				free = append(free, i)
			} else if d.Before(due) && (best < 0 || d.Before(t.st.shards[best].ut.Add(interval))) {
				best = i
			}
		}
		if len(free) > 0 {
			best = free[mrand.N(len(free))]
		}
		if best < 0 {
			continue
		}
		if to == nil {
			to = make(map[string]int)
			incs = slices.Clone(incs)
		}
		to[t.id], moved[t.id] = best, true
		t.shards = map[int]bool{best: true}
		s.moves.add(t.id, best, now, interval)
	}
	for i := range incs {
		if k, ok := to[incs[i].Counter]; ok {
			incs[i].Pick = uint64(k)
		}
	}
	return incs, moved, nil
}

// movable returns the one shard the batch reads of t, when every item on
// t is a plain increment (its Create, the engine's, is moot: the counter
// exists) of a counter whose shards are each within their zone, not an
// approx one: the items may go to any shard.
func movable(t *target, incs []shardcounter.Increment) (int, bool) {
	if t.st == nil || t.st.full || t.create || t.err != nil || len(t.shards) != 1 || isApprox(t.st.meta.spec) {
		return 0, false
	}
	for _, inc := range incs {
		if inc.Counter == t.id && (inc.RequestID != "" || inc.Member != "" || inc.Sketch != nil || inc.Take != nil ||
			inc.Bound != nil || inc.Total || inc.Txn != 0) {
			return 0, false
		}
	}
	for k := range t.shards {
		return k, true
	}
	return 0, false
}

// readUnknown reads the shards of ts the store does not know, in one
// round trip.
func (s *CounterStore) readUnknown(ctx context.Context, ts []*target) error {
	var refs []*firestore.DocumentRef
	var of []*target
	var at []int
	for _, t := range ts {
		for i, sh := range t.st.shards {
			if !sh.known {
				refs = append(refs, shardRef(t.ref, i))
				of, at = append(of, t), append(at, i)
			}
		}
	}
	if len(refs) == 0 {
		return nil
	}
	snaps, err := s.client.GetAll(ctx, refs)
	if err != nil {
		return readError("read shards", err)
	}
	for j, snap := range snaps {
		of[j].st.shards[at[j]] = s.shardFromSnap(snap)
	}
	return nil
}

// moves are the shards pace moved batches to within the last two
// intervals: the engine, which paces this store's own commits, did not
// pick them, and may pick one next, so pace waits on this store's own
// commits of them too.
type moves struct {
	mu sync.Mutex
	at map[moveKey]time.Time
}

type moveKey struct {
	counter string
	shard   int
}

// maxMoves is how many moves are kept before the old ones are dropped.
const maxMoves = 4096

func (m *moves) add(counter string, shard int, now time.Time, interval time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at == nil {
		m.at = make(map[moveKey]time.Time)
	}
	if len(m.at) >= maxMoves {
		for k, at := range m.at {
			if now.Sub(at) > 2*interval {
				delete(m.at, k)
			}
		}
	}
	m.at[moveKey{counter, shard}] = now
}

// recent reports whether a batch moved to the shard within two intervals
// (its commit, after the move, within one).
func (m *moves) recent(counter string, shard int, now time.Time, interval time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.at[moveKey{counter, shard}]
	return ok && now.Sub(at) < 2*interval
}
