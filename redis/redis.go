package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/dialerr"
)

// Defaults of Options and of the clients that Open makes.
const (
	DefaultPrefix       = "shardcounter:"
	DefaultRequestIDTTL = 24 * time.Hour
	DefaultDialTimeout  = 2 * time.Second
	DefaultIOTimeout    = 3 * time.Second
)

// maxAttempts bounds how often one call reloads a counter's layout and
// tries again after finding it changed (a reshard, a slot that moved). Each
// try that fails this way applied nothing, so trying again is safe.
const maxAttempts = 32

var _ shardcounter.CounterStore = (*CounterStore)(nil)

// Options configure a CounterStore. The zero value uses the defaults.
type Options struct {
	// Prefix starts every key the store writes, so that several stores, or
	// other data, can share one Redis. It must not contain '{' or '}', which
	// would override the store's hash tags. Default "shardcounter:".
	Prefix string
	// RequestIDTTL is the dedupe window: how long a request id is
	// remembered after its write. Default 24h; the engine sets its own
	// (SetDedupeWindow).
	RequestIDTTL time.Duration
	// Now returns the time recorded as a counter's creation time and as
	// the end of a layout in its reshard history. Default time.Now.
	// Request ids age by the Redis server's clock, which every process
	// sharing the store agrees on, and so are rate limits' takes decided
	// unless Now is set (a test's clock): then on Now.
	Now func() time.Time
	// WaitReplicas, when above 0, makes every write wait, before it is
	// acknowledged, until that many replicas of each master it wrote have
	// it (Redis WAIT), so that it survives the failover of its master. A
	// write whose replicas do not confirm it within WaitTimeout fails with
	// OutcomeUnknown. A batch costs one WAIT per master it wrote. The DSN
	// parameter wait_replicas sets it. Default 0: acknowledged when the
	// master has executed it.
	WaitReplicas int
	// WaitTimeout bounds each WAIT; the client's read timeout must be
	// longer. The DSN parameter wait_timeout_ms sets it. Default 1s.
	WaitTimeout time.Duration
}

// DefaultWaitTimeout is Options.WaitTimeout's default.
const DefaultWaitTimeout = time.Second

// CounterStore is a shardcounter.CounterStore on one Redis server or a
// Redis Cluster. Each shard of a counter is its own key, so a cluster
// spreads a counter's shards over its masters; see the package doc for the
// key layout and the protocols. It is safe for concurrent use, also by
// several processes sharing one Redis.
type CounterStore struct {
	client  goredis.UniversalClient
	cluster *goredis.ClusterClient // nil on a single server
	single  *goredis.Client        // nil on a cluster
	addr    string                 // the single server's address
	owned   bool                   // Close closes client
	prefix  string
	ttl     atomic.Int64 // the dedupe window (Options.RequestIDTTL), in nanoseconds
	now     func() time.Time

	limitNow func() time.Time // Options.Now as given: nil for the server's clock (TIME), which takes use

	waitReplicas int           // Options.WaitReplicas
	waitTimeout  time.Duration // Options.WaitTimeout

	mu      sync.RWMutex
	layouts map[string]*layout // cached metadata; a stale entry is detected by the shards' epochs

	stats stats

	markerSeed string        // random, per store: the unique part of its markers (marker.go)
	markerSeq  atomic.Uint64 // the sequence part

	sketches sketchCache // approx counters' shard sketches: see approx.go

	hook          func(step string) error // tests: fail a protocol after the named step
	singleCollect bool                    // benchmarks: read a cluster in one collect, as before reads were linearizable
	noMarkers     bool                    // benchmarks: scripts without batch markers, to measure what markers cost
}

// New returns a store on a client the caller made: a *goredis.Client for
// one server or a *goredis.ClusterClient for a cluster. The client must not
// retry commands itself (Options.MaxRetries -1; for a cluster also
// MaxRedirects -1): a retry after a lost reply could apply a write twice.
// The store retries only what the server did not execute. Close does not
// close the client.
//
// Bad options (a negative RequestIDTTL, a prefix with a hash tag) and a
// client that retries are ErrInvalid.
func New(client goredis.UniversalClient, opts Options) (*CounterStore, error) {
	if opts.RequestIDTTL < 0 {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "redis: RequestIDTTL %v is negative: give a duration, or 0 for the default %v", opts.RequestIDTTL, DefaultRequestIDTTL)
	}
	if opts.WaitReplicas < 0 || opts.WaitReplicas > maxWaitReplicas {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "redis: WaitReplicas %d: give 0 (do not wait) to %d", opts.WaitReplicas, maxWaitReplicas)
	}
	if opts.WaitTimeout < 0 || opts.WaitTimeout > maxWaitTimeout || opts.WaitTimeout%time.Millisecond != 0 {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "redis: WaitTimeout %v: give whole milliseconds up to %v, or 0 for the default %v", opts.WaitTimeout, maxWaitTimeout, DefaultWaitTimeout)
	}
	s := &CounterStore{client: client, prefix: opts.Prefix, now: opts.Now, layouts: make(map[string]*layout),
		waitReplicas: opts.WaitReplicas, waitTimeout: cmp.Or(opts.WaitTimeout, DefaultWaitTimeout)}
	s.SetDedupeWindow(opts.RequestIDTTL)
	s.markerSeed = newMarkerSeed()
	if s.prefix == "" {
		s.prefix = DefaultPrefix
	}
	if strings.ContainsAny(s.prefix, "{}") {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "redis: key prefix %q contains '{' or '}': remove them, they would put every key in one slot", s.prefix)
	}
	s.limitNow = opts.Now
	if s.now == nil {
		s.now = time.Now
	}
	switch c := client.(type) {
	case *goredis.ClusterClient:
		if c == nil {
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "redis: the client is nil: make one with redis.NewClusterClient")
		}
		o := c.Options()
		if o.MaxRedirects != 0 || o.MaxRetries > 0 {
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "redis: the cluster client retries commands (MaxRedirects %d, MaxRetries %d): set both to -1, a retried write could apply twice", o.MaxRedirects, o.MaxRetries)
		}
		if err := s.checkReadTimeout(o.ReadTimeout); err != nil {
			return nil, err
		}
		s.cluster = c
	case *goredis.Client:
		if c == nil {
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "redis: the client is nil: make one with redis.NewClient")
		}
		o := c.Options()
		if o.MaxRetries != 0 {
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "redis: the client retries commands (MaxRetries %d): set MaxRetries to -1, a retried write could apply twice", o.MaxRetries)
		}
		if err := s.checkReadTimeout(o.ReadTimeout); err != nil {
			return nil, err
		}
		s.single, s.addr = c, o.Addr
	default:
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "redis: client type %T is not supported: use *redis.Client or *redis.ClusterClient", client)
	}
	return s, nil
}

// Stats counts what the store's protocols did: how often strong reads on
// a cluster needed more than two collects, or froze their counter, and how
// often writes asked for room. Each is a count since the store was made.
type Stats struct {
	Reads      int64 // counters read strongly (each counter of ReadCounters counts)
	Collects   int64 // collects of one counter's shards (one on a single server)
	Freezes    int64 // strong reads that froze their counter (see read.go)
	Rebalances int64 // writes that asked for room (see allowance.go)
	Resolved   int64 // slot groups whose lost reply their marker settled (see marker.go)
}

type stats struct{ reads, collects, freezes, rebalances, resolved atomic.Int64 }

// Stats returns the store's counts so far. It is safe for concurrent use.
func (s *CounterStore) Stats() Stats {
	return Stats{Reads: s.stats.reads.Load(), Collects: s.stats.collects.Load(), Freezes: s.stats.freezes.Load(), Rebalances: s.stats.rebalances.Load(), Resolved: s.stats.resolved.Load()}
}

// checkReadTimeout refuses a client that would give up on the reply of a
// WAIT before the WAIT does: a late reply taken for a lost one.
func (s *CounterStore) checkReadTimeout(rt time.Duration) error {
	if rt == 0 {
		rt = DefaultIOTimeout // go-redis's default
	}
	if s.waitReplicas > 0 && rt > 0 && rt <= s.waitTimeout {
		return shardcounter.Errorf(shardcounter.EINVALID, "redis: the client's read timeout %v is not longer than WaitTimeout %v: raise it", rt, s.waitTimeout)
	}
	return nil
}

var _ shardcounter.RequestIDExpirer = (*CounterStore)(nil)

// SetDedupeWindow sets Options.RequestIDTTL, the dedupe window, for ids
// recorded from now on; d <= 0 restores DefaultRequestIDTTL. The engine
// calls it with its Config.DedupeWindow.
func (s *CounterStore) SetDedupeWindow(d time.Duration) {
	if d <= 0 {
		d = DefaultRequestIDTTL
	}
	s.ttl.Store(int64(d))
}

// Open connects to the Redis server or cluster that dsn names (see
// ParseDSN), checks that it answers, and returns a store with opts. An
// unreachable server is ErrUnavailable, within the dial timeout. A cluster
// need only answer through one of its nodes: with
// cluster-require-full-coverage no it serves the slots of its live
// masters, and so does the store (Ping tells whether all are up).
func Open(ctx context.Context, dsn string, opts Options) (*CounterStore, error) {
	d, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if d.WaitReplicas != 0 {
		if opts.WaitReplicas != 0 && opts.WaitReplicas != d.WaitReplicas {
			return nil, invalidDSN(dsn, "wait_replicas=%d, but Options.WaitReplicas is %d: set one", d.WaitReplicas, opts.WaitReplicas)
		}
		opts.WaitReplicas = d.WaitReplicas
	}
	if d.WaitTimeout != 0 {
		if opts.WaitTimeout != 0 && opts.WaitTimeout != d.WaitTimeout {
			return nil, invalidDSN(dsn, "wait_timeout_ms=%d, but Options.WaitTimeout is %v: set one", d.WaitTimeout.Milliseconds(), opts.WaitTimeout)
		}
		opts.WaitTimeout = d.WaitTimeout
	}
	d.WaitTimeout = cmp.Or(opts.WaitTimeout, DefaultWaitTimeout) // the clients' read timeout covers it
	var client goredis.UniversalClient
	if d.Cluster {
		client = goredis.NewClusterClient(d.ClusterOptions())
	} else {
		client = goredis.NewClient(d.Options())
	}
	s, err := New(client, opts)
	if err != nil {
		client.Close()
		return nil, err
	}
	s.owned = true
	if err := s.pingAny(ctx); err != nil {
		s.Close()
		return nil, unreachable(d, err)
	}
	return s, nil
}

// unreachable is Open's error when no server answers its PING: what was
// tried, why it failed, and what to check.
func unreachable(d *DSN, err error) error {
	if d.Cluster {
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE,
			"redis: cannot reach the cluster through its seed nodes %s: %s; check that its nodes run there and that the DSN's addresses and password are right",
			strings.Join(d.Addrs, ", "), dialerr.Cause(err))
	}
	return shardcounter.Errorf(shardcounter.EUNAVAILABLE,
		"redis: cannot connect to %s (database %d): %s; check that redis-server runs there and that the DSN's host, port, password and database are right",
		d.Addrs[0], d.DB, dialerr.Cause(err))
}

// Ping checks that the server, or every master of the cluster, answers:
// a cluster with a master down is not ready, even when it serves the
// other masters' slots.
func (s *CounterStore) Ping(ctx context.Context) error {
	if s.cluster != nil {
		if err := s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
			return c.Ping(ctx).Err()
		}); err != nil {
			return storeErr("ping", err, false)
		}
		return nil
	}
	return storeErr("ping", s.client.Ping(ctx).Err(), false)
}

// pingAny checks that the server, or some master of the cluster, answers,
// and returns the client's error when none does.
func (s *CounterStore) pingAny(ctx context.Context) error {
	if s.cluster == nil {
		return s.client.Ping(ctx).Err()
	}
	var mu sync.Mutex
	var up bool
	err := s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
		if err := c.Ping(ctx).Err(); err != nil {
			return err
		}
		mu.Lock()
		up = true
		mu.Unlock()
		return nil
	})
	if up {
		return nil
	}
	return err
}

// Close releases the client when the store made it (Open).
func (s *CounterStore) Close() error {
	if !s.owned {
		return nil
	}
	return s.client.Close()
}

// storeErr turns an error of the Redis client into a *shardcounter.Error.
// write says whether the failed call may have changed data. Errors that
// prove the command never ran (a refused connection, a redirect, a cluster
// that is down, a script not loaded) are ErrUnavailable: nothing was
// applied and a retry is safe. Any other error of a write is
// OutcomeUnknown: a reply lost to a timeout or a dropped connection leaves
// open whether the server executed the command, and an error reply from a
// script may come after the script applied part of its work, which Redis
// does not roll back.
func storeErr(op string, err error, write bool) error {
	if err == nil {
		return nil
	}
	var se *shardcounter.Error
	if errors.As(err, &se) {
		return err
	}
	if notExecuted(err) {
		if !write { // a read, or a step before any write was sent: there is nothing to apply
			return &shardcounter.Error{Code: shardcounter.EUNAVAILABLE, Message: fmt.Sprintf("redis: %s: %v; the command was not run, retry later", op, err)}
		}
		return &shardcounter.Error{Code: shardcounter.EUNAVAILABLE, Message: fmt.Sprintf("redis: %s: %v; nothing was applied, retry later", op, err)}
	}
	if write {
		return outcomeUnknown(op, err)
	}
	var re goredis.Error
	if errors.As(err, &re) && !errors.Is(err, goredis.Nil) {
		return &shardcounter.Error{Code: shardcounter.EINTERNAL, Message: fmt.Sprintf("redis: %s: %v", op, err)}
	}
	return &shardcounter.Error{Code: shardcounter.EUNAVAILABLE, Message: fmt.Sprintf("redis: %s: %v", op, err)}
}

// outcomeUnknown is the error of a write that Redis may have applied.
func outcomeUnknown(op string, err error) *shardcounter.Error {
	return &shardcounter.Error{Code: shardcounter.EOUTCOMEUNKNOWN, OutcomeUnknown: true,
		Message: fmt.Sprintf("redis: %s: %v", op, err) + shardcounter.OutcomeUnknownCure}
}

// notExecuted reports whether err proves that Redis did not execute the
// command: the connection was never made, or the server refused the
// command before running it.
func notExecuted(err error) bool {
	if errors.Is(err, goredis.ErrClosed) || errors.Is(err, goredis.ErrPoolTimeout) || errors.Is(err, goredis.ErrPoolExhausted) ||
		errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return redirected(err) || refused(err)
}

// refused reports whether err is a server reply that refuses a command
// before running it for a reason of the server's own, which waiting (or
// an operator) cures: too many clients, a password changed, a user
// without the command, a server that cannot persist. The store's failure,
// never a bug: unavailable.
func refused(err error) bool {
	var re goredis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	for _, p := range []string{"ERR max number of clients", "NOAUTH", "WRONGPASS", "NOPERM", "MISCONF"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// redirected reports whether err is a server reply that refuses a command
// without running it: the slot is elsewhere or moving, the cluster or the
// node is not ready, or the script is not loaded.
func redirected(err error) bool {
	var re goredis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	for _, p := range []string{"MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN", "LOADING", "MASTERDOWN", "READONLY", "BUSY ", "OOM ", "NOSCRIPT"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// retryable reports whether a failed attempt may be tried again at once:
// the command did not run, and reloading the cluster's slot map (which the
// client does after MOVED) or loading the script may make the next one
// succeed.
func retryable(err error) bool {
	return redirected(err)
}
