package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
)

// redisPeer is Redis itself driven as the resp path drives shardcounter:
// the same commands through the same code (respService), on one key per
// counter: INCR and DECR, GET, MGET for a timeline (redis-incr), or SADD,
// SREM and SCARD on one set per distinct counter (redis-sadd); one
// connection per client (go-redis's default pool, 10 per CPU, would make
// clients wait for connections on small machines); Config.Pipeline
// commands per round trip. Its memory figure is INFO's used_memory_rss.
func redisPeer(ctx context.Context, cfg Config, p Peer, run *Run) (target, memoryProbe, error) {
	opts, err := goredis.ParseURL(p.Target)
	if err != nil {
		return target{}, nil, fmt.Errorf("bench: peer %s: %q is not a redis:// URL: %w", p.Kind, p.Target, err)
	}
	opts.PoolSize, opts.MinIdleConns = cfg.Clients, cfg.Clients
	c := goredis.NewClient(opts)
	settings, err := RedisSettings(ctx, c)
	if err != nil {
		c.Close()
		return target{}, nil, fmt.Errorf("bench: peer %s on %s: %w", p.Kind, opts.Addr, err)
	}
	run.Store, run.Settings = "redis", settings
	// appendfsync says it all when the AOF is on; appendonly=no when not.
	run.Name = "peer/" + p.Kind + "/" + settingsName(settings, "appendfsync")
	if settings["appendonly"] == "no" {
		run.Name = "peer/" + p.Kind + "/appendonly=no"
	}
	if cfg.Pipeline > 1 {
		run.Name += fmt.Sprintf("/pipeline=%d", cfg.Pipeline)
		run.Pipeline = cfg.Pipeline
	}
	s := &respService{c: c, spec: shardcounter.Spec{Kind: cfg.Kind}}
	prefix := fmt.Sprintf("shardcounter-bench/%x/", time.Now().UnixNano())
	return respTarget(cfg, s, prefix, false), redisMemory{c}, nil
}

// redisMemory is a Redis server's resident memory, from INFO.
type redisMemory struct{ c *goredis.Client }

func (m redisMemory) rss(ctx context.Context) (int64, bool, error) { return infoRSS(ctx, m.c) }
func (redisMemory) process() string                                { return "redis" }

// RedisSettings returns the Redis server's version and persistence
// settings, which bound INCR's throughput: with appendfsync always every
// event-loop pass ends with an fsync.
func RedisSettings(ctx context.Context, c *goredis.Client) (map[string]string, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return nil, err
	}
	s := map[string]string{}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			s["version"] = v
		}
	}
	for _, k := range []string{"appendonly", "appendfsync"} {
		kv, err := c.ConfigGet(ctx, k).Result()
		if err != nil {
			return nil, err
		}
		if v, ok := kv[k]; ok {
			s[k] = v
		}
	}
	if s["appendonly"] == "no" {
		delete(s, "appendfsync") // it does not apply
	}
	return s, nil
}
