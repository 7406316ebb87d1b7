package redis

import (
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
)

// Takes of rate limits (Increment.Take). A key's state is its state
// counter's shards (shardcounter.LimitPolicy.StateShards), which live in
// one slot (keys.oneSlot, as a bounded counter's do), so that takeScript
// reads and writes them all in one atomic step: it decides each take by
// package decide's rules (decide.Limit), in the core's order, on the
// server's clock (TIME), or on Options.Now when a test sets it. A take's
// request id is recorded in shard 0's id set: as itself when the take was
// allowed, as shardcounter.RefusedRequestID when refused, so a retry
// answers the decision first made.

// resTake is takeScript's result for a decided take:
// "11:ALLOWED:REMAINING:RESET:RETRY:DUPLICATE:RECORDED", the last three
// flags 0 or 1; RECORDED says the take wrote something (state or request
// id), and so creates its counter when it is new.
const resTake = 11

// limitState reports whether spec is the state counter of a key under
// policy p (decide's rule, see decide.ErrNotLimitState).
func limitState(spec shardcounter.Spec, p shardcounter.LimitPolicy) bool {
	return (spec.Kind == "" || spec.Kind == shardcounter.KindSum) && spec.Shards == p.StateShards() && !spec.Bounded() && spec.Window == nil
}

// takeArgs is the number of arguments of an item of takeScript.
const takeArgs = 11

// addTake appends a take's keys and arguments to g (see takeScript).
func (g *slotGroup) addTake(it pending, inc shardcounter.Increment) {
	c, ok := g.counters[inc.Counter]
	if !ok {
		c = strconv.Itoa(len(g.counters))
		g.counters[inc.Counter] = c
	}
	g.items = append(g.items, it)
	g.keys = append(g.keys, it.l.keys.shards(it.l.n)...)
	g.keys = append(g.keys, it.l.keys.ids(0))
	p := inc.Take.Policy
	// Every cost above the quota is decided alike (refused, never to be
	// allowed), so the script's numbers (doubles) need not hold more.
	cost := min(inc.Take.Cost, shardcounter.MaxLimitQuota+1)
	rrid, peek := "", ""
	if inc.RequestID != "" {
		rrid = shardcounter.RefusedRequestID(inc.RequestID)
	}
	switch {
	case inc.Take.Remove:
		peek = "r"
	case inc.Take.Peek:
		peek = "1"
	}
	var kind string
	var a1, a2, a3 any
	switch p.Kind {
	case shardcounter.LimitSliding:
		kind, a1, a2, a3 = "s", p.Limit, time.Duration(p.Bucket).Milliseconds(), ""
	case shardcounter.LimitGCRA:
		t := int64(p.Period) / p.Limit
		kind, a1, a2, a3 = "g", p.Burst, strconv.FormatInt(t, 10), strconv.FormatInt(p.Burst*t, 10)
	default:
		kind, a1, a2, a3 = "f", p.Limit, time.Duration(p.Period).Milliseconds(), ""
	}
	g.args = append(g.args, it.l.ep(), inc.RequestID, rrid, c, kind, a1, a2, a3, cost, peek, it.l.n)
}

// parseTake reads takeScript's result for a decided take.
func parseTake(v string) (result, bool) {
	f := strings.Split(v, ":")
	if len(f) != 7 || f[0] != strconv.Itoa(resTake) {
		return result{}, false
	}
	var n [3]int64
	for i := range n {
		var err error
		if n[i], err = strconv.ParseInt(f[2+i], 10, 64); err != nil {
			return result{}, false
		}
	}
	flag := func(s string) (bool, bool) { return s == "1", s == "0" || s == "1" }
	allowed, ok1 := flag(f[1])
	dup, ok2 := flag(f[5])
	rec, ok3 := flag(f[6])
	if !ok1 || !ok2 || !ok3 {
		return result{}, false
	}
	return result{code: resTake, limit: &shardcounter.LimitResult{Allowed: allowed, Remaining: n[0], ResetAfterMS: n[1], RetryAfterMS: n[2], Duplicate: dup}, recorded: rec}, true
}

// takeOutcome is the outcome of a take the script decided.
func takeOutcome(r result) shardcounter.Outcome {
	l := *r.limit
	return shardcounter.Outcome{Duplicate: l.Duplicate, Limit: &l}
}

// checkTake decides, before any script runs, a take on a counter of spec
// that is not a key's state (decide's order: after not found).
func checkTake(inc shardcounter.Increment, spec shardcounter.Spec) error {
	if !limitState(spec, inc.Take.Policy) {
		return decide.ErrNotLimitState(inc.Counter, inc.Take.Policy)
	}
	return nil
}

// luaInt64 is exact int64 arithmetic in Lua, whose numbers are doubles
// (exact to 2^53 only), for the times of a token bucket, in nanoseconds:
// a value is three limbs {a, b, c} = a·10^14 + b·10^7 + c with b and c in
// [0, 10^7), a signed. N reads a decimal string, S writes one, L makes a
// small non-negative number one; add, sub, mul (of non-negative values
// whose product stays in int64), lt; div is floor(x/y) for x ≥ 0, y > 0
// and a quotient below 2^50; ms is ceil(x/10^6) of x > 0, tms floor.
const luaInt64 = `
local E7 = 10000000
local function norm(a, b, c)
  local k = math.floor(c / E7)
  c = c - k * E7
  b = b + k
  k = math.floor(b / E7)
  b = b - k * E7
  return {a + k, b, c}
end
local function N(s)
  local neg = string.sub(s, 1, 1) == '-'
  if neg then s = string.sub(s, 2) end
  local n = #s
  local c = tonumber(string.sub(s, math.max(n - 6, 1), n)) or 0
  local b, a = 0, 0
  if n > 7 then b = tonumber(string.sub(s, math.max(n - 13, 1), n - 7)) end
  if n > 14 then a = tonumber(string.sub(s, 1, n - 14)) end
  if neg then return norm(-a, -b, -c) end
  return {a, b, c}
end
local function S(x)
  if x[1] < 0 then return '-' .. S(norm(-x[1], -x[2], -x[3])) end
  if x[1] > 0 then return string.format('%d%07d%07d', x[1], x[2], x[3]) end
  if x[2] > 0 then return string.format('%d%07d', x[2], x[3]) end
  return string.format('%d', x[3])
end
local function L(m)
  local a = math.floor(m / 1e14)
  local r = m - a * 1e14
  local b = math.floor(r / E7)
  return {a, b, r - b * E7}
end
local function add(x, y) return norm(x[1] + y[1], x[2] + y[2], x[3] + y[3]) end
local function sub(x, y) return norm(x[1] - y[1], x[2] - y[2], x[3] - y[3]) end
local function mul(x, y)
  local c = x[3] * y[3]
  local b = x[2] * y[3] + x[3] * y[2]
  local a = x[1] * y[3] + x[2] * y[2] + x[3] * y[1] + (x[1] * y[2] + x[2] * y[1]) * E7 + x[1] * y[1] * 1e14
  return norm(a, b, c)
end
local function lt(x, y)
  if x[1] ~= y[1] then return x[1] < y[1] end
  if x[2] ~= y[2] then return x[2] < y[2] end
  return x[3] < y[3]
end
local function D(x) return x[1] * 1e14 + x[2] * E7 + x[3] end
local function div(x, y)
  local q = math.floor(D(x) / D(y))
  while q > 0 and lt(x, mul(L(q), y)) do q = q - 1 end
  while not lt(x, mul(L(q + 1), y)) do q = q + 1 end
  return q
end
local function tms(x) return x[1] * 1e8 + x[2] * 10 + math.floor(x[3] / 1e6) end
local function ms(x)
  if x[1] < 0 or (x[1] == 0 and x[2] == 0 and x[3] == 0) then return 0 end
  local q = tms(x)
  if x[3] % 1e6 ~= 0 then q = q + 1 end
  return q
end
local ZERO = {0, 0, 0}
`

// takeScript decides and applies takes of rate limits' keys, each by
// package decide's rules (decide.Limit and the take's rules in decide),
// in order, atomically with its writes. ARGV[1] is the request-id time to
// live in milliseconds, ARGV[2] "1" when a take that writes nothing must
// touch its shard (see wait.go), ARGV[3] the time in Unix nanoseconds, or
// "" for the server's (TIME); then each item's takeArgs arguments: the
// epoch the writer read, the request id ("" for none) and its refused
// form (shardcounter.RefusedRequestID), a name of its counter within the
// call, the kind ("f" fixed, "s" sliding, "g" gcra), then for a window
// its limit, its period (fixed) or bucket (sliding) in milliseconds and
// "", and for gcra its burst, T (the period over the limit) and burst·T
// in nanoseconds; the cost (at most the largest quota plus one), "1" for
// a peek or "r" for a removal of the state if idle, and n, the state's
// shard count. Item j's keys are its n shard
// keys, then shard 0's request-id set; a last key, when there is one, is
// the group's marker (see addScript).
//
// A take whose shards are not all at the writer's epoch is stale
// (resStale), or gone (resGone) when its shard key is missing: a removal
// deleted the state (remove.go); the later takes of its counter in the
// call are deferred (resDeferred). A removal is decided on the shards
// read: kept (resSkipped) when a take of its counter came earlier in the
// call or the state is not idle (decide.Idle), else the state's shard
// keys and request-id set are deleted (resRemoved), and a later removal
// of it in the call is kept. Else, for a take, as package decide orders it: a take with a request
// id, not a peek, that finds it recorded (as allowed, then as refused)
// within the dedupe window is a duplicate and answers the recorded
// decision with the key's state now; else it is decided on the state read.
// An allowed take writes the shards that change (and bumps their version
// w, see read.go) and records its id; a refused one records its refused
// id; a peek writes nothing. Each answers resTake. A call reads a shard
// once (HMGET) and keeps what its takes leave there; at its end it writes
// each shard they changed once, its version bumped by as many takes, so
// that a group commit of many takes on one hot key costs its master two
// writes a shard, not two a take, in the script and in the append-only
// file.
//
// The clock is read once a call, in nanoseconds exact (luaInt64); a
// window's edges are whole milliseconds, so a window is decided on the
// time in milliseconds (tm), and a token bucket on the nanoseconds.
var takeScript = goredis.NewScript(luaInt64 + `
local K, A = KEYS, ARGV
local ttl = tonumber(A[1])
local items = (#A - 3) / ` + strconv.Itoa(takeArgs) + `
local want = 0
for j = 1, items do want = want + tonumber(A[3 + ` + strconv.Itoa(takeArgs) + ` * j]) + 1 end
local mk
if #K > want then
  mk = K[#K]
  local seen = redis.call('GET', mk)
  if seen then
    local out = {}
    for v in string.gmatch(seen, '[^,]+') do out[#out + 1] = tonumber(v) or v end
    return out
  end
end
local t
if A[3] ~= '' then
  t = N(A[3])
else
  local tt = redis.call('TIME')
  t = N(string.format('%d%06d000', tonumber(tt[1]), tonumber(tt[2])))
end
local tm = tms(t)
local rnow
local function clock()
  if not rnow then
    local tt = redis.call('TIME')
    rnow = tonumber(tt[1]) * 1000 + math.floor(tonumber(tt[2]) / 1000)
  end
end
local function seen(rk, id)
  clock()
  local exp = redis.call('ZSCORE', rk, id)
  return exp and tonumber(exp) > rnow
end
local function record(rk, id)
  clock()
  redis.call('ZREMRANGEBYSCORE', rk, '-inf', rnow)
  redis.call('ZADD', rk, string.format('%d', rnow + ttl), id)
  if redis.call('PTTL', rk) < ttl then redis.call('PEXPIRE', rk, A[1]) end
end
local function fdiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
-- fixed, sliding and gcra are decide's, on state st (numbers; gcra's a
-- luaInt64 value): allowed, remaining, reset, retry, and the state after.
local function fixed(st, limit, P, cost, peek)
  local t = tm
  local w = fdiv(t, P)
  if st[1] > w then w = st[1]; t = w * P end -- the key's window never goes back
  local taken = 0
  if st[1] == w then taken = st[2] end
  local ok = cost <= limit - taken
  local nx = st
  if ok and not peek then
    taken = taken + cost
    nx = {w, taken}
  end
  local reset, retry = 0, 0
  local fin = (w + 1) * P - t
  if taken > 0 then reset = fin end
  if not ok then
    if cost > limit then retry = -1 else retry = fin end
  end
  return ok, math.max(limit - taken, 0), reset, retry, nx
end
local function sliding(st, limit, B, cost, peek)
  local k = #st / 2
  local j = fdiv(tm, B)
  local count = 0
  for s = 1, k do
    if st[s] > j - k and st[k + s] ~= 0 then count = count + st[k + s] end
  end
  local ok = cost <= limit - count
  local nx = st
  if ok and not peek then
    nx = {}
    for s = 1, 2 * k do nx[s] = st[s] end
    local s = j - fdiv(j, k) * k + 1
    if nx[s] < j then nx[s], nx[k + s] = j, 0 end
    nx[k + s] = nx[k + s] + cost
    count = count + cost
  end
  local newest
  for s = 1, k do
    if nx[s] > j - k and nx[k + s] ~= 0 and (not newest or nx[s] > newest) then newest = nx[s] end
  end
  local reset, retry = 0, 0
  if count > 0 then reset = (newest + k) * B - tm end
  if not ok then
    retry = -1
    if cost <= limit then
      local left = {}
      for s = 1, 2 * k do left[s] = st[s] end
      local rest = count
      while true do
        local oldest
        for s = 1, k do
          if left[s] > j - k and left[k + s] ~= 0 and (not oldest or left[s] < oldest) then oldest = left[s] end
        end
        for s = 1, k do
          if left[s] > j - k and left[k + s] ~= 0 and left[s] == oldest then
            rest = rest - left[k + s]
            left[k + s] = 0
          end
        end
        if rest + cost <= limit then
          retry = (oldest + k) * B - tm
          break
        end
      end
    end
  end
  return ok, math.max(limit - count, 0), reset, retry, nx
end
local function gcra(st, burst, T, full, cT, peek)
  local tat = st[1]
  if lt(tat, t) then tat = t end
  local ok = cT ~= nil and not lt(t, sub(add(tat, cT), full))
  local nx = st
  if ok and not peek then
    tat = add(tat, cT)
    nx = {tat}
  end
  local rem = 0
  local room = sub(add(t, full), tat)
  if lt(ZERO, room) then rem = div(room, T) end
  local reset, retry = ms(sub(tat, t)), 0
  if not ok then
    retry = -1
    if cT then retry = ms(sub(sub(add(tat, cT), full), t)) end
  end
  return ok, rem, reset, retry, nx
end
-- A call reads each shard once and writes it once, after its takes:
-- hs holds a shard's {v, e} as read and as the takes before left it,
-- bumps how many takes changed it (its version w goes up by as many).
local hs, bumps, dirty = {}, {}, {}
local function shardOf(k)
  local h = hs[k]
  if not h then
    h = redis.call('HMGET', k, 'v', 'e')
    hs[k] = h
  end
  return h
end
-- idle is decide.Idle: a take at t would see the state raw as a fresh
-- key's.
local function idle(kind, raw, a2, n)
  if kind == 'g' then return not lt(t, N(raw[1])) end
  local P = tonumber(a2)
  if kind == 'f' then return tonumber(raw[1]) < fdiv(tm, P) end
  local k, jb = n / 2, fdiv(tm, P)
  for s = 1, k do
    if tonumber(raw[s]) > jb - k and tonumber(raw[k + s]) ~= 0 then return false end
  end
  return true
end
local out, blocked, taken, removed = {}, {}, {}, {}
local at = 1
for j = 1, items do
  local a = 4 + ` + strconv.Itoa(takeArgs) + ` * (j - 1)
  local ep, rid, rrid, c, kind = A[a], A[a + 1], A[a + 2], A[a + 3], A[a + 4]
  local a1, a2, a3, cost, peek, n = A[a + 5], A[a + 6], A[a + 7], tonumber(A[a + 8]), A[a + 9] == '1', tonumber(A[a + 10])
  local rm = A[a + 9] == 'r'
  local sks, rk = {}, K[at + n]
  for s = 1, n do sks[s] = K[at + s - 1] end
  at = at + n + 1
  local raw = {}
  local stale, gone = false, false
  if blocked[c] then
    out[j] = 6
  elseif removed[c] and rm then
    out[j] = 12
  else
    for s = 1, n do
      local h = shardOf(sks[s])
      if h[2] ~= ep then
        stale, gone = true, removed[c] or (not h[1] and not h[2])
        break
      end
      raw[s] = h[1] or '0'
    end
    if gone then
      out[j] = 14
      blocked[c] = true
    elseif stale then
      out[j] = 3
      blocked[c] = true
    end
  end
  if out[j] == nil and rm then
    if not taken[c] and idle(kind, raw, a2, n) then
      for s = 1, n do
        redis.call('DEL', sks[s])
        hs[sks[s]] = {false, false}
      end
      redis.call('DEL', rk)
      removed[c] = true
      out[j] = 13
    else
      if A[2] == '1' then redis.call('HINCRBY', sks[1], 'w', 0) end
      out[j] = 12
    end
  end
  if out[j] == nil then
    taken[c] = true
    local dup, was = false, false
    if rid ~= '' and not peek then
      was = seen(rk, rid)
      dup = was or seen(rk, rrid)
    end
    local st = {}
    for s = 1, n do
      if kind == 'g' then st[s] = N(raw[s]) else st[s] = tonumber(raw[s]) end
    end
    local ok, rem, reset, retry, nx
    local p = peek or dup
    if kind == 'f' then
      ok, rem, reset, retry, nx = fixed(st, tonumber(a1), tonumber(a2), cost, p)
    elseif kind == 's' then
      ok, rem, reset, retry, nx = sliding(st, tonumber(a1), tonumber(a2), cost, p)
    else
      local cT
      if cost <= tonumber(a1) then cT = mul(L(cost), N(a2)) end
      ok, rem, reset, retry, nx = gcra(st, tonumber(a1), N(a2), N(a3), cT, p)
    end
    local rec = false
    if dup then
      ok = was
      if was then retry = 0 end
    elseif ok and not peek then
      for s = 1, n do
        if nx ~= st then
          local v
          if kind == 'g' then v = S(nx[s]) else v = string.format('%d', nx[s]) end
          if v ~= raw[s] then
            hs[sks[s]][1] = v
            if not bumps[sks[s]] then
              bumps[sks[s]] = 0
              dirty[#dirty + 1] = sks[s]
            end
            bumps[sks[s]] = bumps[sks[s]] + 1
          end
        end
      end
      if rid ~= '' then record(rk, rid) end
      rec = true
    elseif not ok and not peek and rid ~= '' then
      record(rk, rrid)
      rec = true
    end
    if not rec and A[2] == '1' then redis.call('HINCRBY', sks[1], 'w', 0) end
    local function b(x) if x then return '1' end return '0' end
    out[j] = string.format('11:%s:%d:%d:%d:%s:%s', b(ok), rem, reset, retry, b(dup), b(rec))
  end
end
for _, k in ipairs(dirty) do
  redis.call('HSET', k, 'v', hs[k][1])
  redis.call('HINCRBY', k, 'w', bumps[k])
end
if mk then redis.call('SET', mk, table.concat(out, ','), 'PX', ` + markerTTLms + `) end
return out
`)

// validate checks an item as Apply receives it: a take by the rules of a
// store that decides takes, a bounded delta by those of one that decides
// bounds (on a cluster its counter is checked too: see checkItem), a
// conditional item as the item it is once its condition is met (and
// validIf), any other item as decide does.
func (s *CounterStore) validate(inc shardcounter.Increment) error {
	if inc.If != 0 {
		if err := validIf(inc); err != nil {
			return err
		}
		inc.If = 0
	}
	if inc.Bound != nil {
		return validBound(inc)
	}
	if inc.Take == nil {
		return decide.Validate(inc)
	}
	validate := shardcounter.ValidateTakeIncrement
	if inc.Take.Remove {
		validate = shardcounter.ValidateRemoveIncrement
	}
	if err := validate(inc); err != nil {
		return err
	}
	if inc.Txn != 0 {
		return shardcounter.Errorf(shardcounter.EINVALID, "redis: a take of a rate limit (counter %q) cannot be part of a transaction: send it alone", inc.Counter)
	}
	return nil
}

// checkItem fails an item that its counter, of spec, does not take: a
// take on a counter that is not a key's state, any other item meant for
// another kind (decide.CheckKind), and on a cluster a bounded item on a
// counter whose shards do not share one slot (boundHere).
func (s *CounterStore) checkItem(inc shardcounter.Increment, spec shardcounter.Spec) error {
	if inc.Take != nil {
		return checkTake(inc, spec)
	}
	if err := decide.CheckKind(inc, spec); err != nil {
		return err
	}
	if inc.Bound != nil && s.cluster != nil {
		return boundHere(inc.Counter, spec)
	}
	return nil
}

// limitClock is takeScript's clock argument: Options.Now's time in Unix
// nanoseconds when a test set it, else "" for the server's clock, which
// every process sharing the store agrees on.
func (s *CounterStore) limitClock() string {
	if s.limitNow == nil {
		return ""
	}
	return strconv.FormatInt(s.limitNow().UnixNano(), 10)
}
