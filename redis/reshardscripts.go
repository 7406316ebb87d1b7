package redis

import goredis "github.com/redis/go-redis/v9"

// The scripts of a reshard's steps (reshard.go) and of a rebalance of
// allowances (allowance.go), as scripts.go describes them.

// intentScript records a reshard intent in the metadata KEYS[1]: the
// counter at epoch ARGV[1] is to get ARGV[2] shards. A rebalance (see
// allowance.go) is a reshard to the same count that also records the
// write that asked for it: shard ARGV[3] ("" for none) wants delta
// ARGV[4]. It returns -1 when the counter does not exist, 0 when its epoch
// moved on or another intent is recorded (the caller reloads and helps
// that one finish), 1 when done.
var intentScript = goredis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'e', 'st')
if not m[1] then return -1 end
if m[1] ~= ARGV[1] or m[2] then return 0 end
redis.call('HSET', KEYS[1], 'st', 'reshard', 'to', ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'nk', ARGV[3], 'nd', ARGV[4]) end
return 1
`)

// retargetScript changes a recorded reshard intent's target from ARGV[2]
// to ARGV[3] at epoch ARGV[1]; a reshard that cannot finish (a folded
// shard would overflow) turns into a reshard to the current count.
var retargetScript = goredis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'e', 'st', 'to')
if m[1] ~= ARGV[1] or m[2] ~= 'reshard' or m[3] ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'to', ARGV[3])
return 1
`)

// commitScript ends a reshard: when the metadata KEYS[1] still records the
// intent (epoch ARGV[1], target ARGV[2]) it sets the shard count to ARGV[2],
// the epoch to ARGV[3], the layout history to ARGV[4], the highest shard
// count used to ARGV[5] and, when ARGV[6] is not "", a distinct counter's
// member generation to it, and clears the intent. It returns 1 when it did.
var commitScript = goredis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'e', 'st', 'to')
if m[1] ~= ARGV[1] or m[2] ~= 'reshard' or m[3] ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'n', ARGV[2], 'e', ARGV[3], 'h', ARGV[4], 'mx', ARGV[5])
if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'mg', ARGV[6]) end
redis.call('HDEL', KEYS[1], 'st', 'to', 'nk', 'nd')
return 1
`)

// fenceScript moves shard KEYS[1] from epoch ARGV[1] to ARGV[2], so that
// writers holding the old layout are refused, and records its version w
// as fw (so a reader can tell that no write came since). A shard at any
// other epoch is left alone, which makes the step idempotent and harmless
// when run late. It
// returns {1, v, w, fw, x} when it fenced the shard, {0, v, w, fw, x}
// when the shard was at ARGV[2] already, {-1} otherwise; x is an approx
// counter's sketch (” for none).
var fenceScript = goredis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'e', 'v', 'w', 'fw', 'x')
if m[1] == ARGV[2] then return {0, m[2], m[3] or '0', m[4] or '', m[5] or ''} end
if m[1] ~= ARGV[1] then return {-1} end
local w = m[3] or '0'
redis.call('HSET', KEYS[1], 'e', ARGV[2], 'fw', w)
return {1, m[2], w, w, m[5] or ''}
`)

// initScript makes shard KEYS[1] a zero-valued shard of epoch ARGV[1],
// unless it already belongs to that epoch or a later one. A key left by an
// older layout (a shard removed by an earlier shrink, whose value and
// buckets, KEYS[2] and KEYS[3], were folded elsewhere then) or prepared
// for this grow is reset. It returns -1, and creates nothing, when the key
// is missing: the counter was deleted.
var initScript = goredis.NewScript(`
local e = redis.call('HGET', KEYS[1], 'e')
if not e then return -1 end
if tonumber(e) >= tonumber(ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('HSET', KEYS[1], 'v', 0, 'e', ARGV[1])
return 1
`)

// foldScript folds removed shards into target shard KEYS[1] exactly once
// for the reshard that creates epoch ARGV[1]: it sets the target's value
// to ARGV[2], the sum of its frozen value and theirs, and, when ARGV[3] is
// not "", an approx counter's sketch to that union (and moves its
// version); ARGV[4..] are the removed shards' buckets, start and value
// pairs, added to the target's bucket hash KEYS[2] and index KEYS[3]. The
// marker fd (the epoch) makes a re-run a no-op. It returns 1 when folded,
// 0 when the marker was there, -1 when the target is not at that epoch
// (the reshard is over).
var foldScript = goredis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'e', 'fd')
if m[1] ~= ARGV[1] then return -1 end
if m[2] == ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'fd', ARGV[1])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'x', ARGV[3])
  redis.call('HINCRBY', KEYS[1], 'w', 1)
end
for i = 4, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i+1])
  redis.call('ZADD', KEYS[3], 'NX', ARGV[i], ARGV[i])
end
return 1
`)

// allowScript gives shard KEYS[1] the allowance of the reshard that
// creates epoch ARGV[1]: room up ARGV[2] and down ARGV[3] (see
// allowance.go), once: the marker ae makes a re-run, or a late run after
// writers spent the room, a no-op. It returns -1 when the shard is not at
// that epoch, 0 when the marker was there, 1 when set.
var allowScript = goredis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'e', 'ae')
if m[1] ~= ARGV[1] then return -1 end
if m[2] == ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'up', ARGV[2], 'dn', ARGV[3], 'ae', ARGV[1])
return 1
`)

// levelScript sets shard KEYS[1]'s value to ARGV[2] for the rebalance
// that creates epoch ARGV[1], keeping the value it replaces in ov, once:
// the marker lv makes a re-run a no-op. The shards are frozen (fenced at
// that epoch) and the values set sum to the values replaced (see level).
// It returns -1 when the shard is not at that epoch, 0 when the marker
// was there, 1 when set.
var levelScript = goredis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'e', 'lv')
if m[1] ~= ARGV[1] then return -1 end
if m[2] == ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'ov', ARGV[3], 'lv', ARGV[1])
return 1
`)
