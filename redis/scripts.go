package redis

import goredis "github.com/redis/go-redis/v9"

// The Lua scripts of the store. Each touches keys of one slot only, so it
// runs atomically on one node of a cluster. Values are changed only with
// HINCRBY, called through redis.pcall so that an overflow is reported, not
// computed with Lua numbers (doubles, exact only to 2^53).

// Results of addScript, one per item.
const (
	resApplied   = 1
	resDuplicate = 2
	resStale     = 3 // the shard does not accept writes for this epoch: reload the layout
	resOverflow  = 4
	resNoRoom    = 5 // the shard's allowance is spent: rebalance (see allowance.go)
	resDeferred  = 6 // an earlier item of the same counter was stale or had no room: try after it
)

// addScript applies writes to shards. For item j, KEYS[2j-1] is the shard,
// KEYS[2j] its request-id set; ARGV[1] is the request-id time to live in
// milliseconds, ARGV[2] "1" when a duplicate must write too (so that a
// WAIT that follows covers the write it duplicates, see wait.go), and
// ARGV[5j-2..5j+2] the epoch the writer read, the delta,
// its negation, the request id ("" for none) and a name of the item's
// counter within the call. Items of one counter apply in order: after one
// that must be tried again (stale, or short of room) the later ones are
// deferred, unapplied, to be tried after it. An item applies only
// when the shard's epoch is the writer's and the delta fits the shard's
// allowance (fields up and dn, see allowance.go): the epoch check, the
// duplicate check, the allowance, HINCRBY and the id's record are one
// atomic step, which also bumps the shard's version w, so that a reader
// can tell whether the shard changed between two of its reads (see
// read.go). The id set expires with its newest id, so that a shard
// that stops getting ids does not keep them for ever. Rooms are spent with HINCRBY and a check of the result's
// sign, which Lua's doubles get right where they would round the values.
var addScript = goredis.NewScript(`
local ttl = tonumber(ARGV[1])
local now
local out = {}
local blocked = {}
local function widen(sk, f, by)
  local r = redis.pcall('HINCRBY', sk, f, by)
  if type(r) == 'table' and r.err then redis.call('HSET', sk, f, '9223372036854775807') end
end
local function spend(sk, d, nd)
  if string.sub(d, 1, 1) ~= '-' then
    if redis.call('HINCRBY', sk, 'up', nd) < 0 then
      redis.call('HINCRBY', sk, 'up', d)
      return false
    end
    return true
  end
  local r = redis.pcall('HINCRBY', sk, 'dn', d)
  if type(r) == 'table' and r.err then return false end
  if r < -1 then
    redis.call('HINCRBY', sk, 'dn', nd)
    return false
  end
  return true
end
local function unspend(sk, d, nd)
  if string.sub(d, 1, 1) ~= '-' then redis.call('HINCRBY', sk, 'up', d) else redis.call('HINCRBY', sk, 'dn', nd) end
end
for j = 1, #KEYS / 2 do
  local sk, rk = KEYS[2*j-1], KEYS[2*j]
  local ep, d, nd, rid, c = ARGV[5*j-2], ARGV[5*j-1], ARGV[5*j], ARGV[5*j+1], ARGV[5*j+2]
  if blocked[c] then
    out[j] = 6
  elseif redis.call('HGET', sk, 'e') ~= ep then
    out[j] = 3
    blocked[c] = true
  else
    if rid ~= '' and not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    local exp = rid ~= '' and redis.call('ZSCORE', rk, rid)
    if exp and tonumber(exp) > now then
      out[j] = 2
      if ARGV[2] == '1' then redis.call('HINCRBY', sk, 'w', 0) end
    elseif not spend(sk, d, nd) then
      out[j] = 5
      blocked[c] = true
    else
      local r = redis.pcall('HINCRBY', sk, 'v', d)
      if type(r) == 'table' and r.err then
        if not string.find(r.err, 'overflow') then return redis.error_reply(r.err) end
        unspend(sk, d, nd)
        out[j] = 4
      else
        if string.sub(d, 1, 1) ~= '-' then widen(sk, 'dn', d) else widen(sk, 'up', nd) end
        redis.call('HINCRBY', sk, 'w', 1)
        out[j] = 1
        if rid ~= '' then
          redis.call('ZREMRANGEBYSCORE', rk, '-inf', now)
          redis.call('ZADD', rk, string.format('%d', now + ttl), rid)
          if redis.call('PTTL', rk) < ttl then redis.call('PEXPIRE', rk, ARGV[1]) end
        end
      end
    end
  end
end
return out
`)

// createScript records a counter's metadata (KEYS[1]) unless it exists.
// ARGV holds field, value pairs. It returns 1 when created, 0 when taken.
var createScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
`)

// newShardScript creates shard KEYS[1] of a new counter, at epoch ARGV[1]
// with value 0 and the allowance up ARGV[2], dn ARGV[3], unless the key
// exists.
var newShardScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'v', 0, 'e', ARGV[1], 'up', ARGV[2], 'dn', ARGV[3])
return 1
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
// the epoch to ARGV[3], the layout history to ARGV[4] and the highest shard
// count used to ARGV[5], and clears the intent. It returns 1 when it did.
var commitScript = goredis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'e', 'st', 'to')
if m[1] ~= ARGV[1] or m[2] ~= 'reshard' or m[3] ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'n', ARGV[2], 'e', ARGV[3], 'h', ARGV[4], 'mx', ARGV[5])
redis.call('HDEL', KEYS[1], 'st', 'to', 'nk', 'nd')
return 1
`)

// fenceScript moves shard KEYS[1] from epoch ARGV[1] to ARGV[2], so that
// writers holding the old layout are refused, records its version w as fw
// (so a reader can tell that no write came since), and drops the fold
// markers of the reshard before. A shard at any other epoch is left
// alone, which makes the step idempotent and harmless when run late. It
// returns {1, v, w, fw} when it fenced the shard, {0, v, w, fw} when the
// shard was at ARGV[2] already, {-1} otherwise.
var fenceScript = goredis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'e', 'v', 'w', 'fw')
if m[1] == ARGV[2] then return {0, m[2], m[3] or '0', m[4] or ''} end
if m[1] ~= ARGV[1] then return {-1} end
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(f, 1, 2) == 'f:' then redis.call('HDEL', KEYS[1], f) end
end
local w = m[3] or '0'
redis.call('HSET', KEYS[1], 'e', ARGV[2], 'fw', w)
return {1, m[2], w, w}
`)

// prepareScript makes KEYS[1] a placeholder shard (epoch 0, which no
// writer holds) unless the key exists. A grow prepares its new shards
// before it records its intent; the helpers that finish the grow only
// reset keys that exist (initScript), so a helper running late, after the
// counter was deleted, cannot bring a shard key of it back.
var prepareScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'v', 0, 'e', 0)
return 1
`)

// initScript makes shard KEYS[1] a zero-valued shard of epoch ARGV[1],
// unless it already belongs to that epoch or a later one. A key left by an
// older layout (a shard removed by an earlier shrink) or prepared for this
// grow is reset. It returns -1, and creates nothing, when the key is
// missing: the counter was deleted.
var initScript = goredis.NewScript(`
local e = redis.call('HGET', KEYS[1], 'e')
if not e then return -1 end
if tonumber(e) >= tonumber(ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'v', 0, 'e', ARGV[1])
return 1
`)

// foldScript adds ARGV[3], the value of removed shard ARGV[2], to target
// shard KEYS[1] exactly once for the reshard that creates epoch ARGV[1]:
// the marker field f:<shard> makes a re-run a no-op. It returns 1 when
// added, 0 when the marker was there, -1 when the target is not at that
// epoch (the reshard is over), -2 on overflow.
var foldScript = goredis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'e', 'f:' .. ARGV[2])
if m[1] ~= ARGV[1] then return -1 end
if m[2] then return 0 end
local r = redis.pcall('HINCRBY', KEYS[1], 'v', ARGV[3])
if type(r) == 'table' and r.err then return -2 end
redis.call('HSET', KEYS[1], 'f:' .. ARGV[2], '1')
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

var allScripts = []*goredis.Script{addScript, newShardScript, createScript, createCounterScript, deleteCounterScript, intentScript, retargetScript, commitScript, fenceScript, prepareScript, initScript, foldScript, allowScript, markDeleteScript, deleteMetaScript}
