package redis

import goredis "github.com/redis/go-redis/v9"

// The scripts that make, read and remove a counter's keys, beside the
// write script (scripts.go) and the reshard's (reshardscripts.go).

// createScript sets the fields of hash KEYS[1] unless it exists: a
// collection's metadata, a new counter's shard (value 0 at its epoch, with
// its allowance up and dn), a bounded counter's bounds key (total 0, bounds
// lo and hi), a grow's placeholder shard (epoch 0, which no writer holds:
// see prepare in reshard.go). ARGV holds field, value pairs. It returns 1
// when created, 0 when the key exists.
var createScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
`)

// isMemberScript reports whether ARGV[2] is in the member set KEYS[2] of
// shard KEYS[1], when the shard is at epoch ARGV[1]: 1 or 0, and -1 when
// it is not (a stale layout).
var isMemberScript = goredis.NewScript(`
if redis.call('HGET', KEYS[1], 'e') ~= ARGV[1] then return -1 end
if redis.call('ZSCORE', KEYS[2], ARGV[2]) then return 1 end
return 0
`)

// bucketsScript reads shard KEYS[1]'s buckets (hash KEYS[2], index
// KEYS[3]) whose start lies in [ARGV[1], ARGV[2]), in one step with the
// shard's epoch and version: {e, w, start, value, start, value, ...}.
var bucketsScript = goredis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'e', 'w')
local out = {h[1] or '', h[2] or '0'}
local starts = redis.call('ZRANGEBYSCORE', KEYS[3], ARGV[1], '(' .. ARGV[2])
if #starts > 0 then
  local vals = redis.call('HMGET', KEYS[2], unpack(starts))
  for i, s in ipairs(starts) do
    out[#out+1] = s
    out[#out+1] = vals[i] or '0'
  end
end
return out
`)

// resetMembersScript starts shard KEYS[1] of a distinct counter's new
// member generation ARGV[2] at epoch ARGV[1]: value 0, fw = w (so that
// copyMembersScript can tell a write came), once: a shard already in that
// generation is left alone. It returns -1 when the shard is not at the
// epoch (the reshard is over).
var resetMembersScript = goredis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'e', 'mg', 'w')
if h[1] ~= ARGV[1] then return -1 end
if h[2] == ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'v', 0, 'mg', ARGV[2], 'fw', h[3] or '0')
return 1
`)

// copyMembersScript adds the members ARGV[3..] to the member set KEYS[2]
// of shard KEYS[1], counting those it adds into the shard's value, while
// the shard is at epoch ARGV[1] in generation ARGV[2] and has taken no
// write (w = fw): a copy that comes after writers resumed would undo
// their removals. It returns the members added, or -1 when too late.
var copyMembersScript = goredis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'e', 'mg', 'w', 'fw')
if h[1] ~= ARGV[1] or h[2] ~= ARGV[2] or (h[3] or '0') ~= (h[4] or '0') then return -1 end
local added = 0
for i = 3, #ARGV do
  added = added + redis.call('ZADD', KEYS[2], 'NX', 0, ARGV[i])
end
if added > 0 then redis.call('HINCRBY', KEYS[1], 'v', added) end
return added
`)

// createCounterScript records a counter's metadata (KEYS[1]) and its
// entry in its index bucket (KEYS[2]) unless the metadata exists. ARGV[1]
// is the counter id, the rest field, value pairs. It returns 1 when
// created, 0 when taken.
var createCounterScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('ZADD', KEYS[2], 0, ARGV[1])
return 1
`)

// deleteCounterScript removes a counter's metadata (KEYS[1]) and its index
// entry ARGV[1] in bucket KEYS[2], when the metadata records a delete.
var deleteCounterScript = goredis.NewScript(`
if redis.call('HGET', KEYS[1], 'st') ~= 'delete' then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
return redis.call('DEL', KEYS[1])
`)

// markDeleteScript records in the metadata KEYS[1] that the counter is
// being deleted; from then on it is not found, and whoever meets the mark
// finishes the deletion. It returns 0 when the counter does not exist.
var markDeleteScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'st', 'delete')
return 1
`)

// deleteMetaScript removes the metadata KEYS[1] when it records a delete.
var deleteMetaScript = goredis.NewScript(`
if redis.call('HGET', KEYS[1], 'st') ~= 'delete' then return 0 end
return redis.call('DEL', KEYS[1])
`)

// shardsScript returns the fields v and e of every shard KEYS, as one
// flat list, read in one step: a batch's totals (totals.go).
var shardsScript = goredis.NewScript(`
local out = {}
for i, k in ipairs(KEYS) do
  local r = redis.call('HMGET', k, 'v', 'e')
  out[2*i-1] = r[1]
  out[2*i] = r[2]
end
return out
`)
