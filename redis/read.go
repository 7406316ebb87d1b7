package redis

import (
	"context"
	"slices"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
	"github.com/shardcounter/shardcounter/sketch"
)

// Strong reads.
//
// On one server a read is one MULTI/EXEC of HMGETs: an atomic snapshot.
//
// On a cluster no command spans masters, and one round of reads is not
// linearizable: each master answers at its own moment, so a read can see a
// write on one master and miss a write on another that was acknowledged
// before it was sent — a value the counter never held. No one-round
// protocol can avoid that: the writes carry nothing about each other.
// The store therefore reads twice (the double collect of atomic-snapshot
// algorithms). Every write bumps its shard's version (field w), and a read
// collects every shard's value, epoch and version, then collects again
// once all replies of the first are in. When a counter's shards show the
// same epochs and versions in both, no shard changed between its two
// reads, and all of those intervals contain the moment the first collect
// ended: the values are the ones the shards held together at that moment,
// which lies within the call. Otherwise the second collect becomes the
// first of the next pair. After maxCollects collects that never agree
// (a counter written faster than a round trip) the read freezes the
// counter — a reshard to its own shard count, see freeze — and reads the
// frozen shards: writers wait for a few round trips, but the read ends.

// maxCollects bounds the collects of a strong read on a cluster before it
// freezes the counter instead.
const maxCollects = 3

// shot is one counter of a strong read in progress.
type shot struct {
	id   string
	l    *layout // nil when the counter does not exist
	vals []int64
	xs   [][]byte // an approx counter's shard sketches, from the same collect
	vers []string // each shard's version, from the last collect
	done bool
}

// ReadCounter returns the exact sum of the counter's shards as a strong,
// linearizable reading: see the comment above for how.
func (s *CounterStore) ReadCounter(ctx context.Context, id string) (*shardcounter.Reading, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	shots, err := s.snapshot(ctx, []string{id})
	if err != nil {
		return nil, err
	}
	if shots[0].l == nil {
		return nil, notFound(id)
	}
	return s.reading(shots[0])
}

// ReadCounters reads many counters as ReadCounter does, in order, nil for
// a counter that does not exist. On one server it is one MULTI/EXEC of
// every shard of every counter: one snapshot of all of them. On a cluster
// each counter's reading is linearizable on its own, and the collects of
// all counters share their round trips: two per master when the counters
// are not written meanwhile, one when each has one shard.
func (s *CounterStore) ReadCounters(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	if err := shardcounter.CheckReadBatch(len(ids)); err != nil {
		return nil, err
	}
	for _, id := range ids {
		if err := shardcounter.ValidateID("counter id", id); err != nil {
			return nil, err
		}
	}
	shots, err := s.snapshot(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]*shardcounter.Reading, len(ids))
	for i, sh := range shots {
		if sh.l == nil {
			continue
		}
		if out[i], err = s.reading(sh); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ReadShards returns the counter and its shard values, read as ReadCounter
// reads them.
func (s *CounterStore) ReadShards(ctx context.Context, id string) (*shardcounter.Counter, []int64, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, nil, err
	}
	shots, err := s.snapshot(ctx, []string{id})
	if err != nil {
		return nil, nil, err
	}
	if shots[0].l == nil {
		return nil, nil, notFound(id)
	}
	vals, err := shardValues(shots[0])
	if err != nil {
		return nil, nil, err
	}
	return shots[0].l.counter(), vals, nil
}

// reading is a shot's value: the sum of its shards, or an approx
// counter's estimate of the union of its shards' sketches.
func (s *CounterStore) reading(sh *shot) (*shardcounter.Reading, error) {
	if sh.l.approx() {
		n, err := sketch.Count(sh.xs)
		if err != nil {
			return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "redis: counter %q: %v", sh.id, err)
		}
		return &shardcounter.Reading{ID: sh.id, Value: n, Shards: sh.l.n, Consistency: shardcounter.Strong, AsOf: s.now().UTC()}, nil
	}
	sum, ok := overflow.Sum(sh.vals)
	if !ok {
		return nil, shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: the sum of its shards leaves the int64 range", sh.id)
	}
	return &shardcounter.Reading{ID: sh.id, Value: sum, Shards: sh.l.n, Consistency: shardcounter.Strong, AsOf: s.now().UTC()}, nil
}

// snapshot reads the shards of ids, one shot per id in order (a repeated
// id shares its shot), each linearizable.
func (s *CounterStore) snapshot(ctx context.Context, ids []string) ([]*shot, error) {
	out := make([]*shot, len(ids))
	byID := make(map[string]*shot, len(ids))
	var all []*shot
	for i, id := range ids {
		if byID[id] == nil {
			byID[id] = &shot{id: id}
			all = append(all, byID[id])
		}
		out[i] = byID[id]
	}
	s.stats.reads.Add(int64(len(all)))
	backoff := false // the cluster redirected a read: give it time
	for attempt := 0; ; attempt++ {
		var todo []*shot
		for _, sh := range all {
			if !sh.done {
				todo = append(todo, sh)
			}
		}
		if len(todo) == 0 {
			return out, nil
		}
		if attempt == maxAttempts {
			return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "redis: counter %q keeps changing (resharded, moved or frozen by others): try again", todo[0].id)
		}
		if backoff {
			if err := sleep(ctx, attempt); err != nil {
				return nil, storeErr("read counter", err, false)
			}
		}
		var err error
		if backoff, err = s.snapshotOnce(ctx, todo); err != nil {
			return nil, err
		}
	}
}

// snapshotOnce makes one attempt at reading todo. A counter whose cached
// layout turned out stale is forgotten and left not done, for the next
// attempt; backoff says that the cluster redirected a read.
func (s *CounterStore) snapshotOnce(ctx context.Context, todo []*shot) (backoff bool, err error) {
	ids := make([]string, len(todo))
	for i, sh := range todo {
		ids[i] = sh.id
	}
	ls, err := s.layoutsOf(ctx, ids)
	if err != nil {
		return false, err
	}
	var live []*shot
	for _, sh := range todo {
		if sh.l = ls[sh.id]; sh.l == nil {
			sh.done = true // not found
		} else {
			live = append(live, sh)
		}
	}
	if s.cluster == nil {
		// One MULTI/EXEC: an atomic snapshot of every counter, or, when
		// a cached layout was stale, of none: all are read again together.
		ok, redirected, err := s.collect(ctx, live)
		if err != nil {
			return false, err
		}
		if len(ok) == len(live) {
			for _, sh := range ok {
				sh.done = true
			}
		}
		return redirected, nil
	}
	live, backoff, err = s.collect(ctx, live)
	if err != nil {
		return false, err
	}
	if s.singleCollect {
		for _, sh := range live {
			sh.done = true
		}
		return backoff, nil
	}
	// A counter of one shard needs no second collect: its one HMGET is
	// one step, and the epoch check showed that the shard was the whole
	// counter at that moment (a reshard fences it first).
	multi := live[:0]
	for _, sh := range live {
		if sh.l.n == 1 {
			sh.done = true
		} else {
			multi = append(multi, sh)
		}
	}
	live = multi
	for range maxCollects - 1 {
		if len(live) == 0 {
			return backoff, nil
		}
		prev := make(map[*shot][]string, len(live))
		for _, sh := range live {
			prev[sh] = sh.vers
		}
		fresh, redirected, err := s.collect(ctx, live)
		if err != nil {
			return false, err
		}
		backoff = backoff || redirected
		live = live[:0]
		for _, sh := range fresh {
			if slices.Equal(prev[sh], sh.vers) {
				sh.done = true
			} else {
				live = append(live, sh)
			}
		}
	}
	// Written faster than we can read twice: freeze each and read it.
	for _, sh := range live {
		s.stats.freezes.Add(1)
		vals, xs, err := s.freeze(ctx, sh.l, nil)
		s.forget(sh.id)
		if shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND {
			sh.l, sh.done = nil, true
			continue
		}
		if err != nil {
			return false, err
		}
		if vals != nil {
			sh.vals, sh.xs, sh.done = vals, xs, true
		}
	}
	return backoff, nil
}

// collect reads every shard of every shot's layout in one round trip per
// master (on one server, in one MULTI/EXEC), sets each shot's values and
// versions, and returns the shots whose shards were all at their layout's
// epoch. The others had a stale layout, or their slot was elsewhere
// (redirected): they are forgotten, to be read again.
func (s *CounterStore) collect(ctx context.Context, shots []*shot) (ok []*shot, redirected bool, err error) {
	if len(shots) == 0 {
		return nil, false, nil
	}
	s.stats.collects.Add(int64(len(shots)))
	cmds := make([][]*goredis.SliceCmd, len(shots))
	fill := func(p goredis.Pipeliner) error {
		for i, sh := range shots {
			cmds[i] = make([]*goredis.SliceCmd, sh.l.n)
			fields := []string{"v", "e", "w"}
			if sh.l.approx() {
				fields = append(fields, "x")
			}
			for k := range sh.l.n {
				cmds[i][k] = p.HMGet(ctx, sh.l.keys.shard(k), fields...)
			}
		}
		return nil
	}
	if s.cluster == nil {
		_, err = s.client.TxPipelined(ctx, fill)
	} else {
		_, err = s.client.Pipelined(ctx, fill)
	}
	if err != nil && !retryable(err) {
		s.refresh(ctx, err)
		return nil, false, storeErr("read counter", err, false)
	}
	var gone []*layout
	defer func() { s.dropStates(ctx, gone) }()
	for i, sh := range shots {
		vals, vers, err := s.parseShards(sh.l, cmds[i])
		if retryable(err) && !redirected {
			redirected = true
			s.refresh(ctx, err)
		}
		if err == errGone {
			gone = append(gone, sh.l)
		}
		if err == errStale || err == errGone || retryable(err) {
			s.forget(sh.id)
			continue
		}
		if err != nil {
			return nil, false, storeErr("read counter", err, false)
		}
		sh.vals, sh.vers, sh.xs = vals, vers, nil
		if sh.l.approx() {
			sh.xs = make([][]byte, len(cmds[i]))
			for k, c := range cmds[i] {
				if x, _ := c.Val()[3].(string); x != "" {
					sh.xs[k] = []byte(x)
				}
			}
		}
		ok = append(ok, sh)
	}
	return ok, redirected, nil
}

// parseShards reads the replies of one counter's HMGETs: errStale when a
// shard is not at the layout's epoch.
func (s *CounterStore) parseShards(l *layout, cmds []*goredis.SliceCmd) ([]int64, []string, error) {
	ep := l.ep()
	vals := make([]int64, len(cmds))
	vers := make([]string, len(cmds))
	for k, c := range cmds {
		r, err := c.Result()
		if err != nil {
			return nil, nil, err
		}
		if vals[k], err = shardValue(l, ep, k, r); err != nil {
			return nil, nil, err
		}
		vers[k], _ = r[2].(string)
	}
	return vals, vers, nil
}

// shardValue reads shard k's value from r, its fields v and e (then any
// others): errStale when e is not ep, the layout's epoch.
func shardValue(l *layout, ep string, k int, r []any) (int64, error) {
	if e, _ := r[1].(string); e != ep {
		if r[0] == nil && r[1] == nil && shardcounter.IsLimitKeyID(l.id) {
			return 0, errGone // see remove.go
		}
		return 0, errStale
	}
	v, _ := r[0].(string)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, shardcounter.Errorf(shardcounter.EINTERNAL, "redis: shard %d of counter %q holds %q, not an integer", k, l.id, v)
	}
	return n, nil
}
