package bolt

import (
	"bytes"
	"context"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
	"github.com/shardcounter/shardcounter/internal/overflow"
)

// Add adds delta to shard pick mod n in its own synced transaction: the
// seed algorithm, one store write per increment.
func (s *CounterStore) Add(ctx context.Context, id string, delta int64, pick uint64) error {
	var out [1]shardcounter.Outcome
	if err := s.apply(ctx, []shardcounter.Increment{{Counter: id, Delta: delta, Pick: pick}}, out[:]); err != nil {
		return err
	}
	return out[0].Err
}

// Apply applies the batch in one synced transaction: package decide
// decides it on lookups in the transaction (view), and its mutations are
// written in the same transaction. Items that fail on their own are
// skipped and reported. Each counter's record and total are read once per
// batch, and each item costs a few key reads and writes, so a batch's work
// is proportional to its items and counters.
func (s *CounterStore) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	out := make([]shardcounter.Outcome, len(incs))
	if err := s.apply(ctx, incs, out); err != nil {
		return nil, err
	}
	return out, nil
}

// apply applies incs in one transaction and sets their outcomes in out.
func (s *CounterStore) apply(ctx context.Context, incs []shardcounter.Increment, out []shardcounter.Outcome) error {
	if len(incs) == 0 {
		return nil
	}
	now := s.now()
	cutoff := now.UnixNano() - s.window.Load()
	return s.update(ctx, func(tx *bbolt.Tx) error {
		v := &view{
			tx:       tx,
			counters: tx.Bucket(bucketCounters),
			shards:   tx.Bucket(bucketShards),
			members:  tx.Bucket(bucketMembers),
			window:   tx.Bucket(bucketWindow),
			requests: tx.Bucket(bucketRequests),
			byTime:   tx.Bucket(bucketByTime),
			sketches: tx.Bucket(bucketSketches),
		}
		m, err := decide.Decide(v, decide.Batch{Incs: incs, Now: now, Cutoff: time.Unix(0, cutoff)}, out)
		if err != nil {
			return err
		}
		if err := v.write(m, now.UnixNano()); err != nil {
			return err
		}
		return expire(v.requests, v.byTime, cutoff, expireBatch+len(m.Requests))
	})
}

// view is a write transaction's buckets, as package decide reads them
// (decide.View) and as the batch's mutations are written to them.
type view struct {
	tx                                                            *bbolt.Tx
	counters, shards, members, window, requests, byTime, sketches *bbolt.Bucket
}

// Counter returns the counter's record and total.
func (v *view) Counter(id string) (decide.Counter, error) {
	b := v.counters.Get([]byte(id))
	if b == nil {
		return decide.Counter{}, nil
	}
	m, err := decodeMeta(b)
	if err != nil {
		return decide.Counter{Exists: true, Err: shardcounter.Errorf(shardcounter.EINTERNAL, "counter %q: %v", id, err)}, nil
	}
	c := decide.Counter{Exists: true, Spec: m.spec}
	if m.spec.Kind != shardcounter.KindApprox { // its value is an estimate, read on demand
		var ok bool
		if c.Total, ok = overflow.Sum(readShards(v.tx, id, m.spec.Shards)); !ok {
			c.Sum = decide.SumOverflows
		}
	}
	return c, nil
}

func (v *view) Shard(counter string, shard int) (int64, bool, error) {
	return decodeInt(v.shards.Get(shardKey(counter, shard))), true, nil
}

func (v *view) Request(counter, id string) (time.Time, bool, error) {
	b := v.requests.Get(requestKey(counter, id))
	return time.Unix(0, decodeInt(b)), b != nil, nil
}

func (v *view) Member(counter, member string) (bool, error) {
	return has(v.members, memberKey(counter, member)), nil
}

func (v *view) Bucket(counter string, start time.Time) (int64, bool, error) {
	return decodeInt(v.window.Get(bucketKey(counter, start))), true, nil
}

func (v *view) Sketch(counter string, shard int) ([]byte, error) {
	return bytes.Clone(v.sketches.Get(shardKey(counter, shard))), nil
}

// write puts the batch's mutations in the transaction; the view knows
// every shard and bucket, so each takes its new value. ns is the commit
// time.
func (v *view) write(m decide.Mutations, ns int64) error {
	for _, c := range m.Counters {
		if c.Create {
			if err := v.counters.Put([]byte(c.ID), encodeMeta(newMeta(*c.Spec, ns))); err != nil {
				return err
			}
		}
	}
	for _, w := range m.Shards {
		if err := v.shards.Put(shardKey(w.Counter, w.Shard), encodeInt(w.Value)); err != nil {
			return err
		}
	}
	for _, w := range m.Members {
		var err error
		if w.Present {
			err = v.members.Put(memberKey(w.Counter, w.Member), nil)
		} else {
			err = v.members.Delete(memberKey(w.Counter, w.Member))
		}
		if err != nil {
			return err
		}
	}
	for _, r := range m.Requests {
		rkey := requestKey(r.Counter, r.ID)
		if r.Expired { // not yet deleted: its entry by time goes
			if err := v.byTime.Delete(timeKey(r.Was.UnixNano(), rkey)); err != nil {
				return err
			}
		}
		if err := v.requests.Put(rkey, encodeInt(ns)); err != nil {
			return err
		}
		if err := v.byTime.Put(timeKey(ns, rkey), nil); err != nil {
			return err
		}
	}
	for _, b := range m.Buckets {
		if err := sweep(v.window, b.Counter, b.Sweep); err != nil {
			return err
		}
		if err := v.window.Put(bucketKey(b.Counter, b.Start), encodeInt(b.Value)); err != nil {
			return err
		}
	}
	for _, w := range m.Sketches {
		if err := v.sketches.Put(shardKey(w.Counter, w.Shard), w.New); err != nil {
			return err
		}
	}
	for _, id := range m.Removes {
		if err := deleteCounter(v.tx, id); err != nil {
			return err
		}
	}
	return nil
}

// expire deletes up to limit request ids recorded at or before cutoff,
// oldest first.
func expire(requests, byTime *bbolt.Bucket, cutoff int64, limit int) error {
	c := byTime.Cursor()
	for k, _ := c.First(); k != nil && limit > 0 && decodeInt(k[:8]) <= cutoff; k, _ = c.First() {
		if err := requests.Delete(k[8:]); err != nil {
			return err
		}
		if err := c.Delete(); err != nil {
			return err
		}
		limit--
	}
	return nil
}
