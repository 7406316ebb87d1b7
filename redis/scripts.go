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
	resOverflow  = 4 // a bounded counter's total would leave the int64 range
	resNoRoom    = 5 // the shard's allowance is spent, or its value would leave int64: rebalance (see allowance.go)
	resDeferred  = 6 // an earlier item of the same counter was stale or had no room: try after it
	resUnchanged = 7 // a member item that changed nothing (applied; its request id recorded)
	resBounds    = 8 // a bounded counter's total would leave [min, max]
	resConflict  = 9 // an approx item's shard sketch changed since it was read: read it again
)

// Item modes of addScript.
const (
	modeSum      = "s" // a delta on an unbounded sum counter: allowances in the shard
	modeBounded  = "b" // a delta on a bounded counter: its exact total in the bounds key
	modeDistinct = "m" // a member added (delta 1) or removed (delta -1)
	modeApprox   = "x" // a member added to, or a sketch merged into, an approx counter's shard (approx.go)
)

// luaLess is a Lua function lt(a, b): a < b for canonical decimal int64
// strings (Redis's replies, Go's strconv), compared as text, where Lua's
// doubles would round values past 2^53.
const luaLess = `
local function lt(a, b)
  local na, nb = string.byte(a, 1) == 45, string.byte(b, 1) == 45
  if na ~= nb then return na end
  if #a ~= #b then
    if na then return #a > #b end
    return #a < #b
  end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      if na then return x > y end
      return x < y
    end
  end
  return false
end
`

// addScript applies writes to shards. Item j has five keys from
// KEYS[5j-4]: the shard, its request-id set, an auxiliary key (a bounded
// counter's bounds key, a distinct counter's member set, else the shard
// again) and the shard's bucket hash and bucket index (or the shard again,
// without a window). ARGV[1] is the request-id time to live in
// milliseconds, ARGV[2] "1" when a duplicate or an unchanged member
// write must write too (so that a WAIT that follows covers the writes
// whose state it reports, see wait.go), and item
// j's nine arguments from ARGV[9j-6] are: the epoch the writer read, the
// delta, its negation, the request id ("" for none), a name of the item's
// counter within the call, the mode (modeSum, modeBounded, modeDistinct,
// modeApprox), the member, the start of the bucket the write lands in (""
// without a window) and the start before which buckets are past
// retention. An approx item (approx.go) sends instead of the delta "1"
// when its shard's sketch changed, instead of its negation the shard
// version its sketch was computed from, and instead of the member the new
// sketch (on the first item of its shard, "" on the others and when the
// bytes did not change); its aux key is the shard.
//
// An item applies only when the shard's epoch is the writer's; then the
// duplicate check; then the counter's rule: an unbounded sum's delta must
// fit the shard's allowance (fields up and dn, see allowance.go; spent
// with HINCRBY and a check of the result's sign, which Lua's doubles get
// right where they would round the values); a bounded counter's new total
// must lie in its bounds (compared as text); a member is added or removed
// from the shard's set, and the shard's value moves only when membership
// changes; an approx item applies only when its shard's version is the
// one it read (cas: a compare-and-set, once per shard and call, which
// sets the sketch), and otherwise answers resConflict. Then HINCRBY of
// the value, of the version w (so a reader can tell whether the shard
// changed between two of its reads, see read.go),
// and of the write's bucket, which also sweeps a few buckets past
// retention; and the request id's record. All of that is one atomic step.
// A delta that would take the shard's value out of int64 (a bounded
// counter's shards have no allowances) is short of room too: the
// rebalance that follows moves value between the frozen shards (level in
// reshard.go), since out of range is judged on the total alone.
// Items of one counter apply in order: after one that must be tried again
// (stale, or short of room) the later ones are deferred, unapplied, to be
// tried after it. The id set expires with its newest id, so that a shard
// that stops getting ids does not keep them for ever.
//
// A last key after the items' (the key count is then 5n+1) is the
// group's marker (see marker.go): when it exists the script changes
// nothing and returns the results it recorded there, the ones of the run
// that wrote it; else the script records its results there, in the same
// atomic step as the writes.
var addScript = goredis.NewScript(luaLess + `
local K, A, atomic = KEYS, ARGV, false` + addBody)

// addBody is the body of addScript and txnScript: K are the keys, A the
// arguments, atomic true for a transaction's items.
const addBody = `
local ttl = tonumber(A[1])
local now
local out = {}
local blocked = {}
local nk = #K
local mk
if nk % 5 == 1 then
  mk = K[nk]
  nk = nk - 1
  local seen = redis.call('GET', mk)
  if seen then
    for v in string.gmatch(seen, '[^,]+') do out[#out + 1] = tonumber(v) end
    return out
  end
end
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
-- bound moves a bounded counter's total by d; it returns the total before,
-- or nil and the result when the new one would leave int64 or the bounds.
local function bound(bk, d)
  local old = redis.call('HGET', bk, 't')
  local r = redis.pcall('HINCRBY', bk, 't', d)
  if type(r) == 'table' and r.err then return nil, 4 end
  local b = redis.call('HMGET', bk, 't', 'lo', 'hi')
  if (b[2] and lt(b[1], b[2])) or (b[3] and lt(b[3], b[1])) then
    redis.call('HSET', bk, 't', old)
    return nil, 8
  end
  return old
end
-- cas sets shard sk's sketch (field x) to blob, and moves its version,
-- when its version is still ver, the one the writer read it at; once per
-- shard and call, the first approx item of the shard carrying the blob
-- ('' when the sketch is unchanged). It returns whether the version was
-- ver.
local xs = {}
local function cas(sk, ver, blob)
  if xs[sk] == nil then
    xs[sk] = (redis.call('HGET', sk, 'w') or '0') == ver
    if xs[sk] and blob ~= '' then
      redis.call('HSET', sk, 'x', blob)
      redis.call('HINCRBY', sk, 'w', 1)
    end
  end
  return xs[sk]
end
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
end
local function record(rk, rid)
  if rid == '' then return end
  redis.call('ZREMRANGEBYSCORE', rk, '-inf', now)
  redis.call('ZADD', rk, string.format('%d', now + ttl), rid)
  if redis.call('PTTL', rk) < ttl then redis.call('PEXPIRE', rk, A[1]) end
end
local reserved = {}
-- reserve is the first pass of a transaction (atomic): it checks every
-- item's epoch, reading only, so that a key this node does not serve
-- fails the script before it wrote anything; then it spends the room of
-- each sum item (marking it reserved) and tries each bounded item's value
-- change, undone at once. When an item is stale or short of room it undoes
-- what it spent and returns the results: that item's, every other
-- deferred. Else it returns nil and the items apply.
local function reserve(n)
  local fail, why
  for j = 1, n do
    if redis.call('HGET', K[5*j-4], 'e') ~= A[9*j-6] then
      fail, why = j, 3
      break
    end
    if A[9*j-1] == 'x' and (redis.call('HGET', K[5*j-4], 'w') or '0') ~= A[9*j-4] then
      fail, why = j, 9
      break
    end
  end
  local spent, moved = {}, {}
  for j = 1, fail and 0 or n do
    local sk, rk, a = K[5*j-4], K[5*j-3], 9*j-6
    local d, nd, rid, mode = A[a+1], A[a+2], A[a+3], A[a+5]
    local dup = false
    if rid ~= '' then
      clock()
      local exp = redis.call('ZSCORE', rk, rid)
      dup = exp and tonumber(exp) > now
    end
    if not dup and mode == 's' then
      if not spend(sk, d, nd) then
        fail, why = j, 5
        break
      end
      spent[#spent + 1] = j
      reserved[j] = true
    elseif not dup and mode == 'b' then
      local r = redis.pcall('HINCRBY', sk, 'v', d)
      if type(r) == 'table' and r.err then
        fail, why = j, 5
        break
      end
      moved[#moved + 1] = j
    end
  end
  for i = #moved, 1, -1 do
    local j = moved[i]
    redis.call('HINCRBY', K[5*j-4], 'v', A[9*j-4])
  end
  if not fail then return nil end
  for i = #spent, 1, -1 do
    local j = spent[i]
    unspend(K[5*j-4], A[9*j-5], A[9*j-4])
  end
  for j = 1, n do out[j] = 6 end
  out[fail] = why
  return out
end
if atomic then
  local r = reserve(nk / 5)
  if r then return r end
end
for j = 1, nk / 5 do
  local sk, rk, ak, wb, wi = K[5*j-4], K[5*j-3], K[5*j-2], K[5*j-1], K[5*j]
  local a = 9*j - 6
  local ep, d, nd, rid, c = A[a], A[a+1], A[a+2], A[a+3], A[a+4]
  local mode, member, ws, cut = A[a+5], A[a+6], A[a+7], A[a+8]
  if blocked[c] then
    out[j] = 6
  elseif redis.call('HGET', sk, 'e') ~= ep then
    out[j] = 3
    blocked[c] = true
  elseif mode == 'x' and not cas(sk, nd, member) then
    out[j] = 9
  else
    if rid ~= '' then clock() end
    local exp = rid ~= '' and redis.call('ZSCORE', rk, rid)
    if exp and tonumber(exp) > now then
      out[j] = 2
      if reserved[j] then unspend(sk, d, nd) end
      if A[2] == '1' then redis.call('HINCRBY', sk, 'w', 0) end
    elseif mode == 'm' then
      local changed
      if d == '1' then changed = redis.call('ZADD', ak, 'NX', 0, member) else changed = redis.call('ZREM', ak, member) end
      if changed == 1 then
        redis.call('HINCRBY', sk, 'v', d)
        redis.call('HINCRBY', sk, 'w', 1)
        out[j] = 1
      else
        out[j] = 7
        if A[2] == '1' then redis.call('HINCRBY', sk, 'w', 0) end
      end
      record(rk, rid)
    elseif mode == 'x' then
      if d == '1' then out[j] = 1 else out[j] = 7 end
      if d ~= '1' and A[2] == '1' then redis.call('HINCRBY', sk, 'w', 0) end
      record(rk, rid)
    else
      local ok, old, why = true, nil, nil
      if mode == 'b' then
        old, why = bound(ak, d)
        ok = old ~= nil
      elseif not reserved[j] and not spend(sk, d, nd) then
        ok, why = false, 5
        blocked[c] = true
      end
      if not ok then
        out[j] = why
      else
        local r = redis.pcall('HINCRBY', sk, 'v', d)
        if type(r) == 'table' and r.err then
          if not string.find(r.err, 'overflow') then return redis.error_reply(r.err) end
          if mode == 'b' then redis.call('HSET', ak, 't', old) else unspend(sk, d, nd) end
          out[j] = 5
          blocked[c] = true
        else
          if mode ~= 'b' then
            if string.sub(d, 1, 1) ~= '-' then widen(sk, 'dn', d) else widen(sk, 'up', nd) end
          end
          redis.call('HINCRBY', sk, 'w', 1)
          if ws ~= '' then
            redis.call('HINCRBY', wb, ws, d)
            redis.call('ZADD', wi, 'NX', ws, ws)
            for _, f in ipairs(redis.call('ZRANGEBYSCORE', wi, '-inf', '(' .. cut, 'LIMIT', 0, 4)) do
              redis.call('HDEL', wb, f)
              redis.call('ZREM', wi, f)
            end
          end
          out[j] = 1
          record(rk, rid)
        end
      end
    end
  end
end
if mk then redis.call('SET', mk, table.concat(out, ','), 'PX', ` + markerTTLms + `) end
return out
`

// createScript records a collection's metadata (KEYS[1]) unless it
// exists. ARGV holds field, value pairs. It returns 1 when created, 0 when
// taken.
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

// newBoundsScript creates a bounded counter's bounds key KEYS[1]: total
// 0, and the bounds ARGV[1] (min) and ARGV[2] (max), "" for none.
var newBoundsScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 't', 0)
if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], 'lo', ARGV[1]) end
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'hi', ARGV[2]) end
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
// writers holding the old layout are refused, records its version w as fw
// (so a reader can tell that no write came since), and drops the fold
// markers of the reshard before. A shard at any other epoch is left
// alone, which makes the step idempotent and harmless when run late. It
// returns {1, v, w, fw, x} when it fenced the shard, {0, v, w, fw, x}
// when the shard was at ARGV[2] already, {-1} otherwise; x is an approx
// counter's sketch (” for none).
var fenceScript = goredis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'e', 'v', 'w', 'fw', 'x')
if m[1] == ARGV[2] then return {0, m[2], m[3] or '0', m[4] or '', m[5] or ''} end
if m[1] ~= ARGV[1] then return {-1} end
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(f, 1, 2) == 'f:' then redis.call('HDEL', KEYS[1], f) end
end
local w = m[3] or '0'
redis.call('HSET', KEYS[1], 'e', ARGV[2], 'fw', w)
return {1, m[2], w, w, m[5] or ''}
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

// foldScript adds ARGV[3], the value of removed shard ARGV[2], to target
// shard KEYS[1] exactly once for the reshard that creates epoch ARGV[1]:
// the marker field f:<shard> makes a re-run a no-op. ARGV[4..] are the
// removed shard's buckets, start and value pairs, added to the target's
// bucket hash KEYS[2] and index KEYS[3] in the same step. It returns 1
// when added, 0 when the marker was there, -1 when the target is not at
// that epoch (the reshard is over), -2 on overflow.
var foldScript = goredis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'e', 'f:' .. ARGV[2])
if m[1] ~= ARGV[1] then return -1 end
if m[2] then return 0 end
local r = redis.pcall('HINCRBY', KEYS[1], 'v', ARGV[3])
if type(r) == 'table' and r.err then return -2 end
for i = 4, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i+1])
  redis.call('ZADD', KEYS[3], 'NX', ARGV[i], ARGV[i])
end
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

var allScripts = []*goredis.Script{foldSketchScript, shardsScript, addScript, txnScript, newShardScript, newBoundsScript, isMemberScript, bucketsScript, resetMembersScript, copyMembersScript, createScript, createCounterScript, deleteCounterScript, intentScript, retargetScript, commitScript, fenceScript, prepareScript, initScript, foldScript, allowScript, levelScript, markDeleteScript, deleteMetaScript}
