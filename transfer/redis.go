package transfer

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/redis"
)

// scanCount is the COUNT hint of each SCAN, SSCAN and HSCAN: a call
// does about this much work in Redis, so a migration never holds it for
// long, unlike KEYS or SMEMBERS of a large set.
const scanCount = 1000

// Skipped is a Redis key a migration did not move, and why.
type Skipped struct {
	Key    string `json:"key"`
	Type   string `json:"type"`
	Reason string `json:"reason"`
}

// RedisOptions configure a migration from Redis.
type RedisOptions struct {
	// Match is SCAN's MATCH pattern; "" or "*" for every key.
	Match string
	// Shards is the shard count of the counters it makes.
	Shards int
	// Skipped, when set, is told of each key not moved.
	Skipped func(Skipped)
	// Progress, when set, is told of each key read.
	Progress *Progress
}

// RedisStats count what a migration from Redis read.
type RedisStats struct {
	Keys    int64 // keys read
	Skipped int64 // of them not moved
	WithTTL int64 // of them moved with a TTL, carried over as a deadline
}

// RedisSource is the Redis a migration reads: one server, or a cluster.
type RedisSource = goredis.UniversalClient

// OpenRedisSource connects to the Redis that a redis:// or
// redis+cluster:// DSN names.
func OpenRedisSource(ctx context.Context, dsn string) (RedisSource, error) {
	d, err := redis.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	var c RedisSource
	if d.Cluster {
		c = goredis.NewClusterClient(d.ClusterOptions())
	} else {
		c = goredis.NewClient(d.Options())
	}
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "redis %s: %v", dsn, err)
	}
	return c, nil
}

// RedisRecords reads the keys of src that match opts.Match with SCAN and
// sends, on the channel it returns, the records of an export that holds
// them: an integer string as a sum counter, a set as a distinct counter,
// a hash of integers as a hash of counters (a counter per field, and the
// hash's marker). Every other key is told to opts.Skipped. The channel
// closes after the last record; the error function then says whether
// the scan stopped early.
func RedisRecords(ctx context.Context, src goredis.UniversalClient, opts RedisOptions, st *RedisStats) (<-chan *Record, func() error) {
	ch := make(chan *Record, 256)
	var scanErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		scanErr = scanRedis(ctx, src, opts, st, ch)
	}()
	return ch, func() error { <-done; return scanErr }
}

func scanRedis(ctx context.Context, src goredis.UniversalClient, opts RedisOptions, st *RedisStats, ch chan<- *Record) error {
	match := opts.Match
	if match == "" {
		match = "*"
	}
	cc, ok := src.(*goredis.ClusterClient)
	if !ok {
		return scanNode(ctx, src, src, match, opts, st, ch)
	}
	// SCAN walks one node: walk every master, one at a time (their keys
	// are read through the cluster client, which routes each by slot).
	var mu sync.Mutex
	return cc.ForEachMaster(ctx, func(ctx context.Context, node *goredis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		return scanNode(ctx, node, src, match, opts, st, ch)
	})
}

// scanNode SCANs node and migrates the keys it finds, reading them
// through src.
func scanNode(ctx context.Context, node goredis.Cmdable, src goredis.UniversalClient, match string, opts RedisOptions, st *RedisStats, ch chan<- *Record) error {
	var cursor uint64
	for {
		keys, next, err := node.Scan(ctx, cursor, match, scanCount).Result()
		if err != nil {
			return fmt.Errorf("SCAN: %w", err)
		}
		slices.Sort(keys)
		for len(keys) > 0 {
			n := min(len(keys), pipelineKeys)
			if err := migrateKeys(ctx, src, keys[:n], opts, st, ch); err != nil {
				return err
			}
			keys = keys[n:]
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// pipelineKeys is how many keys one pipeline reads: enough to amortise
// the round trip, few enough that Redis's other clients wait for one
// short burst of commands, not a long one.
const pipelineKeys = 100

// migrateKeys reads the types, TTLs and (for strings) values of keys in
// one pipeline, then each set or hash on its own.
func migrateKeys(ctx context.Context, src goredis.UniversalClient, keys []string, opts RedisOptions, st *RedisStats, ch chan<- *Record) error {
	pipe := src.Pipeline()
	types := make([]*goredis.StatusCmd, len(keys))
	ttls := make([]*goredis.DurationCmd, len(keys))
	gets := make([]*goredis.StringCmd, len(keys))
	for i, k := range keys {
		// GET of a key that is not a string fails on its own
		// (WRONGTYPE), and is then not used.
		types[i], ttls[i], gets[i] = pipe.Type(ctx, k), pipe.PTTL(ctx, k), pipe.Get(ctx, k)
	}
	pipe.Exec(ctx) // each command's error is its own
	for i := range keys {
		if err := types[i].Err(); err != nil {
			return fmt.Errorf("TYPE: %w", err)
		}
	}
	send := func(r *Record) error {
		select {
		case ch <- r:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i, k := range keys {
		st.Keys++
		opts.Progress.Add(1)
		typ := types[i].Val()
		// A key's TTL becomes its name's deadline: PTTL's time from now,
		// to the millisecond, on every counter line the key makes.
		var deadline *time.Time
		if ttl := ttls[i].Val(); ttl > 0 {
			at := time.UnixMilli(time.Now().Add(ttl).UnixMilli()).UTC()
			deadline = &at
		}
		sendKey := func(r *Record) error {
			if r.Counter != nil {
				r.Counter.ExpiresAt = deadline
			}
			return send(r)
		}
		var recs []*Record
		var reason string
		var err error
		switch {
		case shardcounter.ValidateName("key", k) != nil:
			reason = "the key is not a valid counter id (1 to 256 bytes of UTF-8 without control characters)"
		case typ == "none":
			continue // gone since SCAN returned it
		case typ == "string":
			recs, reason, err = redisString(gets[i], k, opts.Shards)
		case typ == "set":
			err = redisSet(ctx, src, k, opts, sendKey)
		case typ == "hash":
			recs, reason, err = redisHash(ctx, src, k, opts.Shards)
		default:
			reason = "a " + typ + " has no counterpart among counters"
		}
		if err != nil {
			return fmt.Errorf("key %q: %w", k, err)
		}
		if reason != "" {
			st.Skipped++
			if opts.Skipped != nil {
				opts.Skipped(Skipped{Key: k, Type: typ, Reason: reason})
			}
			continue
		}
		if deadline != nil {
			st.WithTTL++
		}
		for _, r := range recs {
			if err := sendKey(r); err != nil {
				return err
			}
		}
	}
	return nil
}

func sumCounter(id string, shards int, v int64) *Record {
	return &Record{Counter: &Counter{Type: TypeCounter, ID: id, Kind: shardcounter.KindSum, Shards: shards, Value: v}}
}

func redisString(get *goredis.StringCmd, k string, shards int) ([]*Record, string, error) {
	s, err := get.Result()
	if err == goredis.Nil {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	v, perr := strconv.ParseInt(s, 10, 64)
	if perr != nil {
		// A HyperLogLog's registers are those of Redis's hash of its
		// members (MurmurHash64A), and an approx counter's sketch holds
		// those of another (package sketch's library): neither can be
		// made from the other, and the members are not kept.
		if len(s) >= 4 && s[:4] == "HYLL" {
			return nil, "a HyperLogLog: its registers are of Redis's hash, which approx counters' sketches do not use (PFADD its members to an approx counter)", nil
		}
		return nil, "the string is not an integer", nil
	}
	return []*Record{sumCounter(k, shards, v)}, "", nil
}

// redisSet sends a set as a distinct counter, a members line per SSCAN
// page, so that a set of any size takes memory for one page. SSCAN may
// return a member twice; adding it twice changes nothing. A member that
// is not a valid name is skipped and reported.
func redisSet(ctx context.Context, src goredis.UniversalClient, k string, opts RedisOptions, send func(*Record) error) error {
	n, err := src.SCard(ctx, k).Result()
	if err != nil || n == 0 {
		return err
	}
	if err := send(&Record{Counter: &Counter{Type: TypeCounter, ID: k, Kind: shardcounter.KindDistinct, Shards: opts.Shards, Value: n}}); err != nil {
		return err
	}
	var cursor uint64
	for {
		ms, next, err := src.SScan(ctx, k, cursor, "*", scanCount).Result()
		if err != nil {
			return err
		}
		valid := ms[:0]
		for _, m := range ms {
			if shardcounter.ValidateName("member", m) != nil {
				if opts.Skipped != nil {
					opts.Skipped(Skipped{Key: k, Type: "set member", Reason: fmt.Sprintf("member %.40q is not a valid member (1 to 256 bytes of UTF-8 without control characters)", m)})
				}
				continue
			}
			valid = append(valid, m)
		}
		slices.Sort(valid)
		for len(valid) > 0 {
			c := min(len(valid), MembersPerLine)
			if err := send(&Record{Members: &Members{Type: TypeMembers, ID: k, Members: valid[:c]}}); err != nil {
				return err
			}
			valid = valid[c:]
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

func redisHash(ctx context.Context, src goredis.UniversalClient, k string, shards int) ([]*Record, string, error) {
	fields := map[string]int64{}
	var cursor uint64
	for {
		kv, next, err := src.HScan(ctx, k, cursor, "*", scanCount).Result()
		if err != nil {
			return nil, "", err
		}
		for i := 0; i+1 < len(kv); i += 2 {
			v, perr := strconv.ParseInt(kv[i+1], 10, 64)
			if perr != nil {
				return nil, fmt.Sprintf("field %.40q is not an integer", kv[i]), nil
			}
			if shardcounter.ValidateName("field", kv[i]) != nil {
				return nil, fmt.Sprintf("field %.40q is not a valid name", kv[i]), nil
			}
			fields[kv[i]] = v
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if len(fields) == 0 {
		return nil, "", nil
	}
	// The marker, as the RESP front end makes it (docs/RESP.md, "Types").
	recs := []*Record{sumCounter(shardcounter.HashMarkerID(k), 1, 0)}
	names := make([]string, 0, len(fields))
	for f := range fields {
		names = append(names, f)
	}
	slices.Sort(names)
	for _, f := range names {
		recs = append(recs, sumCounter(shardcounter.HashFieldID(k, f), shards, fields[f]))
	}
	return recs, "", nil
}

// ImportRedis moves what RedisRecords reads into store, as Import does.
func ImportRedis(ctx context.Context, src goredis.UniversalClient, store shardcounter.CounterStore, ropts RedisOptions, iopts ImportOptions) (Stats, RedisStats, error) {
	var rs RedisStats
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, wait := RedisRecords(ctx, src, ropts, &rs)
	st, err := importRecords(ctx, store, func() (*Record, error) {
		if r, ok := <-ch; ok {
			return r, nil
		}
		return nil, io.EOF
	}, iopts)
	cancel()
	if serr := wait(); err == nil && serr != nil && ctx.Err() == nil {
		err = serr
	}
	return st, rs, err
}

// EncodeRedis writes what RedisRecords reads as an unsorted export to w,
// for a server's import endpoint.
func EncodeRedis(ctx context.Context, src goredis.UniversalClient, w io.Writer, ropts RedisOptions) (RedisStats, error) {
	var rs RedisStats
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, wait := RedisRecords(ctx, src, ropts, &rs)
	enc, err := NewEncoderHeader(w, Header{Unsorted: true})
	for r := range ch {
		if err != nil {
			continue // drain
		}
		switch {
		case r.Counter != nil:
			err = enc.Counter(r.Counter)
		case r.Members != nil:
			err = enc.Members(r.Members.ID, r.Members.Members)
		}
		if err != nil {
			cancel()
		}
	}
	if serr := wait(); err == nil {
		err = serr
	}
	if err != nil {
		return rs, err
	}
	return rs, enc.Close()
}
