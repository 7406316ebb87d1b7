package redis

import (
	"context"
	"errors"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
)

// errStale says that a shard refused the epoch of a cached layout: the
// counter was resharded, deleted or re-created since. Callers reload the
// layout and try again; it never leaves the package.
var errStale = errors.New("redis: stale layout")

// CreateCounter records a counter with shards zero-valued shards. The
// shard keys are written first and the metadata last, in one script that
// fails when the id is taken, so a counter is never visible without its
// shards; a crash in between leaves only unreachable keys behind.
func (s *CounterStore) CreateCounter(ctx context.Context, id string, spec shardcounter.Spec) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	if err := shardcounter.ValidateSpec(spec); err != nil {
		return nil, err
	}
	if err := unsupported(spec); err != nil {
		return nil, err
	}
	shards := spec.Shards
	// The index entry first: an entry without metadata is skipped by
	// ListCounters, while metadata without an entry would hide a counter.
	if err := s.client.ZAddNX(ctx, indexKey(s.prefix), goredis.Z{Member: id}).Err(); err != nil {
		return nil, storeErr("create counter", err, true)
	}
	for range maxAttempts {
		l := &layout{id: id, n: shards, epoch: 1, created: s.now().UTC(), max: shards, keys: newKeys(s.prefix, id, newIncarnation())}
		rooms := allowances(make([]int64, shards), nil)
		_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i := range shards {
				p.HSet(ctx, l.keys.shard(i), "v", 0, "e", l.ep(), "up", rooms[i].up, "dn", rooms[i].dn)
			}
			return nil
		})
		if err != nil {
			return nil, storeErr("create counter shards", err, true)
		}
		ok, err := s.runScript(ctx, createScript, []string{metaKey(s.prefix, id)},
			fieldID, id, fieldShards, shards, fieldCreated, l.created.Format(time.RFC3339Nano),
			fieldIncarnation, l.keys.incarnation, fieldEpoch, l.ep(), fieldMax, shards).Int()
		if err != nil {
			return nil, storeErr("create counter", err, true)
		}
		if ok == 1 {
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
// and sort after after, in byte order, from the index sorted set (all
// scores 0, so ZRANGEBYLEX orders by bytes and prefixes match literally).
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
	var out []*shardcounter.Counter
	for len(out) < limit {
		want := limit - len(out)
		ids, err := s.client.ZRangeByLex(ctx, indexKey(s.prefix), &goredis.ZRangeBy{Min: lo, Max: hi, Count: int64(want)}).Result()
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
			if l != nil && l.state != stateDelete { // else: a create or delete cut short
				out = append(out, l.counter())
			}
		}
		if len(ids) < want {
			break
		}
		lo = "(" + ids[len(ids)-1]
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
	if _, err := s.layout(ctx, id, true); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		if err == nil { // cannot happen: the mark is never removed but by deletion
			err = shardcounter.Errorf(shardcounter.EINTERNAL, "redis: counter %q survived its deletion", id)
		}
		return err
	}
	return nil
}

// finishDelete runs the idempotent steps of a recorded delete.
func (s *CounterStore) finishDelete(ctx context.Context, l *layout) error {
	if err := s.deleteKeys(ctx, l, max(l.max, l.n, l.to)); err != nil {
		return err
	}
	if err := s.client.ZRem(ctx, indexKey(s.prefix), l.id).Err(); err != nil {
		return storeErr("delete counter", err, true)
	}
	if err := s.runScript(ctx, deleteMetaScript, []string{metaKey(s.prefix, l.id)}).Err(); err != nil {
		return storeErr("delete counter", err, true)
	}
	return nil
}

// deleteKeys deletes the shard and request-id keys of shards [0, n).
func (s *CounterStore) deleteKeys(ctx context.Context, l *layout, n int) error {
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range n {
			p.Del(ctx, l.keys.shard(i))
			p.Del(ctx, l.keys.ids(i))
		}
		return nil
	})
	return storeErr("delete counter keys", err, true)
}

// ReadCounter returns the exact sum of the counter's shards: one pipelined
// HMGET per shard, which the cluster client sends as one round trip per
// master. On one server the reads run in MULTI/EXEC, an atomic snapshot. On
// a cluster no snapshot spans masters: each shard is read once, atomically,
// and the sum counts every write acknowledged before the read began plus
// some of those running concurrently — never a write twice, never a
// reshard half done (the shards' epochs must all match).
func (s *CounterStore) ReadCounter(ctx context.Context, id string) (*shardcounter.Reading, error) {
	l, vals, err := s.readShards(ctx, id)
	if err != nil {
		return nil, err
	}
	sum, ok := overflow.Sum(vals)
	if !ok {
		return nil, shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: the sum of its shards leaves the int64 range", id)
	}
	return &shardcounter.Reading{ID: id, Value: sum, Shards: l.n, Consistency: shardcounter.Strong, AsOf: time.Now().UTC()}, nil
}

// ReadShards returns the counter and its shard values, read as ReadCounter
// reads them.
func (s *CounterStore) ReadShards(ctx context.Context, id string) (*shardcounter.Counter, []int64, error) {
	l, vals, err := s.readShards(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return l.counter(), vals, nil
}

func (s *CounterStore) readShards(ctx context.Context, id string) (*layout, []int64, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, nil, err
	}
	for attempt := range maxAttempts {
		l, err := s.layout(ctx, id, attempt > 0)
		if err != nil {
			return nil, nil, err
		}
		vals, err := s.readValues(ctx, l)
		if err == errStale || retryable(err) {
			s.forget(id)
			continue
		}
		if err != nil {
			return nil, nil, storeErr("read counter", err, false)
		}
		return l, vals, nil
	}
	return nil, nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "redis: counter %q keeps changing: try again", id)
}

// readValues reads shards [0, l.n) and checks that each is at l's epoch.
func (s *CounterStore) readValues(ctx context.Context, l *layout) ([]int64, error) {
	cmds := make([]*goredis.SliceCmd, l.n)
	fill := func(p goredis.Pipeliner) error {
		for i := range l.n {
			cmds[i] = p.HMGet(ctx, l.keys.shard(i), "v", "e")
		}
		return nil
	}
	var err error
	if s.cluster == nil {
		_, err = s.client.TxPipelined(ctx, fill)
	} else {
		_, err = s.client.Pipelined(ctx, fill)
	}
	if err != nil {
		return nil, err
	}
	ep := l.ep()
	vals := make([]int64, l.n)
	for i, c := range cmds {
		r := c.Val()
		if e, _ := r[1].(string); e != ep {
			return nil, errStale
		}
		v, _ := r[0].(string)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "redis: shard %d of counter %q holds %q, not an integer", i, l.id, v)
		}
		vals[i] = n
	}
	return vals, nil
}

// runScript runs a script with EVALSHA, loading it on NOSCRIPT (a new or
// restarted server) and trying once more.
func (s *CounterStore) runScript(ctx context.Context, sc *goredis.Script, keys []string, args ...any) *goredis.Cmd {
	c := sc.EvalSha(ctx, s.client, keys, args...)
	if err := c.Err(); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
		if err := s.loadScripts(ctx); err != nil {
			return c
		}
		c = sc.EvalSha(ctx, s.client, keys, args...)
	}
	return c
}

// loadScripts loads every script of the store, on every master of a
// cluster.
func (s *CounterStore) loadScripts(ctx context.Context) error {
	for _, sc := range allScripts {
		if err := sc.Load(ctx, s.client).Err(); err != nil {
			return err
		}
	}
	return nil
}
