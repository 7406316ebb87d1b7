package redis

import goredis "github.com/redis/go-redis/v9"

// The Lua scripts of the store. Each touches keys of one slot only, so it
// runs atomically on one node of a cluster. Values are changed only with
// HINCRBY, called through redis.pcall so that an overflow is reported, not
// computed with Lua numbers (doubles, exact only to 2^53).

// Results of addScript, one per item. The outcomes among them are package
// decide's; outcome (resolve.go) maps them onto it, in one place.
const (
	resApplied   = 1
	resDuplicate = 2
	resStale     = 3  // the shard does not accept writes for this epoch: reload the layout
	resInt64     = 4  // a bounded counter's total would leave the int64 range
	resNoRoom    = 5  // the shard's allowance is spent, or its value would leave int64: rebalance (see allowance.go)
	resDeferred  = 6  // an earlier item of the same counter was stale or had no room: try after it
	resUnchanged = 7  // a member item that changed nothing (applied; its request id recorded)
	resBounds    = 8  // a bounded counter's total would leave [min, max]: "8:TOTAL", the total it would make
	resConflict  = 9  // an approx item's shard sketch changed since it was read: read it again
	resBucket    = 10 // the item's window bucket would leave the int64 range
	resSkipped   = 12 // a conditional item whose condition failed or was skipped: nothing applied (cond.go); takeScript: a removal that kept the state
	resRemoved   = 13 // takeScript: a removal that removed the idle state's keys (remove.go)
	resGone      = 14 // takeScript: the state's keys were removed under its metadata (remove.go)
)

// Item modes of addScript.
const (
	modeSum      = "s" // a delta on an unbounded sum counter: allowances in the shard
	modeBounded  = "b" // a delta on a bounded counter: its exact total in the bounds key
	modeDistinct = "m" // a member added (delta 1) or removed (delta -1)
	modeApprox   = "x" // a member added to, or a sketch merged into, an approx counter's shard (approx.go)

	// A bounded delta (Increment.Bound, INCREX): the
	// mode's argument is the bound, "SAT LO HI" (SAT 1 to saturate), and
	// for modeSumBound then a line per shard key of the counter, whose
	// values the script sums for the exact total (on a cluster only a
	// counter whose shards share one slot takes bounds: see bound.go).
	modeSumBound     = "S" // as modeSum, the delta decided by the bound on the shards' total
	modeBoundedBound = "B" // as modeBounded, the delta decided by the bound on the bounds key's total
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

// addScript decides and applies writes to shards, each in the order of
// package decide's rules. Item j has five keys from KEYS[5j-4]: the
// shard, its request-id set, an auxiliary key (a bounded counter's bounds
// key, a distinct counter's member set, else the shard again) and the
// shard's bucket hash and bucket index (or the shard again, without a
// window). ARGV[1] is the request-id time to live in milliseconds, ARGV[2]
// "1" when a duplicate or an unchanged write must write too (so that a
// WAIT that follows covers the writes whose state it reports, see
// wait.go), and item j's nine arguments from ARGV[9j-6] are: the epoch
// the writer read, the delta, its negation, the request id ("" for
// none), a name of the item's counter within the call, the mode
// (modeSum, modeBounded, modeDistinct, modeApprox), a mode's argument,
// the start of the bucket the write lands in ("" without a window) and
// the start before which buckets are past retention. After the items'
// come pairs of an item's number j and its request id's expiry on a
// shard of an earlier layout (see history in write.go), for the items
// that have one, and pairs of minus an item's number j and the number of
// the earlier item of the call it is conditional on (Increment.If, see
// cond.go), for the items that have one. The mode's argument is a distinct counter's member; an
// unbounded sum's reservation "UP DN" ("" for none; see order in
// write.go); an approx item's new shard sketch (approx.go), on the first
// item of its shard when its bytes changed, "" otherwise, whose negation
// argument is the shard version the sketch was computed from.
//
// An item applies only when the shard's epoch is the writer's (else
// resStale). Then, as package decide orders its rules: a request id
// recorded within the dedupe window is a duplicate; a member added that
// is present, or removed that is absent, is unchanged; a delta that takes
// the counter's total out of range is refused, which an unbounded sum
// checks against its shard's allowance (fields up and dn, see
// allowance.go; too little room is resNoRoom, and the total decides after
// a rebalance) and a bounded counter against its exact total (int64, then
// its bounds, compared as text); a delta that takes the window bucket out
// of int64 is refused. An approx item applies only when its shard's
// version is the one it read and no approx item of the shard in the call
// is a duplicate (cas: once per shard and call, it sets the sketch);
// otherwise it answers resConflict, or resDuplicate. An applied item moves
// the shard's value with HINCRBY, its version w (so a reader can tell
// whether the shard changed between two of its reads, see read.go) and
// its bucket, which also sweeps a few buckets past retention, and records
// its request id. All of that is one atomic step. A delta that would take
// the shard's value out of int64 (a bounded counter's shards have no
// allowances) is short of room too: the rebalance that follows moves
// value between the frozen shards (level in rebalance.go), since out of
// range is judged on the total alone. Items of one counter apply in
// order: after one that must be tried again (stale, or short of room) the
// later ones are deferred, unapplied, to be tried after it. The id set
// expires with its newest id, so that a shard that stops getting ids does
// not keep them for ever.
//
// A conditional item is decided on its condition's result first: when
// that item failed or was skipped it answers resSkipped, when that item
// is to be tried again (stale, short of room, deferred, in conflict)
// resDeferred, blocking its counter as a stale item does; else it goes on
// as any item.
//
// A bounded item (modeSumBound, modeBoundedBound) is first decided by its
// bound on the counter's exact total (shardcounter.Bound.Apply), then
// goes on as a plain one with the delta the bound lets apply; it answers
// "CODE:TOTAL:APPLIED:SKIPPED" (parseResult in resolve.go), unless it
// was a duplicate or stale before its bound was judged.
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
local hxs = {}
for i = 3 + 9 * math.floor(#K / 5), #A, 2 do hxs[tonumber(A[i])] = A[i+1] end
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
    for v in string.gmatch(seen, '[^,]+') do out[#out + 1] = tonumber(v) or v end
    return out
  end
end
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
end
-- dup reports whether item j's request id rid was recorded within the
-- dedupe window: in the shard's id set rk, or on a shard of an earlier
-- layout (hxs[j], its expiry).
local function dup(rk, rid, j)
  if rid == '' then return false end
  clock()
  local exp, hx = redis.call('ZSCORE', rk, rid), hxs[j]
  return (exp and tonumber(exp) > now) or (hx ~= nil and tonumber(hx) > now)
end
local function record(rk, rid)
  if rid == '' then return end
  redis.call('ZREMRANGEBYSCORE', rk, '-inf', now)
  redis.call('ZADD', rk, string.format('%d', now + ttl), rid)
  if redis.call('PTTL', rk) < ttl then redis.call('PEXPIRE', rk, A[1]) end
end
local function touch(sk)
  if A[2] == '1' then redis.call('HINCRBY', sk, 'w', 0) end
end
local function widen(sk, f, by)
  local r = redis.pcall('HINCRBY', sk, f, by)
  if type(r) == 'table' and r.err then redis.call('HSET', sk, f, '9223372036854775807') end
end
local function unspend(sk, d, nd)
  if string.sub(d, 1, 1) ~= '-' then redis.call('HINCRBY', sk, 'up', d) else redis.call('HINCRBY', sk, 'dn', nd) end
end
-- spend takes d from shard sk's allowance, and checks that what is left
-- still covers res, "UP DN": the room up and (one less) down that the
-- counter's earlier items in other calls may take.
local function spend(sk, d, nd, res)
  if string.sub(d, 1, 1) ~= '-' then
    if redis.call('HINCRBY', sk, 'up', nd) < 0 then
      redis.call('HINCRBY', sk, 'up', d)
      return false
    end
  else
    local r = redis.pcall('HINCRBY', sk, 'dn', d)
    if type(r) == 'table' and r.err then return false end
    if r < -1 then
      redis.call('HINCRBY', sk, 'dn', nd)
      return false
    end
  end
  if res ~= '' then
    local up, dn = string.match(res, '(%S+) (%S+)')
    local h = redis.call('HMGET', sk, 'up', 'dn')
    if lt(h[1] or '0', up) or lt(h[2] or '-1', dn) then
      unspend(sk, d, nd)
      return false
    end
  end
  return true
end
-- bound moves a bounded counter's total (bounds key bk) by d; it returns
-- the total before, or nil and the refusal: resInt64, or resBounds with
-- the total the item would make.
local function bound(bk, d)
  local old = redis.call('HGET', bk, 't')
  local r = redis.pcall('HINCRBY', bk, 't', d)
  if type(r) == 'table' and r.err then return nil, 4 end
  local b = redis.call('HMGET', bk, 't', 'lo', 'hi')
  if (b[2] and lt(b[1], b[2])) or (b[3] and lt(b[3], b[1])) then
    redis.call('HSET', bk, 't', old)
    return nil, '8:' .. b[1]
  end
  return old
end
-- plus returns a + b (decimal int64 strings), exactly, through the
-- scratch field bx of hash sk (HINCRBY; Lua numbers are doubles), or nil
-- when the sum leaves int64.
local function plus(sk, a, b)
  redis.call('HSET', sk, 'bx', a)
  local r = redis.pcall('HINCRBY', sk, 'bx', b)
  local v = redis.call('HGET', sk, 'bx')
  redis.call('HDEL', sk, 'bx')
  if type(r) == 'table' and r.err then return nil end
  return v
end
local MAXI, MINI = '9223372036854775807', '-9223372036854775808'
local function neg(a)
  if a == '0' then return a end
  if string.sub(a, 1, 1) == '-' then return string.sub(a, 2) end
  return '-' .. a
end
-- minus returns a - b, or nil past int64.
local function minus(sk, a, b)
  if b == MINI then
    local r = plus(sk, a, MAXI)
    if r then r = plus(sk, r, '1') end
    return r
  end
  return plus(sk, a, neg(b))
end
-- total sums the values of the shards ks (at epoch ep) exactly, adding a
-- negative to a positive sum and a positive to a negative one, so that
-- no partial sum leaves int64 when the total does not. It returns the
-- total, or nil and why: resStale (a shard is not at ep), resInt64.
local function total(sk, ks, ep)
  local ps, ns = {}, {}
  for _, k in ipairs(ks) do
    local h = redis.call('HMGET', k, 'v', 'e')
    if h[2] ~= ep then return nil, 3 end
    local v = h[1] or '0'
    if string.sub(v, 1, 1) == '-' then ns[#ns + 1] = v else ps[#ps + 1] = v end
  end
  local t, i, j = '0', 1, 1
  while i <= #ps or j <= #ns do
    local v
    if j > #ns or (i <= #ps and string.sub(t, 1, 1) == '-') then
      v, i = ps[i], i + 1
    else
      v, j = ns[j], j + 1
    end
    t = plus(sk, t, v)
    if not t then return nil, 4 end
  end
  return t
end
-- bounded applies the bound b ("SAT LO HI") to delta d on total old, as
-- shardcounter.Bound.Apply: it returns the delta that applies and
-- whether d was skipped (Bound.Skips), or nil when a saturated move is
-- not an int64.
local function bounded(sk, b, old, d)
  local sat, lo, hi = string.match(b, '^(%d) (%S+) (%S+)')
  local nx = plus(sk, old, d)
  if sat == '0' then
    if not nx or lt(nx, lo) or lt(hi, nx) then return '0', true end
    return d, false
  end
  if not nx then
    if string.sub(d, 1, 1) ~= '-' then nx = MAXI else nx = MINI end
  end
  if lt(nx, lo) then nx = lo end
  if lt(hi, nx) then nx = hi end
  return minus(sk, nx, old), false
end
-- add adds d to the bucket ws of hash wb, when there is one, and then to
-- shard sk's value. It returns nil, or why it added nothing: resBucket
-- (the bucket would leave int64), resNoRoom (the value would).
local function add(sk, wb, ws, d)
  local bv
  if ws ~= '' then
    bv = redis.call('HGET', wb, ws)
    local r = redis.pcall('HINCRBY', wb, ws, d)
    if type(r) == 'table' and r.err then
      if not string.find(r.err, 'overflow') then error(r.err) end
      return 10
    end
  end
  local r = redis.pcall('HINCRBY', sk, 'v', d)
  if type(r) == 'table' and r.err then
    if not string.find(r.err, 'overflow') then error(r.err) end
    if ws == '' then
    elseif bv then redis.call('HSET', wb, ws, bv) else redis.call('HDEL', wb, ws) end
    return 5
  end
  return nil
end
-- cas sets shard sk's sketch (field x) to blob, and moves its version,
-- when its version is still ver, the one the writer read it at, no approx
-- item of the shard in the call is a duplicate (the sketch was computed
-- with its member) and no item of its counter c is stale (the sketch was
-- computed with the later ones); once per shard and call, the first
-- approx item of the shard carrying the blob ('' when the bytes did not
-- change). It returns whether it did.
local xs = {}
local function cas(sk, ver, blob, c)
  if xs[sk] == nil then
    local ok = (redis.call('HGET', sk, 'w') or '0') == ver
    for j = 1, nk / 5 do
      local a = 9*j - 6
      if not ok then break end
      if A[a+4] == c and redis.call('HGET', K[5*j-4], 'e') ~= A[a] then ok = false end
      if K[5*j-4] == sk and A[a+5] == 'x' and dup(K[5*j-3], A[a+3], j) then ok = false end
    end
    xs[sk] = ok
    if ok and blob ~= '' then
      redis.call('HSET', sk, 'x', blob)
      redis.call('HINCRBY', sk, 'w', 1)
    end
  end
  return xs[sk]
end
-- passed is what item result r says of a condition on its item: 1 it
-- applied and was not skipped (applied, unchanged, a duplicate), 2 it is
-- to be tried again, 0 it failed or was skipped.
local function passed(r)
  if type(r) ~= 'number' then
    local f = {}
    for x in string.gmatch(r, '[^:]+') do f[#f + 1] = x end
    if #f == 4 and f[4] == '1' then return 0 end
    r = tonumber(f[1])
  end
  if r == 1 or r == 2 or r == 7 then return 1 end
  if r == 3 or r == 5 or r == 6 or r == 9 then return 2 end
  return 0
end
local reserved = {}
-- reserve is the first pass of a transaction (atomic): it checks every
-- item's epoch and each approx item's version and request id, reading
-- only, so that a key this node does not serve fails the script before it
-- wrote anything; then it spends the room of each sum item (marking it
-- reserved) and tries each bounded item's value change, undone at once.
-- When an item is stale, short of room, in conflict or an approx
-- duplicate (whose member its shard's new sketch holds), it undoes what
-- it spent and returns the results: that item's, every other deferred.
-- Else it returns nil and the items apply.
local function reserve(n)
  local fail, why
  for j = 1, n do
    local sk, a = K[5*j-4], 9*j - 6
    if redis.call('HGET', sk, 'e') ~= A[a] then
      fail, why = j, 3
    elseif A[a+5] == 'x' and dup(K[5*j-3], A[a+3], j) then
      fail, why = j, 2
    elseif A[a+5] == 'x' and (redis.call('HGET', sk, 'w') or '0') ~= A[a+2] then
      fail, why = j, 9
    end
    if fail then break end
  end
  local spent, moved = {}, {}
  for j = 1, fail and 0 or n do
    local sk, rk, a = K[5*j-4], K[5*j-3], 9*j - 6
    local d, nd, mode = A[a+1], A[a+2], A[a+5]
    local isdup = dup(rk, A[a+3], j)
    if not isdup and mode == 's' then
      if not spend(sk, d, nd, A[a+6]) then
        fail, why = j, 5
        break
      end
      spent[#spent + 1] = j
      reserved[j] = true
    elseif not isdup and mode == 'b' then
      local v = redis.call('HGET', sk, 'v')
      local r = redis.pcall('HINCRBY', sk, 'v', d)
      if type(r) == 'table' and r.err then
        fail, why = j, 5
        break
      end
      moved[#moved + 1] = {sk, v}
    end
  end
  for _, m in ipairs(moved) do redis.call('HSET', m[1], 'v', m[2]) end
  if not fail then return nil end
  for _, j in ipairs(spent) do
    local a = 9*j - 6
    unspend(K[5*j-4], A[a+1], A[a+2])
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
  local mode, arg, ws, cut = A[a+5], A[a+6], A[a+7], A[a+8]
  local cond = hxs[-j]
  if cond then cond = passed(out[tonumber(cond)]) end
  if blocked[c] then
    out[j] = 6
  elseif cond == 2 then
    out[j] = 6
    blocked[c] = true
  elseif cond == 0 then
    out[j] = 12
  elseif redis.call('HGET', sk, 'e') ~= ep then
    out[j] = 3
    blocked[c] = true
  elseif mode == 'x' and not cas(sk, nd, arg, c) then
    if dup(rk, rid, j) then out[j] = 2 else out[j] = 9 end
  elseif rid ~= '' and dup(rk, rid, j) then
    out[j] = 2
    if reserved[j] then unspend(sk, d, nd) end
    touch(sk)
  elseif mode == 'm' then
    local changed
    if d == '1' then changed = redis.call('ZADD', ak, 'NX', 0, arg) else changed = redis.call('ZREM', ak, arg) end
    if changed == 1 then
      redis.call('HINCRBY', sk, 'v', d)
      redis.call('HINCRBY', sk, 'w', 1)
      out[j] = 1
    else
      out[j] = 7
      touch(sk)
    end
    record(rk, rid)
  elseif mode == 'x' then
    out[j] = 1
    touch(sk)
    record(rk, rid)
  else
    local old, why, ap, skip
    if mode == 'S' or mode == 'B' then
      local b, t = string.match(arg, '^([^\n]*)')
      if mode == 'B' then
        t = redis.call('HGET', ak, 't') or '0'
      else
        local ks = {}
        for k in string.gmatch(string.sub(arg, #b + 2), '[^\n]+') do ks[#ks + 1] = k end
        t, why = total(sk, ks, ep)
      end
      if t then
        ap, skip = bounded(sk, b, t, d)
        if not ap then why = 4 end
      end
      if ap then
        d, nd, arg = ap, neg(ap), ''
        if ap == MINI then nd = MAXI end
        if mode == 'S' then mode = 's' else mode = 'b' end
      end
    end
    if why then
    elseif ap == '0' then
      touch(sk)
      record(rk, rid)
    elseif mode == 'b' then
      old, why = bound(ak, d)
    elseif not reserved[j] and not spend(sk, d, nd, arg) then
      why = 5
    end
    if not why and ap ~= '0' then
      why = add(sk, wb, ws, d)
      if why and mode == 'b' then redis.call('HSET', ak, 't', old) elseif why then unspend(sk, d, nd) end
    end
    if why then
      out[j] = why
      if why == 5 or why == 3 then blocked[c] = true end
    elseif ap == '0' then
      out[j] = 1
    else
      if mode ~= 'b' then
        if string.sub(d, 1, 1) ~= '-' then widen(sk, 'dn', d) else widen(sk, 'up', nd) end
      end
      redis.call('HINCRBY', sk, 'w', 1)
      if ws ~= '' then
        redis.call('ZADD', wi, 'NX', ws, ws)
        for _, f in ipairs(redis.call('ZRANGEBYSCORE', wi, '-inf', '(' .. cut, 'LIMIT', 0, 4)) do
          redis.call('HDEL', wb, f)
          redis.call('ZREM', wi, f)
        end
      end
      out[j] = 1
      record(rk, rid)
    end
    if ap then
      local r = out[j]
      if type(r) == 'number' then r = r .. ':0' end
      out[j] = r .. ':' .. ap .. ':' .. (skip and '1' or '0')
    end
  end
end
if mk then redis.call('SET', mk, table.concat(out, ','), 'PX', ` + markerTTLms + `) end
return out
`

var allScripts = []*goredis.Script{shardsScript, addScript, takeScript, txnScript, isMemberScript, bucketsScript, resetMembersScript, copyMembersScript, createScript, createCounterScript, deleteCounterScript, intentScript, retargetScript, commitScript, fenceScript, initScript, foldScript, allowScript, levelScript, markDeleteScript, deleteMetaScript, removeStateScript}
