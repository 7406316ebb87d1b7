package bench

import (
	"fmt"
	"math"
	"time"

	"github.com/shardcounter/shardcounter"
)

// Paths, as SPEC.md names them in a run's "path".
const (
	PathNaive  = "naive"  // the seed algorithm: CounterStore.Add, one store write per increment
	PathEngine = "engine" // in process through the engine: group commit, durable acknowledgement
	PathHTTP   = "http"   // a shardcounter HTTP server over the engine, end to end
	PathRESP   = "resp"   // a shardcounter RESP port, through go-redis
	PathPeer   = "peer"   // a peer: what users would run instead (see Peers)
)

// Defaults of Config.
const (
	DefaultClients  = 64
	DefaultCounters = 1
	DefaultDuration = 10 * time.Second
	// MaxPipeline bounds Config.Pipeline: past some dozens a deeper
	// pipeline measures the client's buffers, not the server.
	MaxPipeline = 1000
)

// DefaultShards are the shard counts run when Config.Shards is empty.
var DefaultShards = []int{1, 4, 16, 64}

// Config describes a benchmark: the store, the load and the workload.
type Config struct {
	// Store is what the naive and engine paths write to, and what the
	// http path's own server serves. Peers do not use it.
	Store     shardcounter.CounterStore
	StoreName string // the store's name in results, such as "postgres" or "bolt"

	// Server is the base URL of a running shardcounter server for the
	// http path. Empty: the path starts its own server over Store, in
	// this process (see HTTP in the package doc of the CLI). Token is
	// sent as its bearer token when set, over HTTP and as RESP's AUTH.
	Server string
	Token  string
	// RESP is the address (host:port) of a shardcounter RESP port for the
	// resp path.
	RESP string

	Clients  int           // concurrent clients, one round trip in flight each; default DefaultClients
	Counters int           // counters written; default DefaultCounters (one hot counter)
	Duration time.Duration // of each run; default DefaultDuration
	Shards   []int         // one run per shard count; default DefaultShards

	// MaxInFlight, for the engine path, runs it once per value with that
	// engine.Config.MaxInFlight, so that one report compares them; empty
	// runs it once with the engine's default.
	MaxInFlight []int
	// MaxReadsInFlight is engine.Config.MaxReadsInFlight of every engine
	// the run starts (the engine path's, and the servers of the http and
	// resp paths); 0 is the engine's default.
	MaxReadsInFlight int
	// MaxStaleness and CacheSize are engine.Config's of every engine the
	// run starts: how old a cached read may be, and how many counters'
	// readings are kept; 0 is the engine's default.
	MaxStaleness time.Duration
	CacheSize    int
	// ShardWriteInterval, when set, is engine.Config.ShardWriteInterval
	// of every engine the run starts: the pace of commits per shard
	// document (0 is none). Unset, a store that paces itself
	// (shardcounter.ShardPacer: Firestore) keeps its own, as serve does.
	ShardWriteInterval *time.Duration

	// Zipf, when above 1, picks counter i (0-based) with probability
	// proportional to 1/(i+1)^Zipf, as math/rand/v2's Zipf does: a few
	// hot counters and a long tail, as likes on posts are. 0 picks
	// counters uniformly.
	Zipf float64

	// Workload is WorkloadSingle (the default) or WorkloadTimeline.
	Workload string
	// ReadRatio is the fraction of operations that are reads (0 to 1):
	// of one counter, or on a timeline of ReadBatch counters (default
	// DefaultReadBatch). ReadConsistency is theirs: strong (default) or
	// cached; the naive path, the resp path and the peers have no cache,
	// so their reads are always strong.
	ReadRatio       float64
	ReadBatch       int
	ReadConsistency shardcounter.Consistency

	// Kind is what the counters count when Variants is empty: sum
	// (default) or distinct, whose writes add a member drawn uniformly
	// from Members (default DefaultMembers). Peers are run on their own
	// kind; the http-bare peer on this one.
	Kind    shardcounter.Kind
	Members int
	// DecrRatio is the fraction of writes that subtract 1 (remove the
	// member, on a distinct counter) instead of adding, so that a
	// bounded counter meets its floor.
	DecrRatio float64
	// Variants run each path once per variant and shard count; default
	// Plain, or Distinct when Kind is distinct. Peers run once each, on
	// the kind they count.
	Variants []Variant

	// Prefill, before each run's clock starts, writes once to every
	// counter (+1, or adds member 0) in batches, creating them, so that
	// the run and its memory figures cover all Counters.
	Prefill bool

	// Pipeline, for the resp path and the Redis peers, sends this many
	// commands per round trip (default 1: one command at a time).
	Pipeline int

	// KeepCounters leaves the paths' counters in the store after each
	// run instead of deleting them one by one: for a store thrown away
	// after the benchmark, where a million deletes would take minutes.
	// Peers always clean up (a dropped table, DEL of 1000 keys at once).
	KeepCounters bool

	// Progress, when set, is called about twice a second during a run
	// with what it has done so far, for a progress line.
	Progress func(Progress)

	// AfterLoad, when set, is called with the run's name as each run's
	// load ends, before the run stops what it started and reads its
	// counters back: while the process still holds everything the run
	// made, for a heap profile. Its error fails the run.
	AfterLoad func(run string) error
}

// Progress is a run's state, as Config.Progress receives it.
type Progress struct {
	Run      string        // the run's name
	Elapsed  time.Duration // since the run started
	Duration time.Duration // the run's planned length
	Ops      int64         // operations answered so far, failed or not
}

func (c Config) withDefaults() Config {
	if c.Clients == 0 {
		c.Clients = DefaultClients
	}
	if c.Counters == 0 {
		c.Counters = DefaultCounters
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if len(c.Shards) == 0 {
		c.Shards = DefaultShards
	}
	if c.Workload == "" {
		c.Workload = WorkloadSingle
	}
	if c.ReadBatch == 0 {
		c.ReadBatch = DefaultReadBatch
	}
	if c.ReadConsistency == "" {
		c.ReadConsistency = shardcounter.Strong
	}
	if c.Kind == "" {
		c.Kind = shardcounter.KindSum
	}
	if c.Members == 0 {
		c.Members = DefaultMembers
	}
	if len(c.Variants) == 0 {
		c.Variants = []Variant{Plain()}
		if c.Kind == shardcounter.KindDistinct {
			c.Variants = []Variant{Distinct()}
		}
	}
	if c.Pipeline == 0 {
		c.Pipeline = 1
	}
	return c
}

// Validate checks the workload, which every path and peer shares, with
// the defaults applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Clients < 1:
		return fmt.Errorf("bench: %d clients: give 1 or more", c.Clients)
	case c.Counters < 1:
		return fmt.Errorf("bench: %d counters: give 1 or more", c.Counters)
	case c.Duration <= 0:
		return fmt.Errorf("bench: duration %v: give a positive one", c.Duration)
	case c.Zipf != 0 && !(c.Zipf > 1 && c.Zipf < math.Inf(1)):
		return fmt.Errorf("bench: zipf %v: give an exponent above 1, or 0 for uniform", c.Zipf)
	case c.Workload != WorkloadSingle && c.Workload != WorkloadTimeline:
		return fmt.Errorf("bench: workload %q is unknown: use %s or %s", c.Workload, WorkloadSingle, WorkloadTimeline)
	case !(c.ReadRatio >= 0 && c.ReadRatio <= 1):
		return fmt.Errorf("bench: read ratio %v: give a fraction from 0 to 1", c.ReadRatio)
	case c.ReadBatch < 1 || c.ReadBatch > shardcounter.MaxReadBatch:
		return fmt.Errorf("bench: read batch %d: give 1 to %d counters", c.ReadBatch, shardcounter.MaxReadBatch)
	case c.ReadConsistency != shardcounter.Strong && c.ReadConsistency != shardcounter.Cached:
		return fmt.Errorf("bench: read consistency %q: give strong or cached", c.ReadConsistency)
	case c.Kind != shardcounter.KindSum && c.Kind != shardcounter.KindDistinct:
		return fmt.Errorf("bench: kind %q: give sum or distinct", c.Kind)
	case c.Members < 1:
		return fmt.Errorf("bench: %d members: give 1 or more", c.Members)
	case !(c.DecrRatio >= 0 && c.DecrRatio <= 1):
		return fmt.Errorf("bench: decrement ratio %v: give a fraction from 0 to 1", c.DecrRatio)
	case c.Pipeline < 1 || c.Pipeline > MaxPipeline:
		return fmt.Errorf("bench: pipeline %d: give 1 to %d commands", c.Pipeline, MaxPipeline)
	}
	for _, v := range c.Variants {
		if err := shardcounter.ValidateSpec(v.spec(1)); err != nil {
			return fmt.Errorf("bench: counter variant %s: %w", v.Name, err)
		}
	}
	return nil
}
