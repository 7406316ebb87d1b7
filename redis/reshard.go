package redis

import (
	"context"
	"errors"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
	"github.com/shardcounter/shardcounter/internal/overflow"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// errMoved says that the reshard being finished is over: another client
// finished it, or the counter moved on. It never leaves the package.
var errMoved = errors.New("redis: reshard finished elsewhere")

// ReshardCounter changes the counter's shard count, keeping its value
// exactly while writes go on, from any number of processes, and across a
// crash at any point. It records an intent in the metadata, then runs
// finishReshard, whose steps any client that meets the intent also runs;
// see the package doc for the protocol.
func (s *CounterStore) ReshardCounter(ctx context.Context, id string, shards int) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	if err := shardcounter.ValidateShards(shards); err != nil {
		return nil, err
	}
	for range maxAttempts {
		l, err := s.layout(ctx, id, true) // finishes an earlier intent first
		if err != nil {
			return nil, err
		}
		if l.n == shards {
			return l.counter(), nil
		}
		if shards > l.n {
			if err := s.prepare(ctx, l, shards); err != nil {
				return nil, err
			}
		}
		ok, err := s.runScript(ctx, intentScript, []string{metaKey(s.prefix, id)}, l.ep(), shards, "", "").Int()
		if err != nil {
			return nil, storeErr("reshard", err, true)
		}
		switch ok {
		case -1:
			return nil, notFound(id)
		case 0:
			continue // another reshard got there first: help it, then ours
		}
		l.state, l.to = stateReshard, shards
		if err := s.step("intent"); err != nil {
			return nil, err
		}
		if err := s.finishReshard(ctx, l); err != nil && err != errMoved {
			return nil, err
		}
		if l, err = s.layout(ctx, id, true); err != nil {
			return nil, err
		}
		if l.n == shards {
			return l.counter(), nil
		}
	}
	return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "redis: counter %q keeps changing: try again", id)
}

// finishReshard runs the steps of the reshard recorded in l, from n = l.n
// shards at epoch E = l.epoch to m = l.to shards at epoch E+1. Every step
// is idempotent and checks the epochs it acts on, so it may run in several
// clients at once, again after a crash, or late:
//
//  1. Fence: every old shard moves from epoch E to E+1. A writer holding
//     layout E is refused from then on and comes back through the
//     metadata, where it meets the intent and helps finish it. No writer
//     holds layout E+1 before step 4, so once fenced the counter is frozen.
//  2. Grow: shards [n, m) are reset to epoch E+1 and value 0. Their keys
//     were prepared by the reshard's caller before it recorded the intent
//     (prepare); this step never creates a key, so a helper running
//     it late, after the counter was deleted, cannot bring one back.
//  3. Shrink: the removed shards k in [m, n) are folded into shard k mod m:
//     one script per target sets its value to the sum of the frozen values
//     and the marker fd in one step, and does nothing when the marker is
//     there. So a fold applies exactly once however often the step runs.
//     Before any fold, the targets' sums are checked to fit in int64; when
//     one would not, the intent is changed to keep n shards
//     (ErrOutOfRange).
//  4. Allow: the shards of the new layout get their allowances (see
//     allowance.go), computed from their frozen values, so every client
//     computes the same; a marker makes the step run once per shard. A
//     freeze (m = n, asked for by a read, see freeze) skips it; a
//     rebalance first levels the shards' values when the write it is for
//     cannot go on its shard but fits the total (makeRoom, level).
//  5. Commit: the metadata gets m shards and epoch E+1 in one script that
//     checks the intent is still the one being finished.
//  6. No clean-up: the removed shard keys are kept, frozen at epoch E+1,
//     until a later grow resets them or the counter is deleted. A shard key
//     is never deleted while its counter lives, so its epoch only ever
//     grows, which is what makes a late step harmless. Deleting them here
//     was not: the step could run after a later reshard had grown the
//     counter again and made the keys live shards (their writes were
//     lost), and a helper's late grow step (2) would create a deleted key
//     again at its older epoch, where a writer still holding that layout
//     had its write acknowledged and lost.
func (s *CounterStore) finishReshard(ctx context.Context, l *layout) error {
	n, m := l.n, l.to
	oldEp, newEp := l.ep(), strconv.FormatInt(l.epoch+1, 10)

	if err := s.fence(ctx, l, oldEp, newEp); err != nil {
		return err
	}
	if err := s.step("fence"); err != nil {
		return err
	}

	if m > n {
		is := seq(n, m)
		res := make([]int, len(is))
		j := 0
		if err := s.eachOf(ctx, is, func(p goredis.Pipeliner, i int) *goredis.Cmd {
			return initScript.EvalSha(ctx, p, []string{l.keys.shard(i), l.keys.buckets(i), l.keys.bucketIndex(i)}, newEp)
		}, func(c *goredis.Cmd) error {
			r, err := c.Int()
			res[j], j = r, j+1
			return err
		}); err != nil {
			return storeErr("reshard: create shards", err, true)
		}
		for j, r := range res {
			if r == -1 { // prepared before the intent: the counter is gone
				return s.lostShard(ctx, l, is[j])
			}
		}
		if err := s.step("init"); err != nil {
			return err
		}
	}

	moving := l.distinct() && m != n
	if moving {
		if err := s.moveMembers(ctx, l, newEp); err != nil {
			return err
		}
	} else if m < n {
		err := s.fold(ctx, l, newEp)
		if errors.Is(err, shardcounter.ErrOutOfRange) {
			// Keep n shards: no fold has run (all are checked first),
			// so committing n shards at epoch E+1 is exact.
			if _, rerr := s.runScript(ctx, retargetScript, []string{metaKey(s.prefix, l.id)}, oldEp, m, n).Int(); rerr != nil {
				return storeErr("reshard: abandon", rerr, true)
			}
			l.to = n
			if rerr := s.finishReshard(ctx, l); rerr != nil && rerr != errMoved {
				return rerr
			}
			return err
		}
		if err != nil {
			return err
		}
	}

	if err := s.makeRoom(ctx, l, newEp); err != nil {
		return err
	}

	// The steps before must survive a failover before the commit makes
	// writers use the new layout: a fence lost with its master would leave
	// a shard that refuses the committed epoch for ever.
	if err := s.sync(ctx, l.keys.shards(max(n, m))...); err != nil {
		return err
	}
	hist := s.nextHistory(l, m, s.now().UnixMilli())
	gen := ""
	if moving {
		gen = newEp
	}
	ok, err := s.runScript(ctx, commitScript, []string{metaKey(s.prefix, l.id)}, oldEp, m, newEp, hist, max(l.max, m), gen).Int()
	if err != nil {
		return storeErr("reshard: commit", err, true)
	}
	s.forget(l.id)
	if ok == 0 {
		return errMoved
	}
	if moving { // the old generation's sets: every copy from them is done
		s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i := range n {
				p.Del(ctx, l.keys.members(i, l.memberGen))
			}
			return nil
		})
	}
	if err := s.sync(ctx, metaKey(s.prefix, l.id)); err != nil {
		return err
	}
	// The removed shard keys stay, fenced at E+1 and frozen: see step 6.
	return s.step("commit")
}

// fence runs step 1 of finishReshard. When every old shard answers that
// it is at the new epoch and has taken no write since it was fenced (its
// version w is the one recorded at the fence, fw), l.frozen holds their
// values: each was the shard's value from its fence until after the
// commit, so together they are the counter's value at the moment the last
// shard was fenced, whoever fenced it or commits. Otherwise l.frozen is
// nil (a writer already wrote at the new epoch: the reshard is over).
func (s *CounterStore) fence(ctx context.Context, l *layout, oldEp, newEp string) error {
	vals := make([]int64, l.n)
	xs := make([][]byte, l.n)
	frozen := true
	j := 0
	err := s.eachOf(ctx, seq(0, l.n), func(p goredis.Pipeliner, i int) *goredis.Cmd {
		return fenceScript.EvalSha(ctx, p, []string{l.keys.shard(i)}, oldEp, newEp)
	}, func(c *goredis.Cmd) error {
		k := j
		j++
		r, err := c.Slice()
		if err != nil {
			return err
		}
		if len(r) != 5 {
			frozen = false
			return nil
		}
		if x, _ := r[4].(string); x != "" {
			xs[k] = []byte(x)
		}
		v, _ := r[1].(string)
		w, _ := r[2].(string)
		fw, _ := r[3].(string)
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || w != fw {
			frozen = false
			return nil
		}
		vals[k] = n
		return nil
	})
	if err != nil {
		return storeErr("reshard: fence shards", err, true)
	}
	l.frozen, l.frozenX = nil, nil
	if frozen {
		l.frozen, l.frozenX = vals, xs
	}
	return nil
}

// allow runs step 4 of finishReshard: it reads the values of the new
// layout's shards, frozen until the commit, and gives each shard its
// allowance (see allowance.go) unless it has it already.
func (s *CounterStore) allow(ctx context.Context, l *layout, newEp string) error {
	m := l.to
	hs, err := s.frozenShards(ctx, l, m, newEp, "reshard")
	if err != nil {
		return err
	}
	vals := make([]int64, m)
	var todo []int
	for i, h := range hs {
		if vals[i], err = intField(l, i, h, "v"); err != nil {
			return err
		}
		if h["ae"] != newEp {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	w := l.need
	if w != nil && l.to != l.n {
		w = nil // asked for under another shard count
	}
	rooms := allowances(vals, w)
	return s.eachOf(ctx, todo, func(p goredis.Pipeliner, i int) *goredis.Cmd {
		return allowScript.EvalSha(ctx, p, []string{l.keys.shard(i)}, newEp, rooms[i].up, rooms[i].dn)
	}, func(c *goredis.Cmd) error {
		switch r, err := c.Int(); {
		case err != nil:
			return storeErr("reshard: set allowances", err, true)
		case r == -1:
			return errMoved
		}
		return nil
	})
}

// moveMembers runs step 3 of finishReshard for a distinct counter, whose
// members must be on shard ForMember(m) mod the new count: in a new member
// generation, named by the new epoch, it starts every new shard at 0
// (resetMembersScript, once each), then copies every member of every old
// shard's set, frozen since the fence, into the set of its new shard,
// counting those added (copyMembersScript, which refuses to run once a
// writer wrote the shard: the reshard is then over). Copies are
// idempotent, so helpers may run them together or again. It costs a read
// and a write of every member: a distinct counter's reshard is
// proportional to its members.
func (s *CounterStore) moveMembers(ctx context.Context, l *layout, newEp string) error {
	n, m := l.n, l.to
	gen := l.epoch + 1
	moved := func(c *goredis.Cmd) error {
		switch r, err := c.Int(); {
		case err != nil:
			return storeErr("reshard: move members", err, true)
		case r == -1:
			return errMoved
		}
		return nil
	}
	if err := s.eachOf(ctx, seq(0, m), func(p goredis.Pipeliner, i int) *goredis.Cmd {
		return resetMembersScript.EvalSha(ctx, p, []string{l.keys.shard(i)}, newEp, gen)
	}, moved); err != nil {
		return err
	}
	const chunk = 1000
	for i := range n {
		lo := "-"
		for {
			ms, err := s.client.ZRangeByLex(ctx, l.keys.members(i, l.memberGen), &goredis.ZRangeBy{Min: lo, Max: "+", Count: chunk}).Result()
			if err != nil {
				return storeErr("reshard: read members", err, false)
			}
			if len(ms) == 0 {
				break
			}
			to := make(map[int][]any)
			var targets []int
			for _, x := range ms {
				t := shard.Of(shard.ForMember(x), m)
				if to[t] == nil {
					targets = append(targets, t)
				}
				to[t] = append(to[t], x)
			}
			if err := s.eachOf(ctx, targets, func(p goredis.Pipeliner, t int) *goredis.Cmd {
				return copyMembersScript.EvalSha(ctx, p, []string{l.keys.shard(t), l.keys.members(t, gen)}, append([]any{newEp, gen}, to[t]...)...)
			}, moved); err != nil {
				return err
			}
			if len(ms) < chunk {
				break
			}
			lo = "(" + ms[len(ms)-1]
		}
		if err := s.step("copy"); err != nil { // tests: stop between two old shards
			return err
		}
	}
	return s.step("move")
}

// fold runs step 3 of finishReshard: each kept shard t that removed
// shards k ≡ t (mod m) fold into takes, in one script (foldScript), their
// sum with its own value, computed here from the frozen values (set, not
// added, so that no partial sum of them need fit in int64), their
// buckets, and an approx counter's union of their sketches (package
// decide's decide.FoldSketches). The marker fd, the new epoch, makes a
// re-run a no-op.
func (s *CounterStore) fold(ctx context.Context, l *layout, newEp string) error {
	n, m := l.n, l.to
	hs, err := s.frozenShards(ctx, l, n, newEp, "reshard")
	if err != nil {
		return err
	}
	vals := make([][]int64, m) // each target's value, then the values folded into it
	sk := make([][]byte, n)
	for i, h := range hs {
		v, err := intField(l, i, h, "v")
		if err != nil {
			return err
		}
		vals[i%m] = append(vals[i%m], v)
		if h["x"] != "" {
			sk[i] = []byte(h["x"])
		}
	}
	// Which targets are still to fold, and do their sums fit?
	var todo []int
	finals := make([]int64, m)
	for t := range min(m, n-m) {
		var ok bool
		if finals[t], ok = overflow.Sum(vals[t]); !ok {
			return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: folding shards into shard %d would leave the int64 range; the counter keeps %d shards", l.id, t, n)
		}
		if hs[t]["fd"] != newEp {
			todo = append(todo, t)
		}
	}
	unions, _, err := decide.FoldSketches(sk, m)
	if err != nil {
		return shardcounter.Errorf(shardcounter.EINTERNAL, "redis: reshard counter %q: %v", l.id, err)
	}
	// A windowed counter's removed shards fold their buckets too.
	buckets := make([][]any, m)
	if l.spec.Window != nil {
		bcmds := make([]*goredis.MapStringStringCmd, n)
		if _, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, t := range todo {
				for k := t + m; k < n; k += m {
					bcmds[k] = p.HGetAll(ctx, l.keys.buckets(k))
				}
			}
			return nil
		}); err != nil {
			return storeErr("reshard: read buckets", err, false)
		}
		for k, c := range bcmds {
			if c == nil {
				continue // not removed, or its target folded already
			}
			for start, v := range c.Val() {
				buckets[k%m] = append(buckets[k%m], start, v)
			}
		}
	}
	keys := func(t int) []string { return []string{l.keys.shard(t), l.keys.buckets(t), l.keys.bucketIndex(t)} }
	args := func(t int) []any { return append([]any{newEp, finals[t], unions[t]}, buckets[t]...) }
	check := func(c *goredis.Cmd) error {
		switch r, err := c.Int(); {
		case err != nil:
			return storeErr("reshard: fold shards", err, true)
		case r == -1:
			return errMoved
		}
		return nil
	}
	if s.hook != nil { // one at a time, so a test can stop between two folds
		for _, t := range todo {
			if err := check(s.runScript(ctx, foldScript, keys(t), args(t)...)); err != nil {
				return err
			}
			if err := s.step("fold"); err != nil {
				return err
			}
		}
		return nil
	}
	return s.eachOf(ctx, todo, func(p goredis.Pipeliner, t int) *goredis.Cmd {
		return foldScript.EvalSha(ctx, p, keys(t), args(t)...)
	}, check)
}

// frozenShards reads the hashes of shards [0, n) of l, fenced at newEp
// (frozen until the reshard's commit), for step op.
func (s *CounterStore) frozenShards(ctx context.Context, l *layout, n int, newEp, op string) ([]map[string]string, error) {
	cmds := make([]*goredis.MapStringStringCmd, n)
	if _, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range n {
			cmds[i] = p.HGetAll(ctx, l.keys.shard(i))
		}
		return nil
	}); err != nil {
		return nil, storeErr(op+": read shards", err, false)
	}
	hs := make([]map[string]string, n)
	for i, c := range cmds {
		if hs[i] = c.Val(); hs[i]["e"] != newEp {
			return nil, s.lostShard(ctx, l, i)
		}
	}
	return hs, nil
}

// intField returns field f of shard i's hash h.
func intField(l *layout, i int, h map[string]string, f string) (int64, error) {
	v, err := strconv.ParseInt(h[f], 10, 64)
	if err != nil {
		return 0, shardcounter.Errorf(shardcounter.EINTERNAL, "redis: shard %d of counter %q holds %q in %s, not an integer", i, l.id, h[f], f)
	}
	return v, nil
}

// lostShard explains why shard i of l is not at the reshard's new epoch
// after the fence: the reshard is over (another client finished it and
// removed the shard), or the shard's key was lost.
func (s *CounterStore) lostShard(ctx context.Context, l *layout, i int) error {
	m, err := s.client.HGetAll(ctx, metaKey(s.prefix, l.id)).Result()
	if err != nil {
		return storeErr("reshard: read counter metadata", err, false)
	}
	cur, err := s.parseLayout(l.id, m)
	if err != nil {
		return err
	}
	if cur == nil || cur.epoch != l.epoch || cur.state != stateReshard || cur.to != l.to {
		return errMoved
	}
	return shardcounter.Errorf(shardcounter.EINTERNAL, "redis: counter %q: shard key %q is missing or at another epoch; was data lost (FLUSHALL, a failover)?", l.id, l.keys.shard(i))
}

// prepare makes placeholders of the shards [l.n, to) that a grow to to
// shards will use, before its intent is recorded: epoch 0, which no writer
// holds, unless the key exists. The helpers that finish the grow only
// reset keys that exist (initScript), so a helper running late, after the
// counter was deleted, cannot bring a shard key of it back.
func (s *CounterStore) prepare(ctx context.Context, l *layout, to int) error {
	err := s.eachOf(ctx, seq(l.n, to), func(p goredis.Pipeliner, i int) *goredis.Cmd {
		return createScript.EvalSha(ctx, p, []string{l.keys.shard(i)}, "v", 0, "e", 0)
	}, func(c *goredis.Cmd) error { return c.Err() })
	return storeErr("reshard: prepare shards", err, true)
}

// seq returns the integers [from, to).
func seq(from, to int) []int {
	is := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		is = append(is, i)
	}
	return is
}

// eachOf runs f for each of is in one pipeline and check on each result.
// When a node did not have a script loaded it loads the scripts there and runs
// the whole pipeline again: the reshard steps are idempotent, so the
// commands that did run the first time may run twice.
func (s *CounterStore) eachOf(ctx context.Context, is []int, f func(p goredis.Pipeliner, i int) *goredis.Cmd, check func(*goredis.Cmd) error) error {
	for try := 0; ; try++ {
		cmds := make([]*goredis.Cmd, len(is))
		_, _ = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for j, i := range is {
				cmds[j] = f(p, i)
			}
			return nil
		})
		loaded := false
		for _, c := range cmds {
			if try == 0 && goredis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
				if err := s.loadScripts(ctx, scriptKey(c)); err != nil {
					return err
				}
				loaded = true
			}
		}
		if loaded {
			continue
		}
		for _, c := range cmds {
			if err := check(c); err != nil {
				return err
			}
		}
		return nil
	}
}

func (s *CounterStore) step(name string) error {
	if s.hook == nil {
		return nil
	}
	return s.hook(name)
}
