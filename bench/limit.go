package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	shttp "github.com/shardcounter/shardcounter/http"
)

// WorkloadLimit is `shardcounter bench --workload limit` (docs/LIMITS.md,
// "Figures"): rate-limit takes of cost 1 on one hot key, under a limit
// far above the load so that every take is admitted and every side does
// the whole work of an admitted take, through shardcounter's RESP port
// (CL.THROTTLE) and HTTP API (POST .../take) over one store, against the
// two Redis limiters users run instead. It is a workload of its own, not
// a Config.Workload: its runs take, they do not write counters.
const WorkloadLimit = "limit"

// Peers of the limit workload, as its runs' "peer" names them.
const (
	// PeerRedisSlidingZset is the common sorted-set sliding window: one
	// EVALSHA a take of a script doing ZREMRANGEBYSCORE, ZCARD, ZADD and
	// PEXPIRE on the key's sorted set of admitted takes.
	PeerRedisSlidingZset = "redis-sliding-zset"
	// PeerRedisFixedWindow is envoyproxy/ratelimit's fixed window: a
	// pipeline of INCRBY and EXPIRE on the key of the current window.
	PeerRedisFixedWindow = "redis-fixed-window"
)

// LimitConfig is a limit workload.
type LimitConfig struct {
	Store     shardcounter.CounterStore
	StoreName string        // the store's kind, for the runs' names: pebble, redis...
	Clients   int           // concurrent, one take in flight each
	Duration  time.Duration // of each run
	// PeerRedis is the peers' Redis server, a redis:// URL; empty starts
	// a redis-server of its own with appendfsync always (redis-server on
	// PATH), its files in the temporary directory as a default --store's.
	PeerRedis string
	// Progress, when set, is called about twice a second during each run.
	Progress func(Progress)
}

// The policies of the workload: far above what any run can take, so that
// every take is admitted.
const (
	// limitQuota is the HTTP takes' fixed window, a 366-day period: a run
	// never sees its window end (windows are aligned to Unix time; the
	// next edge is in 2027-02).
	limitQuota = int64(1) << 40
	// throttleBurst, throttleCount and throttlePeriod are CL.THROTTLE's
	// arguments: a bucket of 10^9 tokens refilled at one every 3 s (as
	// slow as a 10^9 burst may refill, within 100 years), so that a run's
	// refill is a few tokens and the key's remaining tokens count the
	// takes.
	throttleBurst  = 999_999_999
	throttleCount  = 1
	throttlePeriod = 3
	// peerWindow is the peers' window: an hour, the sorted set's
	// trailing window and the fixed window's unit.
	peerWindow = time.Hour
	// peerLimit is the peers' limit.
	peerLimit = 1_000_000_000
)

// slidingZsetScript is the sorted-set sliding window as it is commonly
// written (one key a client, each admitted take a member scored with its
// time in milliseconds): drop the takes older than the window, count the
// rest, admit under the limit by adding the take and renewing the key's
// expiry. It answers {allowed, remaining}.
const slidingZsetScript = `
local key = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, 0, now - window)
local count = redis.call('ZCARD', key)
if count < limit then
  redis.call('ZADD', key, now, ARGV[4])
  redis.call('PEXPIRE', key, window)
  return {1, limit - count - 1}
end
return {0, 0}
`

// Limits runs the workload: CL.THROTTLE over a RESP port and HTTP takes,
// each on a server of its own over cfg.Store that the run starts in this
// process, then the two Redis peers. Each run is verified when every
// take was admitted and the key's state afterwards counts them all:
// CL.THROTTLE's remaining tokens (up to the run's refill), the limit's
// remaining quota, the sorted set's members, the windows' counts. Every
// run removes its key.
func Limits(ctx context.Context, cfg LimitConfig) ([]Run, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("bench: limit: no store")
	case cfg.Clients < 1 || cfg.Duration <= 0:
		return nil, errors.New("bench: limit: give positive clients and duration")
	}
	prefix := fmt.Sprintf("bench-limit-%x", time.Now().UnixNano())
	var runs []Run
	r, err := throttleRun(ctx, cfg, prefix)
	if err != nil {
		return runs, err
	}
	runs = append(runs, r)
	if r, err = takeRun(ctx, cfg, prefix); err != nil {
		return runs, err
	}
	runs = append(runs, r)
	url := cfg.PeerRedis
	if url == "" {
		u, stop, err := startRedis()
		if err != nil {
			return runs, err
		}
		defer stop()
		url = u
	}
	for _, peer := range []string{PeerRedisSlidingZset, PeerRedisFixedWindow} {
		r, err := limitPeerRun(ctx, cfg, peer, url, prefix)
		if err != nil {
			return runs, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// limitTally counts a take's answer: an admitted take is a write, a
// refused one refused.
func limitTally(allowed bool, err error) tally {
	switch {
	case err != nil:
		return tally{errors: 1}
	case allowed:
		return tally{writes: 1, delta: 1}
	}
	return tally{refused: 1}
}

// measureTakes runs take from cfg.Clients clients for cfg.Duration and
// fills in run's figures; verify, given the admitted takes and the time
// since the run began, says whether the key's state counts them.
func measureTakes(ctx context.Context, cfg LimitConfig, run *Run, take func(ctx context.Context, client int, seq int64) (bool, error),
	verify func(ctx context.Context, admitted int64, elapsed time.Duration) (bool, error)) error {
	run.Clients, run.Counters, run.Workload = cfg.Clients, 1, WorkloadLimit
	var progress func(time.Duration, int64)
	if cfg.Progress != nil {
		progress = func(elapsed time.Duration, ops int64) {
			cfg.Progress(Progress{Run: run.Name, Elapsed: elapsed, Duration: cfg.Duration, Ops: ops})
		}
	}
	start := time.Now()
	m, err := measure(ctx, cfg.Clients, cfg.Duration, func(client int) round {
		var seq int64
		return func(ctx context.Context) tally {
			seq++
			return limitTally(take(ctx, client, seq))
		}
	}, progress)
	if err != nil {
		return fmt.Errorf("bench: %s: %w", run.Name, err)
	}
	ok, err := verify(ctx, m.Writes, time.Since(start))
	if err != nil {
		return fmt.Errorf("bench: %s: read back: %w", run.Name, err)
	}
	run.DurationS = m.Elapsed.Seconds()
	run.Ops, run.Writes, run.Refused, run.Errors = m.Ops, m.Writes, m.Refused, m.Errors
	run.OpsPerSec = m.OpsPerSec()
	run.P50MS, run.P99MS = ms(m.Percentile(0.50)), ms(m.Percentile(0.99))
	run.Verified = ok && m.Refused == 0
	return nil
}

// limitRunName names one of shardcounter's runs of the workload.
func limitRunName(cfg LimitConfig, path, what string) string {
	if cfg.StoreName == "" {
		return path + "/" + what
	}
	return cfg.StoreName + "/" + path + "/" + what
}

// throttleRun takes through CL.THROTTLE on a RESP port served over
// cfg.Store, one go-redis connection a client.
func throttleRun(ctx context.Context, cfg LimitConfig, prefix string) (Run, error) {
	bc := Config{Store: cfg.Store, Clients: cfg.Clients}.withDefaults()
	s, err := startRESP(ctx, bc, shardcounter.Spec{Shards: 1})
	if err != nil {
		return Run{}, err
	}
	key := prefix + "/throttle"
	policy := shardcounter.LimitPolicy{Kind: shardcounter.LimitGCRA, Limit: throttleCount,
		Period: throttlePeriod * shardcounter.Duration(time.Second), Burst: throttleBurst + 1}
	run := Run{Name: limitRunName(cfg, PathRESP, "CL.THROTTLE"), Store: cfg.StoreName, Path: PathRESP, Shards: policy.StateShards()}
	throttle := func(ctx context.Context, quantity int) ([]int64, error) {
		v, err := s.c.Do(ctx, "CL.THROTTLE", key, throttleBurst, throttleCount, throttlePeriod, quantity).Int64Slice()
		if err == nil && len(v) != 5 {
			err = fmt.Errorf("CL.THROTTLE answered %d integers, want 5", len(v))
		}
		return v, err
	}
	err = measureTakes(ctx, cfg, &run,
		func(ctx context.Context, _ int, _ int64) (bool, error) {
			v, err := throttle(ctx, 1)
			return err == nil && v[0] == 0, err
		},
		func(ctx context.Context, admitted int64, elapsed time.Duration) (bool, error) {
			v, err := throttle(ctx, 0) // a probe
			if err != nil {
				return false, err
			}
			// The bucket held burst+1 tokens; the run took admitted and
			// at most one token every period flowed back in.
			left := int64(throttleBurst+1) - admitted
			refill := int64(elapsed/(throttlePeriod*time.Second)) + 1
			return v[2] >= left && v[2] <= left+refill, nil
		})
	if s.eng != nil {
		run.WritesPerCommit = (&engineService{eng: s.eng}).writesPerCommit()
	}
	// The key's state is a counter of the store's own, which no RESP
	// command removes.
	if derr := cfg.Store.DeleteCounter(context.WithoutCancel(ctx), engine.ThrottleKeyID(policy, key)); err == nil && derr != nil && !errors.Is(derr, shardcounter.ErrNotFound) {
		err = fmt.Errorf("bench: %s: clean up: %w", run.Name, derr)
	}
	if cerr := s.close(context.WithoutCancel(ctx)); err == nil && cerr != nil {
		err = fmt.Errorf("bench: %s: stop: %w", run.Name, cerr)
	}
	return run, err
}

// takeResult is the part of a take's reply the run reads.
type takeResult struct {
	Allowed bool `json:"allowed"`
}

var takeBody = []byte(`{"cost":1}`)

// takeRun takes through POST /v1/limits/{name}/keys/{key}/take on an
// HTTP server over cfg.Store, through the http path's load generator.
func takeRun(ctx context.Context, cfg LimitConfig, prefix string) (Run, error) {
	bc := Config{Store: cfg.Store, Clients: cfg.Clients}.withDefaults()
	h, err := startHTTP(ctx, bc, shardcounter.Spec{Shards: 1})
	if err != nil {
		return Run{}, err
	}
	name, key := prefix, "hot"
	policy := shardcounter.LimitPolicy{Kind: shardcounter.LimitFixed, Limit: limitQuota, Period: shardcounter.MaxLimitPeriod}
	run := Run{Name: limitRunName(cfg, PathHTTP, "take"), Store: cfg.StoreName, Path: PathHTTP, Shards: policy.StateShards()}
	if _, _, err := h.client.CreateLimit(ctx, name, policy); err != nil {
		h.close(ctx) //nolint:errcheck // err says more
		return run, fmt.Errorf("bench: %s: create the limit: %w", run.Name, err)
	}
	path := "/v1/limits/" + shttp.EscapeID(name) + "/keys/" + shttp.EscapeID(key) + "/take"
	err = measureTakes(ctx, cfg, &run,
		func(ctx context.Context, _ int, _ int64) (bool, error) {
			var res takeResult
			err := h.lg.do(ctx, http.MethodPost, path, takeBody, &res)
			return res.Allowed, err
		},
		func(ctx context.Context, admitted int64, _ time.Duration) (bool, error) {
			r, err := h.client.Peek(ctx, name, key, 1)
			if err != nil {
				return false, err
			}
			return r.Remaining == limitQuota-admitted, nil
		})
	if h.eng != nil {
		run.WritesPerCommit = (&engineService{eng: h.eng}).writesPerCommit()
	}
	if derr := h.client.DeleteLimit(context.WithoutCancel(ctx), name); err == nil && derr != nil {
		err = fmt.Errorf("bench: %s: clean up: %w", run.Name, derr)
	}
	if cerr := h.close(context.WithoutCancel(ctx)); err == nil && cerr != nil {
		err = fmt.Errorf("bench: %s: stop: %w", run.Name, cerr)
	}
	return run, err
}

// limitPeerRun takes on the Redis server at url as peer does, one
// connection a client.
func limitPeerRun(ctx context.Context, cfg LimitConfig, peer, url, prefix string) (Run, error) {
	opts, err := goredis.ParseURL(url)
	if err != nil {
		return Run{}, fmt.Errorf("bench: peer %s: %q is not a redis:// URL: %w", peer, url, err)
	}
	opts.PoolSize, opts.MinIdleConns = cfg.Clients, cfg.Clients
	opts.ReadTimeout, opts.WriteTimeout = respTimeout, respTimeout
	c := goredis.NewClient(opts)
	defer c.Close()
	settings, err := RedisSettings(ctx, c)
	if err != nil {
		return Run{}, fmt.Errorf("bench: peer %s on %s: %w", peer, opts.Addr, err)
	}
	run := Run{Path: PathPeer, Peer: peer, Store: "redis", Settings: settings,
		Name: "peer/" + peer + "/" + settingsName(settings, "appendfsync")}
	if settings["appendonly"] == "no" {
		run.Name = "peer/" + peer + "/appendonly=no"
	}
	key := prefix + "/" + peer
	var keys sync.Map // the fixed windows' keys taken from
	var take func(ctx context.Context, client int, seq int64) (bool, error)
	var verify func(ctx context.Context, admitted int64, _ time.Duration) (bool, error)
	switch peer {
	case PeerRedisSlidingZset:
		script := goredis.NewScript(slidingZsetScript)
		if err := script.Load(ctx, c).Err(); err != nil {
			return run, fmt.Errorf("bench: peer %s: SCRIPT LOAD: %w", peer, err)
		}
		window := peerWindow.Milliseconds()
		take = func(ctx context.Context, client int, seq int64) (bool, error) {
			// A member of its own for every take, as the script's users
			// make one (the time and a random or sequence number).
			now := time.Now().UnixMilli()
			member := strconv.FormatInt(now, 10) + "-" + strconv.Itoa(client) + "-" + strconv.FormatInt(seq, 10)
			v, err := script.EvalSha(ctx, c, []string{key}, now, window, peerLimit, member).Int64Slice()
			if err == nil && len(v) != 2 {
				err = fmt.Errorf("the script answered %d integers, want 2", len(v))
			}
			return err == nil && v[0] == 1, err
		}
		verify = func(ctx context.Context, admitted int64, _ time.Duration) (bool, error) {
			n, err := c.ZCard(ctx, key).Result()
			return n == admitted, err
		}
	case PeerRedisFixedWindow:
		unit := int64(peerWindow / time.Second)
		take = func(ctx context.Context, _ int, _ int64) (bool, error) {
			// envoyproxy/ratelimit's key: the descriptor and the start
			// of the window, in Unix seconds.
			k := key + "_" + strconv.FormatInt(time.Now().Unix()/unit*unit, 10)
			if _, ok := keys.Load(k); !ok {
				keys.Store(k, true)
			}
			p := c.Pipeline()
			incr := p.IncrBy(ctx, k, 1)
			p.Expire(ctx, k, peerWindow)
			if _, err := p.Exec(ctx); err != nil {
				return false, err
			}
			return incr.Val() <= peerLimit, nil
		}
		verify = func(ctx context.Context, admitted int64, _ time.Duration) (bool, error) {
			var sum int64
			var err error
			keys.Range(func(k, _ any) bool {
				var n int64
				if n, err = c.Get(ctx, k.(string)).Int64(); err != nil {
					return false
				}
				sum += n
				return true
			})
			return sum == admitted, err
		}
	}
	err = measureTakes(ctx, cfg, &run, take, verify)
	del := []string{key}
	keys.Range(func(k, _ any) bool { del = append(del, k.(string)); return true })
	if derr := c.Del(context.WithoutCancel(ctx), del...).Err(); err == nil && derr != nil {
		err = fmt.Errorf("bench: %s: clean up: %w", run.Name, derr)
	}
	return run, err
}
