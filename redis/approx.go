package redis

import (
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
// reads each touched shard's w and x (or takes them from its cache),
// computes sketch.Apply in Go for all of the batch's items on that shard,
// and sends the items with mode x in the usual addScript call, the first
// item of each shard carrying the new sketch and the version it was
// computed from. The script sets the sketch only when the shard's version
// is still that one, in the same atomic step as the epoch check, the
// request ids and the batch's marker; otherwise the shard's items answer
// resConflict, change nothing, and are tried again after a fresh read.
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

// shardSketch is one shard's compare-and-set in an attempt.
type shardSketch struct {
	cacheKey string
	members  []string
	merges   [][]byte
	items    []int // positions in the batch
	ver      string
	old, new []byte
	changed  bool
	write    bool // new differs from old: the script sets it
	carried  bool // the blob went with an item already added to its group
	failed   bool // an item did not apply: the cache entry is dropped
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
		if a.x == nil {
			a.x = make(map[string]*shardSketch)
		}
		k := it.l.keys.shard(it.shard)
		x := a.x[k]
		if x == nil {
			x = &shardSketch{cacheKey: k + "@" + it.l.ep()}
			a.x[k] = x
		}
		inc := a.incs[it.i]
		if inc.Sketch != nil {
			x.merges = append(x.merges, inc.Sketch)
		} else {
			x.members = append(x.members, inc.Member)
		}
		x.items = append(x.items, it.i)
	}
	if len(a.x) == 0 {
		return nil
	}
	var stripes []int
	for k := range a.x {
		stripes = append(stripes, stripe(k))
	}
	slices.Sort(stripes)
	a.stripes = slices.Compact(stripes)
	for _, i := range a.stripes {
		a.s.sketches.locks[i].Lock()
	}
	if err := a.readSketches(ctx); err != nil {
		return err
	}
	for _, x := range a.x {
		next, changed, err := sketch.Apply(x.old, x.members, x.merges)
		if err != nil {
			x.failed = true
			for _, i := range x.items {
				a.out[i].Err = shardcounter.Errorf(shardcounter.EINTERNAL, "redis: counter %q: a shard's sketch: %v", a.incs[i].Counter, err)
			}
			continue
		}
		x.new, x.changed, x.write = next, changed, string(next) != string(x.old)
	}
	return nil
}

// readSketches fills the version and sketch of the attempt's shards from
// the cache, or with one pipelined HMGET each.
func (a *attempt) readSketches(ctx context.Context) error {
	cmds := make(map[string]*goredis.SliceCmd)
	for k, x := range a.x {
		if c, ok := a.s.sketches.get(x.cacheKey); ok {
			x.ver, x.old = c.ver, c.blob
		} else {
			cmds[k] = nil
		}
	}
	if len(cmds) == 0 {
		return nil
	}
	if _, err := a.s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for k := range cmds {
			cmds[k] = p.HMGet(ctx, k, "w", "x")
		}
		return nil
	}); err != nil {
		a.s.refresh(ctx, err)
		return storeErr("read sketches", err, false)
	}
	for k, c := range cmds {
		x := a.x[k]
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

// approxArgs returns what an approx item of shard key k sends in place of
// a delta item's delta, negated delta and member: "1" when the shard's
// sketch changed, the version the new sketch was computed from, and the
// new sketch when this is the first of the shard's items added to its
// group and the sketch's bytes changed ("" otherwise).
func (a *attempt) approxArgs(k string) (changed string, ver string, blob any) {
	x := a.x[k]
	changed, blob = "0", ""
	if x.changed {
		changed = "1"
	}
	if x.write && !x.carried {
		blob = x.new
	}
	x.carried = true
	return changed, x.ver, blob
}

// releaseSketches updates the cache with what the attempt wrote (every
// item of a shard applied: its compare-and-set held) or drops what it
// may have got wrong, and releases the shards' locks.
func (a *attempt) releaseSketches() {
	for _, x := range a.x {
		for _, i := range x.items {
			x.failed = x.failed || !a.applied[i]
		}
		switch {
		case x.failed:
			a.s.sketches.drop(x.cacheKey)
		case x.write:
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

// foldSketches returns, for a shrink of an approx counter to m shards,
// each target shard's new sketch: the union of its own and of every
// removed shard i ≡ t (mod m), from the shards' frozen hashes in cmds.
func foldSketches(l *layout, cmds []*goredis.MapStringStringCmd, m int) ([][]byte, error) {
	out := make([][]byte, m)
	for t := range m {
		var merges [][]byte
		for k := t + m; k < len(cmds); k += m {
			if x := cmds[k].Val()["x"]; x != "" {
				merges = append(merges, []byte(x))
			}
		}
		var old []byte
		if x := cmds[t].Val()["x"]; x != "" {
			old = []byte(x)
		}
		b, _, err := sketch.Apply(old, nil, merges)
		if err != nil {
			return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "redis: reshard counter %q: %v", l.id, err)
		}
		out[t] = b
	}
	return out, nil
}

// foldSketchScript folds removed shard ARGV[2] of an approx counter into
// target shard KEYS[1] (KEYS[2] and KEYS[3], its bucket keys as
// foldScript's, are unused) once for the reshard that creates epoch ARGV[1],
// as foldScript folds values: it sets the target's sketch to ARGV[3],
// the union of the target's frozen sketch and of every removed shard
// folded into it (computed in Go: sketch.Apply), moves the target's
// version, and sets the marker f:<shard>. Every fold into a target sets
// the same union, so folds may run in any order, again, or in several
// clients. It returns 1 when set, 0 when the marker was there, -1 when
// the target is not at that epoch.
var foldSketchScript = goredis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'e', 'f:' .. ARGV[2])
if m[1] ~= ARGV[1] then return -1 end
if m[2] then return 0 end
redis.call('HSET', KEYS[1], 'x', ARGV[3], 'f:' .. ARGV[2], '1')
redis.call('HINCRBY', KEYS[1], 'w', 1)
return 1
`)
