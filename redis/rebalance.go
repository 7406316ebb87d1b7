package redis

import (
	"context"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
)

// A rebalance is a reshard to the counter's own shard count asked for by
// a write that found too little room on its shard (allowance.go): it
// freezes the shards, levels their values when the write's shard cannot
// hold it although the total can (level), hands the allowances out again
// (allow), and commits. A strong read that cannot get two equal collects
// freezes the counter the same way, without a write (freeze).

// makeRoom runs steps 4a (level, for a rebalance) and 4 (allow) of
// finishReshard. A plain freeze leaves the values, and so the
// allowances, as they are.
func (s *CounterStore) makeRoom(ctx context.Context, l *layout, newEp string) error {
	if l.to == l.n && l.need != nil && !l.distinct() {
		if err := s.level(ctx, l, newEp); err != nil {
			return err
		}
	}
	if !l.rooms() || (l.to == l.n && l.need == nil) {
		return nil
	}
	if err := s.allow(ctx, l, newEp); err != nil {
		return err
	}
	return s.step("allow")
}

// level runs the step of a rebalance (a freeze asked for by a write that
// found no room, l.need) that makes room on the write's shard when the
// shard cannot hold the write but the total can: out of range is judged
// on the total alone. The shards are frozen from the fence until the
// commit, and no reader sees their values before the commit (a reader's
// layout is at the old epoch until then), so their values may be moved
// between them: each is set to an equal share of the total (levelScript,
// once per shard, keeping the value it replaces), after which every
// shard has room for any write the total has room for. Every client that
// runs the step computes the same shares, from the values the shards had
// at the fence (the replaced ones, for shards already leveled). Request
// ids and window buckets stay on their shards.
func (s *CounterStore) level(ctx context.Context, l *layout, newEp string) error {
	n := l.n
	hs, err := s.frozenShards(ctx, l, n, newEp, "rebalance")
	if err != nil {
		return err
	}
	orig := make([]int64, n)
	var todo []int
	for i, h := range hs {
		field := "v"
		if h["lv"] == newEp {
			field = "ov" // leveled already: its value at the fence is in ov
		} else {
			todo = append(todo, i)
		}
		if orig[i], err = intField(l, i, h, field); err != nil {
			return err
		}
	}
	// Package decide says whether the total has room for the write, and
	// whether its shard has: a write it would put on another shard calls
	// for the level.
	w := l.need
	if len(todo) == 0 || w.shard < 0 || w.shard >= n {
		return nil
	}
	o, m := frozen(l, orig, shardcounter.Increment{Counter: l.id, Delta: w.delta, Pick: uint64(w.shard)})
	if o.Err != nil || len(m.Shards) == 0 || m.Shards[0].Shard == w.shard {
		return nil
	}
	shares := levelShares(orig)
	return s.eachOf(ctx, todo, func(p goredis.Pipeliner, i int) *goredis.Cmd {
		return levelScript.EvalSha(ctx, p, []string{l.keys.shard(i)}, newEp, shares[i], orig[i])
	}, func(c *goredis.Cmd) error {
		switch r, err := c.Int(); {
		case err != nil:
			return storeErr("rebalance: level shards", err, true)
		case r == -1:
			return errMoved
		}
		return nil
	})
}

// freeze runs a reshard to the counter's own shard count: it freezes the
// shards, takes their values while they are frozen (see fence), gives them
// their allowances again, w's first, when w is set (a rebalance, see
// allowance.go), and commits. It returns the values, and an approx
// counter's sketches, which the counter held at a moment during the call,
// or nil when another client's reshard got there first or writers came
// back before the values were taken (the caller reloads the layout, which
// finishes any reshard, and tries again).
func (s *CounterStore) freeze(ctx context.Context, l *layout, w *need) ([]int64, [][]byte, error) {
	k, d := "", ""
	if w != nil {
		k, d = strconv.Itoa(w.shard), strconv.FormatInt(w.delta, 10)
	}
	ok, err := s.runScript(ctx, intentScript, []string{metaKey(s.prefix, l.id)}, l.ep(), l.n, k, d).Int()
	if err != nil {
		return nil, nil, storeErr("freeze counter", err, true)
	}
	switch ok {
	case -1:
		return nil, nil, notFound(l.id)
	case 0:
		return s.joinFreeze(ctx, l)
	}
	r := *l // l may be shared through the cache
	r.state, r.to, r.need, r.frozen, r.frozenX = stateReshard, l.n, w, nil, nil
	if err := s.finishReshard(ctx, &r); err != nil && err != errMoved {
		return nil, nil, err
	}
	return r.frozen, r.frozenX, nil
}

// joinFreeze helps finish the freeze that another client recorded on the
// layout l, when that is what is recorded, and returns the values its
// fence step found frozen (see fence: whoever fences, they are the
// counter's value at a moment during this call), or nil.
func (s *CounterStore) joinFreeze(ctx context.Context, l *layout) ([]int64, [][]byte, error) {
	m, err := s.client.HGetAll(ctx, metaKey(s.prefix, l.id)).Result()
	if err != nil {
		return nil, nil, storeErr("read counter metadata", err, false)
	}
	cur, err := s.parseLayout(l.id, m)
	if err != nil || cur == nil {
		return nil, nil, err
	}
	if cur.state != stateReshard || cur.epoch != l.epoch || cur.to != cur.n || cur.keys != l.keys {
		return nil, nil, nil
	}
	if err := s.finishReshard(ctx, cur); err != nil && err != errMoved {
		return nil, nil, err
	}
	return cur.frozen, cur.frozenX, nil
}
