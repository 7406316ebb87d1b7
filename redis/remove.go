package redis

import (
	"context"
	"errors"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
)

// Removals of idle limit states (shardcounter.LimitTake.Remove).
//
// A key's state counter has keys in two slots: its shards and shard 0's
// request ids in the state's slot (keys.oneSlot), its metadata and index
// entry in its index bucket's. A removal is decided where the takes are,
// by takeScript, on the shards it reads in the same atomic step as any
// take of the key (decide.Idle's rule, the busy-key rule below): an idle
// state's shard keys and request ids are deleted there (resRemoved), so
// a take after it finds no state to take from and one before it made
// the state not idle and kept it; no admitted take is lost. Then, in the
// same Apply call, removeStateScript drops the metadata and the index
// entry, but only while the metadata still names the removed incarnation
// and records no reshard or delete: a state created again meanwhile has
// a new incarnation, and its metadata and index entry stay. (A create
// cannot overtake the removal: createCounterScript fails while the old
// metadata exists, and the writer then meets the gone state below.)
//
// Between the two steps, and for good when the second fails or the
// process stops, the metadata names shards that no longer exist: the
// state is gone. Whoever meets it finishes the removal: takeScript
// answers a take or removal on it resGone, and a read finds its shard
// missing (errGone); either runs removeStateScript and tries again,
// finding the key missing. Only a removal leaves a state's metadata
// without its shards: a new counter's shards are made before its
// metadata, and a delete marks the metadata first (removeStateScript
// then leaves it for the delete to finish).

// removeStateScript removes the metadata KEYS[1] of limit state ARGV[1]
// and its entry in index bucket KEYS[2], when the metadata names
// incarnation ARGV[2] and no reshard or delete. It returns 1 when it
// removed them.
var removeStateScript = goredis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'i', 'st')
if m[1] ~= ARGV[2] or (m[2] and m[2] ~= '') then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
return redis.call('DEL', KEYS[1])
`)

// busy reports whether an item of the batch incs other than a removal is
// on counter id: package decide then keeps a removal of id (Skipped), so
// that a removal never meets a write of its own batch.
func (b *batch) busy(incs []shardcounter.Increment, id string) bool {
	if b.touched == nil {
		b.touched = make(map[string]bool, len(incs))
		for _, inc := range incs {
			if inc.Take == nil || !inc.Take.Remove {
				b.touched[inc.Counter] = true
			}
		}
	}
	return b.touched[id]
}

// removal notes, in plan, that inc is sent: when it is a removal, a later
// item of its counter that the counter's spec refuses (a removal under a
// policy of another shape) waits for the next attempt, since package
// decide finds the counter missing, and keeps that item (Skipped), when
// the removal removed it.
func (a *attempt) removal(inc shardcounter.Increment) {
	if inc.Take == nil || !inc.Take.Remove {
		return
	}
	if a.removing == nil {
		a.removing = make(map[string]bool)
	}
	a.removing[inc.Counter] = true
}

// dropStates removes the metadata and index entries of the limit states
// ls, whose keys are removed (see above): one removeStateScript each, in
// one pipeline per master. It is the removal's second step, and anyone
// may repeat it: an error leaves the metadata to whoever next meets the
// state, so it is not the removal's outcome.
func (s *CounterStore) dropStates(ctx context.Context, ls []*layout) {
	if len(ls) == 0 {
		return
	}
	run := func() *nodeRuns {
		nr := newNodeRuns(s)
		seen := make(map[*layout]bool, len(ls))
		for _, l := range ls {
			if seen[l] {
				continue
			}
			seen[l] = true
			s.forget(l.id)
			keys := []string{metaKey(s.prefix, l.id), bucketKey(s.prefix, bucketOf(l.id))}
			nr.add(ctx, keys[0], func(p goredis.Pipeliner) *goredis.Cmd {
				return removeStateScript.EvalSha(ctx, p, keys, l.id, l.keys.incarnation)
			})
		}
		s.runOnNodes(ctx, nr.runs)
		return nr
	}
	if nr := run(); nr.loadScripts(ctx) == nil && noScript(nr) {
		run() // a node that had not loaded the script: once more
	}
}

// noScript reports whether a node of nr answered NOSCRIPT.
func noScript(nr *nodeRuns) bool {
	for _, r := range nr.runs {
		for _, c := range r.cmds {
			if goredis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
				return true
			}
		}
	}
	return false
}

// errGone says that a read found a limit state's shard missing under its
// metadata: the state was removed (see above). It never leaves the
// package.
var errGone = errors.New("redis: limit state removed")
