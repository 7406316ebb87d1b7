package redis

import (
	"context"
	"errors"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
)

// errStale says that a shard refused the epoch of a cached layout: the
// counter was resharded, deleted or re-created since. Callers reload the
// layout and try again; it never leaves the package.
var errStale = errors.New("redis: stale layout")

// CreateCounter records a counter with shards zero-valued shards. The
// shard keys are written first, then the metadata and the index entry, in
// one script that fails when the id is taken, so a counter is never
// visible without its shards; a crash in between leaves only unreachable
// keys behind.
func (s *CounterStore) CreateCounter(ctx context.Context, id string, spec shardcounter.Spec) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	if err := shardcounter.ValidateSpec(spec); err != nil {
		return nil, err
	}
	shards := spec.Shards
	for range maxAttempts {
		l := s.newLayout(id, spec)
		nr := newNodeRuns(s)
		s.createShards(ctx, nr, l)
		if nr.err != nil {
			return nil, storeErr("create counter shards", nr.err, false)
		}
		s.runOnNodes(ctx, nr.runs)
		if err := nr.firstErr(ctx); err != nil {
			if retryable(err) {
				continue // not run (a script not loaded, a slot that moved): nothing reachable was made
			}
			return nil, storeErr("create counter shards", err, true)
		}
		ok, err := s.runScript(ctx, createCounterScript, []string{metaKey(s.prefix, id), bucketKey(s.prefix, bucketOf(id))}, s.metaFields(l)...).Int()
		if err != nil {
			return nil, storeErr("create counter", err, true)
		}
		if ok == 1 {
			if err := s.sync(ctx, append(l.keys.shards(shards), metaKey(s.prefix, id))...); err != nil {
				return nil, err
			}
			s.remember(l)
			return l.counter(), nil
		}
		s.deleteKeys(ctx, l, shards) // ours, unreachable: best effort
		// The id is taken, unless by a counter being deleted: finish that.
		if _, err := s.layout(ctx, id, true); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
			if err != nil {
				return nil, err
			}
			return nil, shardcounter.Errorf(shardcounter.EEXISTS, "counter %q already exists", id)
		}
	}
	return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "redis: counter %q keeps changing: try again", id)
}

// newLayout returns the layout of a new counter: a new incarnation,
// epoch 1.
func (s *CounterStore) newLayout(id string, spec shardcounter.Spec) *layout {
	if spec.Kind == shardcounter.KindSum {
		spec.Kind = ""
	}
	return &layout{id: id, n: spec.Shards, epoch: 1, created: s.now().UTC(), max: spec.Shards, spec: spec, memberGen: 1,
		keys: newKeys(s.prefix, id, newIncarnation(), oneSlot(id, spec))}
}

// metaFields returns the arguments of createCounterScript for l: the id,
// then the metadata's fields and values.
func (s *CounterStore) metaFields(l *layout) []any {
	return append([]any{l.id, fieldID, l.id, fieldShards, l.n, fieldCreated, l.created.Format(time.RFC3339Nano),
		fieldIncarnation, l.keys.incarnation, fieldEpoch, l.ep(), fieldMax, l.max}, specFields(l.spec)...)
}

// GetCounter returns the counter's metadata, after finishing a reshard
// that a crashed process left half done.
func (s *CounterStore) GetCounter(ctx context.Context, id string) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	l, err := s.layout(ctx, id, true)
	if err != nil {
		return nil, err
	}
	return l.counter(), nil
}

// ListCounters returns up to limit counters whose ids start with prefix
// and sort after after, in byte order. The index is spread over
// indexBuckets sorted sets (all scores 0, so ZRANGEBYLEX orders by bytes
// and prefixes match literally); this merges them, reading each from
// where the page has got to, a chunk at a time, one round trip per master
// for each round of chunks.
func (s *CounterStore) ListCounters(ctx context.Context, prefix, after string, limit int) ([]*shardcounter.Counter, error) {
	if limit <= 0 {
		return nil, nil
	}
	lo, hi := "["+prefix, "+"
	if after >= prefix {
		lo = "(" + after
	}
	if prefix != "" {
		hi = "[" + prefix + "\xff" // no UTF-8 id holds 0xff
	}
	m := newMerge(indexKeys(s.prefix), lo, hi, max(8, 2*limit/indexBuckets))
	var out []*shardcounter.Counter
	for len(out) < limit {
		ids, err := m.next(ctx, s.client, limit-len(out))
		if err != nil {
			return nil, storeErr("list counters", err, false)
		}
		if len(ids) == 0 {
			break
		}
		cmds := make([]*goredis.MapStringStringCmd, len(ids))
		if _, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, id := range ids {
				cmds[i] = p.HGetAll(ctx, metaKey(s.prefix, id))
			}
			return nil
		}); err != nil {
			return nil, storeErr("list counters", err, false)
		}
		for i, id := range ids {
			l, err := s.parseLayout(id, cmds[i].Val())
			if err != nil {
				return nil, err
			}
			if l != nil && l.state != stateDelete { // else: a delete under way
				out = append(out, l.counter())
			}
		}
	}
	return out, nil
}

// DeleteCounter marks the counter deleted in its metadata (from then on it
// is not found), deletes its shard and request-id keys, then its index
// entry and metadata. Whoever meets the mark later finishes the deletion,
// so a crash in between loses nothing but time.
func (s *CounterStore) DeleteCounter(ctx context.Context, id string) error {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return err
	}
	ok, err := s.runScript(ctx, markDeleteScript, []string{metaKey(s.prefix, id)}).Int()
	if err != nil {
		return storeErr("delete counter", err, true)
	}
	if ok == 0 {
		return notFound(id)
	}
	if err := s.sync(ctx, metaKey(s.prefix, id)); err != nil {
		return err
	}
	// Reading the metadata finishes the deletion. A counter found after it
	// is not the one marked (the mark is removed only by deletion): a
	// create or a create-on-write ran after this delete had finished.
	if _, err := s.layout(ctx, id, true); err != nil && shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		return err
	}
	return nil
}

// finishDelete runs the idempotent steps of a recorded delete.
func (s *CounterStore) finishDelete(ctx context.Context, l *layout) error {
	n := max(l.max, l.n, l.to)
	if err := s.deleteKeys(ctx, l, n); err != nil {
		return err
	}
	if err := s.runScript(ctx, deleteCounterScript, []string{metaKey(s.prefix, l.id), bucketKey(s.prefix, bucketOf(l.id))}, l.id).Err(); err != nil {
		return storeErr("delete counter", err, true)
	}
	return s.sync(ctx, append(l.keys.shards(n), metaKey(s.prefix, l.id))...)
}

// deleteKeys deletes the keys of shards [0, n): the shard, its request
// ids, members and buckets; and a bounded counter's bounds key.
func (s *CounterStore) deleteKeys(ctx context.Context, l *layout, n int) error {
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range n {
			p.Del(ctx, l.keys.shard(i))
			p.Del(ctx, l.keys.ids(i))
			if l.distinct() {
				p.Del(ctx, l.keys.members(i, l.memberGen))
			}
			if l.spec.Window != nil {
				p.Del(ctx, l.keys.buckets(i))
				p.Del(ctx, l.keys.bucketIndex(i))
			}
		}
		if l.spec.Bounded() {
			p.Del(ctx, l.keys.bounds())
		}
		return nil
	})
	return storeErr("delete counter keys", err, true)
}

// runScript runs a script with EVALSHA, loading it on NOSCRIPT (a new or
// restarted server) and trying once more.
func (s *CounterStore) runScript(ctx context.Context, sc *goredis.Script, keys []string, args ...any) *goredis.Cmd {
	c := sc.EvalSha(ctx, s.client, keys, args...)
	if err := c.Err(); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
		if err := s.loadScripts(ctx, keys[0]); err != nil {
			return c
		}
		c = sc.EvalSha(ctx, s.client, keys, args...)
	}
	return c
}

// loadScripts loads every script of the store on the server, or the
// master of the cluster, that serves key: the one that answered NOSCRIPT.
// Loading on every master instead would wait on a dead one.
func (s *CounterStore) loadScripts(ctx context.Context, key string) error {
	n, err := s.node(ctx, key)
	if err != nil {
		return err
	}
	return s.loadScriptsOn(ctx, n)
}

// loadScriptsOn loads every script of the store on one node.
func (s *CounterStore) loadScriptsOn(ctx context.Context, n *goredis.Client) error {
	for _, sc := range allScripts {
		if err := sc.Load(ctx, n).Err(); err != nil {
			return err
		}
	}
	return nil
}

// scriptKey returns the first key of an EVALSHA command, which names the
// node that ran it.
func scriptKey(c *goredis.Cmd) string {
	if a := c.Args(); len(a) > 3 {
		k, _ := a[3].(string)
		return k
	}
	return ""
}

// createShards queues on nr what makes the shards of a new counter (and a
// bounded counter's bounds key), each unless its key exists.
func (s *CounterStore) createShards(ctx context.Context, nr *nodeRuns, l *layout) {
	rooms := allowances(make([]int64, l.n), nil)
	create := func(key string, fields ...any) {
		nr.add(ctx, key, func(p goredis.Pipeliner) *goredis.Cmd { return createScript.EvalSha(ctx, p, []string{key}, fields...) })
	}
	for i := range l.n {
		create(l.keys.shard(i), "v", 0, "e", l.ep(), "up", rooms[i].up, "dn", rooms[i].dn)
	}
	if l.spec.Bounded() {
		fields := []any{"t", 0}
		if l.spec.Min != nil {
			fields = append(fields, "lo", *l.spec.Min)
		}
		if l.spec.Max != nil {
			fields = append(fields, "hi", *l.spec.Max)
		}
		create(l.keys.bounds(), fields...)
	}
}
