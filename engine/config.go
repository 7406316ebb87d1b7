package engine

import (
	"fmt"
	"go.opentelemetry.io/otel/trace"
	"log/slog"
	"time"

	"github.com/shardcounter/shardcounter"
)

// Defaults of Config.
const (
	DefaultShards    = 16
	DefaultMaxBatch  = 8192
	DefaultMaxQueued = 1 << 18
	// DefaultMaxInFlight is Config.MaxInFlight's default: see
	// docs/DESIGN.md, "Flushes in flight", for why.
	DefaultMaxInFlight  = 1
	DefaultMaxStaleness = time.Second
	// DefaultMaxReadsInFlight is Config.MaxReadsInFlight's default: see
	// docs/DESIGN.md, "Strong reads, gathered", for why.
	DefaultMaxReadsInFlight = 2
	// DefaultCacheSize is Config.CacheSize's default: enough rollups for
	// every counter a busy page of timelines reads within MaxStaleness,
	// few enough that memory stays bounded however many counters exist.
	DefaultCacheSize = 100_000
	// DefaultFlushInterval is how long, in async mode, the flusher lets a
	// batch gather before committing it: short enough that little is lost
	// on a crash, long enough that one commit carries many writes.
	DefaultFlushInterval = 10 * time.Millisecond
	// DefaultFlushTimeout bounds one commit: long enough for a full batch
	// on a loaded store, short enough that writers of a hung store hear
	// about it in seconds.
	DefaultFlushTimeout = 5 * time.Second
)

// Durability says when the engine answers a write.
type Durability string

const (
	// Durable answers a write once the batch holding it has committed, so
	// an acknowledged write survives a crash. A failed commit is the
	// error of exactly the writes of that batch.
	Durable Durability = "durable"
	// Async answers a write once it is queued. The flusher commits it
	// within Config.FlushInterval (plus the time of one commit); a crash
	// of the process loses the writes still queued, and a failed commit is
	// reported in Stats and the log, since its writers have had their
	// answer. The write result says Applied (accepted) and never
	// Duplicate: whether a request id was seen is known only at commit.
	Async Durability = "async"
)

// ParseDurability parses a durability mode as the CLI and config files
// spell it ("" means Durable).
func ParseDurability(s string) (Durability, error) {
	switch Durability(s) {
	case "", Durable:
		return Durable, nil
	case Async:
		return Async, nil
	}
	return "", shardcounter.Errorf(shardcounter.EINVALID, "durability %q is unknown: use durable or async", s)
}

// Config configures an Engine. The zero value is usable: each field's doc
// gives the default a zero value stands for. New refuses negative numbers
// and durations, a DefaultShards outside 1 to MaxShards, and an unknown
// Durability, with an invalid_argument error.
type Config struct {
	// DefaultShards is the shard count of counters created without one,
	// and of counters created by a write (auto-create). Default 16.
	DefaultShards int
	// ApproxShards is the shard count of approx counters created by a
	// write (PFADD) or a merge into a missing counter with no source.
	// Default: 1 on a store that holds its counters in one process's
	// memory (shardcounter.MemoryReader: Pebble), whose writes are serial
	// anyway, so that a shard buys no concurrency and costs a sketch
	// changed per commit; DefaultShards elsewhere.
	ApproxShards int
	// NoAutoCreate makes a write to an unknown counter fail with
	// ErrNotFound instead of creating it.
	NoAutoCreate bool
	// MaxBatch bounds the writes folded into one store.Apply. Default 8192.
	MaxBatch int
	// MaxQueued bounds the writes waiting for a flush; a writer past it
	// waits for room (or its context). Default 262144.
	MaxQueued int
	// MaxInFlight bounds, in durable mode, how many flushes run at once. A
	// second flush starts beside a running one only when the last flush
	// was broad (many counters): concurrent commits of batches over many
	// counters overlap on a store whose commits of different rows run in
	// parallel (PostgreSQL), while on one hot counter they would
	// only queue for its row. On a store whose commits of one counter
	// overlap too (shardcounter.HotCommitPipeliner: Redis) it starts
	// whatever the last flush was. While all are running, writes gather
	// for the next. On bolt, whose writes are serialised, keep 1. Async
	// mode always runs one flush at a time, so that writes commit in the
	// order they were answered. Default DefaultMaxInFlight, 1; 2 suits
	// PostgreSQL (docs/DESIGN.md). 0 takes the store's advice when it
	// gives one (shardcounter.CommitPipeliner: Pebble's and Redis's are 2).
	MaxInFlight int
	// MaxStaleness bounds how old a cached reading may be. Default 1s.
	MaxStaleness time.Duration
	// CacheSize bounds the counters whose rollups (cached readings) the
	// engine keeps; past it the least recently read is dropped and read
	// afresh when next asked for. Default DefaultCacheSize.
	CacheSize int
	// MaxReadsInFlight bounds the store reads cached reads make at once
	// to fetch counters without a fresh rollup, and, apart from those,
	// the store reads strong reads make at once. While they run, the
	// misses of other reads (or the other strong reads) queue, and the
	// next store read takes them all (up to shardcounter.MaxReadBatch):
	// fewer, larger reads, which is what a store charging a round trip
	// and a statement per call does best with. A strong read joins only
	// a store read that starts after it, so it stays linearizable.
	// Default DefaultMaxReadsInFlight.
	MaxReadsInFlight int
	// Policy turns CreateOptions.FollowersCount and Visibility into a shard
	// count. Default DefaultPolicy.
	Policy ShardPolicy
	// Durability says when a write is answered: Durable (the default) or
	// Async. New refuses any other value; ParseDurability reads input.
	Durability Durability
	// FlushInterval bounds, in async mode, how long a queued write waits
	// before the flusher starts committing it; the flusher gathers writes
	// for up to this long (a full batch goes at once). Durable mode never
	// waits. Default 10ms.
	FlushInterval time.Duration
	// DedupeWindow is how long a request id is remembered: a write whose
	// id was recorded less than this long ago is a duplicate. New hands it
	// to the store (shardcounter.RequestIDExpirer, part of every store);
	// engines sharing one store should use the same window. Default 24h.
	DedupeWindow time.Duration
	// FlushTimeout bounds each store call the flusher makes (an Apply,
	// and the CreateCounter of an auto-create). The flusher is the only
	// path from the queue to the store, so without a bound one call that
	// hangs on an unreachable store would hold every queued write, and
	// every writer, until the operating system gives up on the
	// connection. A call past the bound fails with the store's own error
	// for an expired context: unavailable when nothing can have been
	// applied, an outcome-unknown internal error when a commit was sent.
	// Default DefaultFlushTimeout.
	FlushTimeout time.Duration
	// OnFlush, when set, is called by the flusher after each store.Apply
	// with what that call carried and how it went, so a caller can keep
	// histograms of batch sizes and commit latency without the engine
	// depending on a metrics library. It runs on the goroutine of the
	// flush, before the flush's writers are answered: it must be quick and
	// must not call the engine. With MaxInFlight above 1 it may be called
	// from several flushes at once.
	OnFlush func(FlushEvent)
	// Observers hear of every store call of the engine that changes
	// counters (shardcounter.CommitObserver): its flushes' commits, with
	// their increments, outcomes and the clock around them, and its
	// creates, deletes, resets, reshards and merges, and the deletions of
	// expired names package expiry makes. They are called in order before
	// the engine's own (its rankings), and after them in reverse order;
	// the same rules as OnFlush's hold. A tracer is one.
	Observers []shardcounter.CommitObserver
	// Tracer, when set, traces the write path (trace.go, and
	// docs/OPERATIONS.md, "Traces"): a batch any of whose writes' spans is
	// sampled gets a span of its own, SpanCommit, a child of the first such
	// write's span and linked from each of them, and each store call under
	// a sampled span a span with its outcome. The span of a write is its
	// context's, or the one WithWriteSpans gives it. Nil, the default,
	// costs the write path a nil check.
	Tracer trace.Tracer
	// Logger receives what has no caller to return to: failed commits of
	// async writes. Default slog.Default().
	Logger *slog.Logger
	// Now returns the current time, for cached readings and deadlines.
	// Default time.Now.
	Now func() time.Time

	// LimitSweepInterval is how often the engine removes the idle states
	// of the limit keys it took from (sweep.go); 0 means
	// DefaultLimitSweepInterval, and a negative value turns the removal
	// off (the states then stay, as before there was one).
	LimitSweepInterval time.Duration

	// ExpiryRefresh bounds how late the engine sees a deadline set or
	// removed by another process sharing its store (package expiry); 0
	// means a second. Deadlines changed through this engine count at once.
	ExpiryRefresh time.Duration
	// ShardWriteInterval, when positive, paces commits per shard: each
	// shard of a counter is committed at most once per interval, the
	// shards taking turns, and a write is answered at the next commit of
	// any shard of its counter (see pace.go and docs/DESIGN.md, "Pacing").
	// For stores whose records take about one write a second: Firestore
	// and Datastore, where serve turns it on at 1s. Default 0: off, and
	// then the flush path is exactly what it is without it.
	ShardWriteInterval time.Duration
	// RankingRescan makes every refresh of a ranking read every counter
	// with its prefix, and reload the definitions, instead of only the
	// counters this engine's commits changed: for a store that other
	// servers, or clients of the store itself, write to (docs/RANKINGS.md).
	// A refresh then costs a pass over the ranking's counters once per
	// half its staleness bound. Default false.
	RankingRescan bool
}

// Validate returns the invalid_argument error New would return for c, or
// nil when New accepts it: for a caller that builds a Config from its own
// flags and wants to refuse them before it opens a store.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// withDefaults returns c with each zero field set to its default, or an
// error that names the first field New cannot use.
func (c Config) withDefaults() (Config, error) {
	bad := func(field string, v any, want string) (Config, error) {
		return Config{}, shardcounter.Errorf(shardcounter.EINVALID, "engine: Config.%s is %v: %s", field, v, want)
	}
	switch {
	case c.ApproxShards != 0 && shardcounter.ValidateShards(c.ApproxShards) != nil:
		return bad("ApproxShards", c.ApproxShards, fmt.Sprintf("give %d to %d, or 0 for the default", shardcounter.MinShards, shardcounter.MaxShards))
	case c.DefaultShards != 0 && shardcounter.ValidateShards(c.DefaultShards) != nil:
		return bad("DefaultShards", c.DefaultShards, fmt.Sprintf("give %d to %d, or 0 for %d", shardcounter.MinShards, shardcounter.MaxShards, DefaultShards))
	case c.MaxBatch < 0:
		return bad("MaxBatch", c.MaxBatch, "give a positive number, or 0 for the default")
	case c.MaxQueued < 0:
		return bad("MaxQueued", c.MaxQueued, "give a positive number, or 0 for the default")
	case c.MaxInFlight < 0:
		return bad("MaxInFlight", c.MaxInFlight, "give a positive number, or 0 for the default")
	case c.MaxReadsInFlight < 0:
		return bad("MaxReadsInFlight", c.MaxReadsInFlight, "give a positive number, or 0 for the default")
	case c.CacheSize < 0:
		return bad("CacheSize", c.CacheSize, "give a positive number, or 0 for the default")
	case c.MaxStaleness < 0, c.FlushInterval < 0, c.DedupeWindow < 0, c.FlushTimeout < 0, c.ShardWriteInterval < 0:
		return bad("MaxStaleness, FlushInterval, DedupeWindow, FlushTimeout or ShardWriteInterval", "negative", "give a positive duration, or 0 for the default")
	}
	switch c.Durability {
	case "":
		c.Durability = Durable
	case Durable, Async:
	default:
		return bad("Durability", fmt.Sprintf("%q", c.Durability), "use engine.Durable or engine.Async (ParseDurability reads them)")
	}
	if c.DefaultShards == 0 {
		c.DefaultShards = DefaultShards
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxQueued == 0 {
		c.MaxQueued = DefaultMaxQueued
	}
	if c.MaxQueued < c.MaxBatch {
		c.MaxQueued = c.MaxBatch
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxReadsInFlight == 0 {
		c.MaxReadsInFlight = DefaultMaxReadsInFlight
	}
	if c.CacheSize == 0 {
		c.CacheSize = DefaultCacheSize
	}
	if c.MaxStaleness == 0 {
		c.MaxStaleness = DefaultMaxStaleness
	}
	if c.Policy == nil {
		c.Policy = DefaultPolicy
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.DedupeWindow == 0 {
		c.DedupeWindow = shardcounter.DefaultDedupeWindow
	}
	if c.FlushTimeout == 0 {
		c.FlushTimeout = DefaultFlushTimeout
	}
	if c.LimitSweepInterval == 0 {
		c.LimitSweepInterval = DefaultLimitSweepInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Durability == Async {
		c.MaxInFlight = 1
	}
	return c, nil
}
