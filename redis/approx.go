package redis

import (
	"bytes"
	"context"
	"hash/fnv"
	"slices"
	"strconv"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/sketch"
)

// Approx counters.
//
// A shard of an approx counter keeps its HyperLogLog sketch (package
// sketch's encoding, at most sketch.MaxEncoded bytes) in field x of its
// shard hash, so the sketch is in the shard's slot, is fenced, frozen,
// folded and deleted with it, and its version is the shard's w. Lua cannot
// run the sketch's code, so a write is a compare-and-set: the writer
// reads each touched shard's w and x (or takes them from its cache), has
// package decide apply the batch's items on each shard to its sketch once
// (decide.Sketches, SketchShard.Apply: the sketch step of every store),
// and sends the items with mode x in the usual addScript call, the first
// item of each shard carrying the new sketch and the version it was
// computed from. The script sets the sketch only when the shard's version
// is still that one and none of the shard's items is a duplicate (whose
// member the new sketch holds), in the same atomic step as the epoch
// check, the request ids and the batch's marker; otherwise the shard's
// duplicates answer so and its other items resConflict, change nothing,
// and are tried again after a fresh read.
//
// Within a process, writers of one shard take turns (a striped lock held
// from the read to the script's answer), and the last sketch written is
// cached with its version, so a batch on a shard this process wrote last
// costs one round trip, as a sum batch does, and conflicts come only from
// other processes (or reshards, which fold sketches and move versions).

var _ shardcounter.SketchStore = (*CounterStore)(nil)

// sketchStripes is the number of in-process locks shards' sketches are
// spread over.
const sketchStripes = 64

// maxCachedSketches bounds the cache of sketches (16 KiB each at most):
// past it, it starts again empty.
const maxCachedSketches = 4096

// sketchCache is the process's last known sketch and version of shards,
// keyed by shard key and epoch, and the locks that make the process's
// writers of one shard take turns.
type sketchCache struct {
	locks [sketchStripes]sync.Mutex
	mu    sync.Mutex
	m     map[string]cachedSketch
}

type cachedSketch struct {
	ver  string
	blob []byte
}

func (c *sketchCache) get(k string) (cachedSketch, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *sketchCache) put(k string, v cachedSketch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedSketches {
		c.m = make(map[string]cachedSketch)
	}
	c.m[k] = v
}

func (c *sketchCache) drop(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

// stripe returns the lock of shard key k.
func stripe(k string) int {
	h := fnv.New32a()
	h.Write([]byte(k))
	return int(h.Sum32() % sketchStripes)
}

// shardSketch is one shard's compare-and-set in an attempt: its sketch
// and version as read, and its new sketch, computed by package decide
// (decide.SketchShard.Apply) from the attempt's items on the shard.
type shardSketch struct {
	key, cacheKey string
	ver           string
	old, new      []byte
	changed       bool // the shard's items are not Unchanged
	carried       bool // the new sketch went with an item already added to its group
	held          bool // resolve: the compare-and-set held, and the shard's items applied
}

// write reports whether the script sets the new sketch: its bytes differ
// (a sparse sketch's may change while its estimate does not, and a later
// estimate depends on them).
func (x *shardSketch) write() bool { return !bytes.Equal(x.new, x.old) }

// carry returns the new sketch for the first of the shard's items added
// to its group, when the script is to set it, and "" otherwise.
func (x *shardSketch) carry() any {
	first := !x.carried
	x.carried = true
	if first && x.write() {
		return x.new
	}
	return ""
}

// prepareSketches reads (or takes from the cache) the sketch and version
// of every shard the attempt's approx items touch, under the shards'
// in-process locks, and computes each shard's new sketch. The locks are
// held until releaseSketches.
func (a *attempt) prepareSketches(ctx context.Context) error {
	for _, it := range a.items {
		if !it.l.approx() {
			continue
		}
		n := len(a.sk.Shards)
		if a.sk.Add(it.shard, a.incs[it.i], it.i); len(a.sk.Shards) > n { // a shard of its own
			k := it.l.keys.shard(it.shard)
			a.xs = append(a.xs, shardSketch{key: k, cacheKey: k + "@" + it.l.ep()})
		}
	}
	if len(a.xs) == 0 {
		return nil
	}
	var stripes []int
	for _, x := range a.xs {
		stripes = append(stripes, stripe(x.key))
	}
	slices.Sort(stripes)
	a.stripes = slices.Compact(stripes)
	for _, i := range a.stripes {
		a.s.sketches.locks[i].Lock()
	}
	if err := a.readSketches(ctx); err != nil {
		return err
	}
	marks := make([]shardcounter.Outcome, len(a.incs))
	for j := range a.xs {
		sh, x := &a.sk.Shards[j], &a.xs[j]
		next, err := sh.Apply(x.old, marks)
		if err != nil {
			for _, i := range sh.Items {
				a.out[i] = marks[i] // its sketch does not decode: decide's error
			}
			continue
		}
		x.new, x.changed = next, !marks[sh.Items[0]].Unchanged
	}
	return nil
}

// sketchOf returns the compare-and-set of an approx item's shard, nil for
// another item.
func (a *attempt) sketchOf(it pending) *shardSketch {
	if !it.l.approx() {
		return nil
	}
	k := it.l.keys.shard(it.shard)
	for j := range a.xs {
		if a.xs[j].key == k {
			return &a.xs[j]
		}
	}
	return nil
}

// readSketches fills the version and sketch of the attempt's shards from
// the cache, or with one pipelined HMGET each.
func (a *attempt) readSketches(ctx context.Context) error {
	cmds := make(map[int]*goredis.SliceCmd)
	for j := range a.xs {
		x := &a.xs[j]
		if c, ok := a.s.sketches.get(x.cacheKey); ok {
			x.ver, x.old = c.ver, c.blob
		} else {
			cmds[j] = nil
		}
	}
	if len(cmds) == 0 {
		return nil
	}
	if _, err := a.s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for j := range cmds {
			cmds[j] = p.HMGet(ctx, a.xs[j].key, "w", "x")
		}
		return nil
	}); err != nil {
		a.s.refresh(ctx, err)
		return storeErr("read sketches", err, false)
	}
	for j, c := range cmds {
		x := &a.xs[j]
		r := c.Val()
		x.ver = "0"
		if w, ok := r[0].(string); ok {
			x.ver = w
		}
		if b, ok := r[1].(string); ok && b != "" {
			x.old = []byte(b)
		}
	}
	return nil
}

// releaseSketches updates the cache with what the attempt wrote (its
// compare-and-set held) or drops what it may have got wrong, and releases
// the shards' locks.
func (a *attempt) releaseSketches() {
	for j := range a.xs {
		x := &a.xs[j]
		switch {
		case !x.held:
			a.s.sketches.drop(x.cacheKey)
		case x.write():
			a.s.sketches.put(x.cacheKey, cachedSketch{ver: bump(x.ver), blob: x.new})
		default:
			a.s.sketches.put(x.cacheKey, cachedSketch{ver: x.ver, blob: x.old})
		}
	}
	for _, i := range a.stripes {
		a.s.sketches.locks[i].Unlock()
	}
	a.stripes = nil
}

// bump returns version v plus one, as the script's HINCRBY moves it.
func bump(v string) string {
	n, _ := strconv.ParseInt(v, 10, 64)
	return strconv.FormatInt(n+1, 10)
}

// ReadSketches returns an approx counter and its shards' sketches in shard
// order (nil for a shard with none), read as ReadCounter reads: one
// MULTI/EXEC on one server, a linearizable double collect on a cluster.
func (s *CounterStore) ReadSketches(ctx context.Context, id string) (*shardcounter.Counter, [][]byte, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, nil, err
	}
	shots, err := s.snapshot(ctx, []string{id})
	if err != nil {
		return nil, nil, err
	}
	sh := shots[0]
	if sh.l == nil {
		return nil, nil, notFound(id)
	}
	if !sh.l.approx() {
		return nil, nil, shardcounter.Errorf(shardcounter.EINVALID, "counter %q is a %s counter: only an approx counter has sketches", id, sh.l.counter().Kind)
	}
	return sh.l.counter(), sh.xs, nil
}

// shardValues returns a shot's shard values: an approx counter's are each
// shard's own estimate.
func shardValues(sh *shot) ([]int64, error) {
	if !sh.l.approx() {
		return sh.vals, nil
	}
	vals := make([]int64, len(sh.xs))
	for i, b := range sh.xs {
		n, err := sketch.Count([][]byte{b})
		if err != nil {
			return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "redis: counter %q shard %d: %v", sh.id, i, err)
		}
		vals[i] = n
	}
	return vals, nil
}

// sketched is an approx shard's applied items in a batch, and whether one
// of its attempts changed its sketch.
type sketched struct {
	items   []int
	changed bool
}

// sketch notes approx item i applied on shard key k, by an attempt that
// changed the shard's sketch or not.
func (b *batch) sketch(k string, i int, changed bool) {
	if b.sketched == nil {
		b.sketched = make(map[string]*sketched)
	}
	sh := b.sketched[k]
	if sh == nil {
		sh = &sketched{}
		b.sketched[k] = sh
	}
	sh.items = append(sh.items, i)
	sh.changed = sh.changed || changed
}
