package redis

import (
	"context"
	"math"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
)

// Windowed counters. Every applied write also adds its delta to the bucket
// of its commit time (the store's clock, Options.Now) on its own shard, so
// a window spreads over the masters as its counter does: a hash of bucket
// start -> sum, with a sorted set of the starts beside it, so that the
// write script can sweep up to four buckets past retention each time it
// writes — work proportional to writes, none while idle. A reshard folds a
// removed shard's buckets into its target with its value.

// ReadWindow returns the sum of the counter's buckets whose start lies in
// [from, to), read as a strong read is (see read.go): linearizable.
func (s *CounterStore) ReadWindow(ctx context.Context, id string, from, to time.Time) (*shardcounter.Reading, error) {
	l, byStart, err := s.readBuckets(ctx, id, from, to)
	if err != nil {
		return nil, err
	}
	var vals []int64
	for _, v := range byStart {
		vals = append(vals, v...)
	}
	sum, ok := overflow.Sum(vals)
	if !ok {
		return nil, shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: the sum of its window leaves the int64 range", id)
	}
	return &shardcounter.Reading{ID: id, Value: sum, Shards: l.n, Consistency: shardcounter.Strong, AsOf: s.now().UTC(),
		Window: &shardcounter.Interval{From: from, To: to}}, nil
}

// ReadSeries returns the counter's non-zero buckets whose start lies in
// [from, to), oldest first, each the sum over the shards.
func (s *CounterStore) ReadSeries(ctx context.Context, id string, from, to time.Time) ([]shardcounter.Bucket, error) {
	_, byStart, err := s.readBuckets(ctx, id, from, to)
	if err != nil {
		return nil, err
	}
	starts := make([]int64, 0, len(byStart))
	for st := range byStart {
		starts = append(starts, st)
	}
	slices.Sort(starts)
	var out []shardcounter.Bucket
	for _, st := range starts {
		v, ok := overflow.Sum(byStart[st])
		if !ok {
			return nil, shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: a bucket's sum leaves the int64 range", id)
		}
		if v != 0 {
			out = append(out, shardcounter.Bucket{Start: time.Unix(st, 0).UTC(), Value: v})
		}
	}
	return out, nil
}

// readBuckets reads every shard's buckets in [from, to) with the shard's
// epoch and version (bucketsScript): in one MULTI/EXEC on one server; on a
// cluster twice, until two reads agree on every shard's version, as a
// strong read's double collect does. It returns each bucket start's values
// on the shards.
func (s *CounterStore) readBuckets(ctx context.Context, id string, from, to time.Time) (*layout, map[int64][]int64, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, nil, err
	}
	lo := strconv.FormatInt(ceilUnix(from), 10)
	hi := strconv.FormatInt(ceilUnix(to), 10)
	var prev []string
	for attempt := range maxAttempts {
		l, err := s.layout(ctx, id, attempt > 0)
		if err != nil {
			return nil, nil, err
		}
		if l.spec.Window == nil {
			return nil, nil, shardcounter.Errorf(shardcounter.EINVALID, "counter %q has no window: create it with one to read by time", id)
		}
		if err := sleep(ctx, attempt); err != nil {
			return nil, nil, storeErr("read window", err, false)
		}
		cmds := make([]*goredis.Cmd, l.n)
		fill := func(p goredis.Pipeliner) error {
			for i := range l.n {
				cmds[i] = bucketsScript.EvalSha(ctx, p, []string{l.keys.shard(i), l.keys.buckets(i), l.keys.bucketIndex(i)}, lo, hi)
			}
			return nil
		}
		if s.cluster == nil {
			_, err = s.client.TxPipelined(ctx, fill)
		} else {
			_, err = s.client.Pipelined(ctx, fill)
		}
		if err != nil {
			if goredis.HasErrorPrefix(err, "NOSCRIPT") || retryable(err) {
				s.refresh(ctx, err)
				_ = s.loadScripts(ctx, l.keys.shard(0))
				for i := 1; i < l.n && s.cluster != nil; i++ {
					_ = s.loadScripts(ctx, l.keys.shard(i))
				}
				prev = nil
				continue
			}
			return nil, nil, storeErr("read window", err, false)
		}
		byStart := make(map[int64][]int64)
		vers := make([]string, l.n)
		stale := false
		for i, c := range cmds {
			r, err := c.Slice()
			if err != nil || len(r) < 2 || len(r)%2 != 0 {
				return nil, nil, storeErr("read window", err, false)
			}
			if e, _ := r[0].(string); e != l.ep() {
				stale = true
				break
			}
			vers[i], _ = r[1].(string)
			for j := 2; j < len(r); j += 2 {
				st, err1 := strconv.ParseInt(r[j].(string), 10, 64)
				v, err2 := strconv.ParseInt(r[j+1].(string), 10, 64)
				if err1 != nil || err2 != nil {
					return nil, nil, shardcounter.Errorf(shardcounter.EINTERNAL, "redis: counter %q has a corrupt bucket %v = %v", id, r[j], r[j+1])
				}
				byStart[st] = append(byStart[st], v)
			}
		}
		if stale {
			s.forget(id)
			prev = nil
			continue
		}
		if s.cluster == nil || slices.Equal(prev, vers) {
			return l, byStart, nil
		}
		prev = vers
	}
	return nil, nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "redis: counter %q is written too fast to read its window consistently: try again", id)
}

// ceilUnix returns the least whole Unix second at or after t.
func ceilUnix(t time.Time) int64 {
	u := t.Unix()
	if t.Nanosecond() > 0 && u < math.MaxInt64 {
		u++
	}
	return u
}
