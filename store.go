package shardcounter

import (
	"context"
	"time"

	"github.com/shardcounter/shardcounter/sketch"
)

// Increment is one item of a batch as a store applies it.
//
// On a sum counter the store adds Delta to shard Pick mod n, where n is
// the counter's shard count at the moment the increment is applied, so a
// concurrent reshard can never strand it on a shard that no longer
// exists. Callers choose Pick uniformly at random (the seed's random
// shard). For an increment with a RequestID the pick is
// shard.PickFor(Counter, RequestID), so every retry lands on the same
// shard: the engine sets it so, and a store that keeps request ids beside
// their shard (Redis Cluster) may ignore Pick and derive it itself.
//
// On a distinct counter Member is set and Delta is +1 (add the member) or
// −1 (remove it); the store ignores Pick and uses shard
// shard.ForMember(Member) mod n, so a member is always on one shard and its
// presence and the shard's count change in one atomic step.
//
// On an approx counter Member is set and Delta is +1: the store adds the
// member to the sketch of shard shard.ForMember(Member) mod n. Or Sketch
// is set (an encoded sketch, package sketch), Member is empty and Delta 0:
// the store merges it into the sketch of shard Pick mod n (PFMERGE, and
// import, which puts each shard's sketch back on its shard). Either way
// the shard's new sketch is sketch.Apply's, and Outcome.Unchanged says
// that the commit left the shard's sketch as it was.
type Increment struct {
	Counter   string
	Delta     int64
	Pick      uint64
	RequestID string // optional; recorded atomically with the delta
	Member    string // distinct and approx counters: the member added or removed
	Sketch    []byte // approx counters: a sketch merged into shard Pick mod n
	// Kind, when set, is the kind of counter the item is meant for: on a
	// counter of another kind it fails with ErrInvalid
	// (ValidateIncrementKind, which every store calls, checks it), so a
	// member add meant for an approx counter never lands in a distinct
	// one, nor the reverse (RESP's WRONGTYPE).
	Kind Kind

	// Create, when set, creates the counter with this spec if it does not
	// exist, in the same commit as the increment: a first write costs no
	// separate round trip. Without it a missing counter is ErrNotFound.
	Create *Spec

	// Total asks for the counter's value after this commit in
	// Outcome.Total (INCR's reply), so that the engine need not read the
	// counter again in another round trip.
	Total bool

	// Txn, when not 0, names the transaction the increment belongs to
	// (a RESP MULTI/EXEC): the increments of one Apply call with the same
	// Txn are applied all or none, in one atomic step. A store whose Apply
	// is atomic as a whole has nothing to do for it. A store that is not
	// (a Redis Cluster, whose atomic step is one script on one master; a
	// document store, which splits a batch too large for one commit)
	// implements TxnApplier; the engine then folds no other write into a
	// transaction's increments, and the store may refuse a transaction it
	// cannot apply in one step, every increment of it with one
	// invalid_argument error (CrossSlot's on a Redis Cluster), applying
	// none.
	Txn uint64

	// Take, when set, makes the item a take of a rate limit's key (see
	// LimitTake): Counter is the key's state counter, Delta 0, and Create
	// the state counter's spec. Only a store that decides through package
	// decide takes it; ValidateIncrement refuses it.
	Take *LimitTake

	// Bound, when set, makes the delta conditional on the counter's
	// total (see Bound); Outcome.Applied is what it applied. Only a store
	// that decides it through package decide takes it; ValidateIncrement
	// refuses it (ErrBoundsUnsupported).
	Bound *Bound

	// If, when not 0, makes the item conditional on item If-1 of the same
	// batch, an earlier one: it applies only if that item applied and was
	// not skipped (Outcome.Skipped); otherwise nothing of it applies and
	// its Outcome.Skipped is set. The engine sets it on the records of a
	// deadline change that goes with a bounded increment (INCREX's EX), so
	// that a skipped increment leaves the deadline as it was, in the same
	// commit. Only a store that decides through package decide takes it;
	// ValidateIncrement refuses it (ErrBoundsUnsupported).
	If int
}

// Outcome is a store's result for one Increment. Err nil and Duplicate
// false means applied.
type Outcome struct {
	Duplicate bool // the (counter, request id) was recorded before; nothing applied
	// Unchanged is set on a member increment that changed nothing: an add
	// of a present member or a removal of an absent one. It was applied
	// (its request id, if any, is recorded).
	Unchanged bool
	Err       error // this item was not applied (unless IsOutcomeUnknown(Err))

	// Total, on an item without Err that asked for it (Increment.Total),
	// is the counter's value taken at the commit or read after it, before
	// Apply returned: a value the counter held while Apply ran, as a
	// strong read would return. A store that cannot read it so leaves it
	// nil, and the engine reads the counter itself; it is nil on items
	// that did not ask.
	Total *int64

	// Limit is a take's decision (Increment.Take), on an item without
	// Err: a refused take is decided, not failed.
	Limit *LimitResult

	// Applied, on a bounded item (Increment.Bound) that was applied, is
	// the delta it applied: 0 when it was skipped (nothing changed but
	// its request id recorded; on a missing counter nothing at all, the
	// counter not created and its Total 0), less than asked when it
	// saturated.
	Applied *int64

	// Skipped is set on a bounded item whose result would have left its
	// bound, without Saturate (Bound.Skips: Applied is 0), and on a
	// conditional item (Increment.If) whose condition failed, which
	// applied nothing at all.
	Skipped bool
}

// CounterStore is where counters live: metadata, shard values, members
// and time buckets. It holds storage only; coalescing, idempotency policy,
// rollups and the shard-count policy live in the engine. Every store
// passes the storetest suite. Implementations are safe for concurrent
// use, also by several processes sharing one database.
//
// Time-dependent behaviour (window buckets, request-id expiry) follows the
// store's clock: an injected Options.Now where the store has one, the
// database's clock otherwise.
type CounterStore interface {
	// CreateCounter records a counter with spec.Shards zero-valued shards.
	// It returns ErrExists when the id is taken, and ErrInvalid for a spec
	// that ValidateSpec refuses.
	CreateCounter(ctx context.Context, id string, spec Spec) (*Counter, error)
	// GetCounter returns the counter's metadata, or ErrNotFound.
	GetCounter(ctx context.Context, id string) (*Counter, error)
	// ListCounters returns up to limit counters whose ids start with prefix
	// and sort after after, in byte order of id.
	ListCounters(ctx context.Context, prefix, after string, limit int) ([]*Counter, error)
	// DeleteCounter removes the counter, its shards, members, buckets and
	// request ids, or returns ErrNotFound.
	DeleteCounter(ctx context.Context, id string) error

	// ReadCounter returns the exact sum of the counter's shards as a
	// Strong reading: linearizable, a value the counter held at some
	// moment during the call. When the sum does not fit in int64 it
	// returns ErrOutOfRange, never a wrapped value. An approx counter's
	// value is the estimate of the union of its shards' sketches read in
	// one snapshot (sketch.Count), not a sum.
	ReadCounter(ctx context.Context, id string) (*Reading, error)
	// ReadCounters reads many counters as ReadCounter does, one Reading
	// per id in order, nil for a counter that does not exist; from one
	// consistent snapshot where the store has one, in one round trip per
	// store node. More than MaxReadBatch ids is ErrTooLarge
	// (CheckReadBatch).
	ReadCounters(ctx context.Context, ids []string) ([]*Reading, error)
	// ReadShards returns the counter and each shard's value, in shard
	// order, from one consistent snapshot (for tests, debugging and admin);
	// an approx counter's shard value is the estimate of its own sketch.
	ReadShards(ctx context.Context, id string) (*Counter, []int64, error)
	// Placement returns each shard's value and the node holding it.
	Placement(ctx context.Context, id string) (*Placement, error)

	// ReadWindow returns the sum of a windowed counter's buckets whose
	// start lies in [from, to), with Reading.Window set to that interval.
	// A counter without a window is ErrInvalid.
	ReadWindow(ctx context.Context, id string, from, to time.Time) (*Reading, error)
	// ReadSeries returns a windowed counter's non-zero buckets whose start
	// lies in [from, to), at the counter's own bucket width, oldest first.
	ReadSeries(ctx context.Context, id string, from, to time.Time) ([]Bucket, error)

	// IsMember reports whether member is in a distinct counter. A sum
	// counter is ErrInvalid.
	IsMember(ctx context.Context, id, member string) (bool, error)
	// ListMembers returns up to limit members of a distinct counter that
	// sort after after, in byte order.
	ListMembers(ctx context.Context, id, after string, limit int) ([]string, error)

	// Add is the seed algorithm: one store write that adds delta to shard
	// pick mod n of a sum counter. It is the baseline of every benchmark
	// and the path with the least work per call. It returns ErrNotFound
	// for an unknown counter and ErrOutOfRange when the counter's total
	// would leave int64 or its bounds.
	Add(ctx context.Context, id string, delta int64, pick uint64) error

	// Apply applies a batch of increments and returns one Outcome per item,
	// in order. Items whose Outcome.Err is nil are applied together in one
	// atomic commit where the store can (one transaction); a store that can
	// only commit part of a batch atomically (Redis Cluster: per slot)
	// reports each item's own result, never a silent partial batch. Items
	// on one counter apply in batch order.
	//
	// An item fails on its own with ErrNotFound (no such counter, and no
	// Create), ErrInvalid (a member item on a sum counter or a delta item
	// on a distinct one) or ErrOutOfRange (the counter's total would leave
	// int64, or its Min and Max). An item whose (counter, request id) was
	// recorded before, or earlier in the same batch, is a Duplicate and
	// changes nothing. Every applied item on a windowed counter also adds
	// its delta to the bucket of the commit time, and the store removes
	// buckets past the counter's retention in work proportional to the
	// batch.
	//
	// A non-nil error means the whole batch failed: nothing was applied,
	// unless IsOutcomeUnknown(err), when all of it may have been.
	Apply(ctx context.Context, incs []Increment) ([]Outcome, error)

	// ReshardCounter changes the counter's shard count to shards, keeping
	// its value (and its members, and its buckets' sums) exactly while
	// writes go on. Shrinking folds each removed shard i into shard
	// i mod shards in one atomic step; growing adds zero-valued shards.
	// An approx counter's removed shard i is merged into the sketch of
	// shard i mod shards (its value is the union's estimate either way).
	ReshardCounter(ctx context.Context, id string, shards int) (*Counter, error)

	// Ping checks that the store answers.
	Ping(ctx context.Context) error
	// Close releases the store's resources.
	Close() error

	// What every store does beyond counters, joined here so that a
	// wrapper passes it on by embedding: request-id expiry, the shards'
	// sketches of approx counters, and ranking definitions. What only
	// some stores do is found with As (unwrap.go).
	RequestIDExpirer
	SketchStore
	RankingStore
}

// RequestIDExpirer is part of every CounterStore: a store forgets request
// ids once they are older than a dedupe window, so that the ids of a busy
// store do not grow without bound. Within the window a request id is
// applied at most once; past it, the id may be recorded afresh. Stores
// expire ids as a side effect of writes, in work proportional to them,
// and do nothing while idle. The engine calls SetDedupeWindow once, before
// its first write; a store's own default applies until then.
type RequestIDExpirer interface {
	SetDedupeWindow(d time.Duration)
}

// ShardPacer is implemented by a store whose records take only so many
// commits a second (Firestore, Datastore: about one per document): its
// ShardWriteInterval is the pace per shard record the engine keeps by
// default (engine.Config.ShardWriteInterval), 0 for none. Like the
// interfaces below it is optional: found with As, through any wrapper.
type ShardPacer interface {
	ShardWriteInterval() time.Duration
}

// TxnApplier is implemented by a CounterStore whose Apply is atomic only
// in parts, which applies the increments of one Increment.Txn in one
// atomic step of their own: a Redis Cluster (one script per master), a
// Redis server (the transaction a script of its own), Firestore and
// Datastore (one commit, unless a batch too large for one is split, which
// keeps a transaction in one part or refuses it whole).
// TxnUnits reports whether it does; the engine then keeps a transaction's
// increments apart from other writes, rather than folding them together
// into one increment per counter.
type TxnApplier interface {
	TxnUnits() bool
}

// TxnScripter is implemented by a TxnApplier whose one step for a
// transaction is a script of its own (Redis, Redis Cluster) that carries
// the transaction's deltas and members but neither a take (Increment.Take)
// nor a deadline change, whose records lie in other slots. TxnScripted
// reports whether it is; the engine then refuses a take in a transaction
// and commits a transaction's deadline changes just after its increments,
// only if they all applied. A TxnApplier that is not one (Firestore,
// Datastore: the transaction is part of one commit) takes both in the
// transaction's commit, as a store whose Apply is atomic as a whole does.
type TxnScripter interface {
	TxnScripted() bool
}

// CommitPipeliner is implemented by a CounterStore whose commits overlap:
// it builds the next batch and hands it over while an earlier one waits
// for its sync, and the syncs of batches queued together are one (Pebble's
// commit pipeline). CommitsInFlight is how many Apply calls the engine
// should run at once, unless its Config.MaxInFlight says otherwise; 0
// means no advice.
type CommitPipeliner interface {
	CommitsInFlight() int
}

// HotCommitPipeliner is implemented by a CommitPipeliner whose commits
// overlap even when they write the same counter: a commit holds nothing
// the next one waits for while it waits for its round trip and its sync
// (Redis: a commit is a script on each master it writes, each atomic and
// run in the order the master gets them, and the scripts that reach a
// master in one pass of its event loop share one fsync).
// PipelinesHotCommits reports whether they do. The engine then runs up to
// its MaxInFlight flushes at once on one hot counter too; otherwise a
// flush narrower than a few counters runs alone, since on a store that
// locks what a commit writes (PostgreSQL's rows) the second commit of a
// counter only queues for the first one's lock.
type HotCommitPipeliner interface {
	CommitPipeliner
	PipelinesHotCommits() bool
}

// MemoryReader is implemented by a CounterStore whose ReadCounters answers
// from memory, linearizably and without a round trip (Pebble keeps every
// total in memory). ReadsFromMemory reports whether it does. The engine
// then reads such a store directly, for strong and cached reads alike:
// gathering reads into shared store reads and keeping rollups would only
// add work to a read that costs less than they do.
type MemoryReader interface {
	ReadsFromMemory() bool
}

// SketchStore is part of every CounterStore: ReadSketches returns an approx counter and its
// shards' encoded sketches in shard order (nil for a shard that has none
// yet), from one consistent snapshot where the store has one. PFMERGE and
// PFCOUNT of several counters merge them (sketch.Union), and export
// writes them. A counter of another kind is ErrInvalid.
type SketchStore interface {
	ReadSketches(ctx context.Context, id string) (*Counter, [][]byte, error)
}

// DefaultDedupeWindow is how long a request id is remembered when nobody
// says otherwise: the engine's Config.DedupeWindow and each store's own
// default until SetDedupeWindow. A day outlasts any client's retries.
const DefaultDedupeWindow = 24 * time.Hour

// ValidateIncrementKind returns ErrInvalid when inc does not fit a counter
// of kind: a member written to a sum counter, or a delta to a distinct
// one. Every store refuses such an item on its own.
func ValidateIncrementKind(inc Increment, kind Kind) error {
	if kind == "" {
		kind = KindSum
	}
	if inc.Kind != "" && inc.Kind != kind {
		return Errorf(EINVALID, "counter %q is a %s counter, not %s", inc.Counter, kind, inc.Kind)
	}
	switch kind {
	case KindDistinct:
		if inc.Member == "" {
			return Errorf(EINVALID, "counter %q is a distinct counter: add or remove members, it takes no deltas", inc.Counter)
		}
	case KindApprox:
		switch {
		case inc.Member == "" && inc.Sketch == nil:
			return Errorf(EINVALID, "counter %q is an approx counter: add members to it, it takes no deltas", inc.Counter)
		case inc.Member != "" && inc.Delta != 1:
			return Errorf(EINVALID, "counter %q is an approx counter: members can be added to it, not removed", inc.Counter)
		}
	default:
		switch {
		case inc.Member != "":
			return Errorf(EINVALID, "counter %q is a sum counter: write a delta to it, or add members to a distinct counter", inc.Counter)
		case inc.Sketch != nil:
			return Errorf(EINVALID, "counter %q is a sum counter: only an approx counter takes a sketch", inc.Counter)
		}
	}
	return nil
}

// ValidateIncrement checks an increment as a store receives it; every
// store refuses, as an item of its own, what this refuses.
func ValidateIncrement(inc Increment) error {
	if inc.Take != nil {
		return ErrLimitsUnsupported(inc.Counter)
	}
	if inc.Bound != nil || inc.If != 0 {
		return ErrBoundsUnsupported(inc.Counter)
	}
	if inc.Sketch != nil {
		if inc.Member != "" || inc.Delta != 0 {
			return Errorf(EINVALID, "a sketch increment has no member and delta 0")
		}
		if _, err := sketch.Decode(inc.Sketch); err != nil {
			return Errorf(EINVALID, "%v: give a sketch as package sketch encodes it", err)
		}
	} else if inc.Member != "" {
		if inc.Delta != 1 && inc.Delta != -1 {
			return Errorf(EINVALID, "a member increment has delta 1 (add) or -1 (remove), not %d", inc.Delta)
		}
		if err := ValidateID("member", inc.Member); err != nil {
			return err
		}
	} else if inc.Delta == 0 {
		return Errorf(EINVALID, "delta is 0: give a non-zero amount")
	}
	return validateIncrementNames(inc)
}

// validateIncrementNames checks an increment's counter id, request id and
// Create spec: what every item, a take too, must have right.
func validateIncrementNames(inc Increment) error {
	if err := ValidateID("counter id", inc.Counter); err != nil {
		return err
	}
	if inc.RequestID != "" {
		if err := ValidateID("request id", inc.RequestID); err != nil {
			return err
		}
	}
	if inc.Create != nil {
		if err := ValidateSpec(*inc.Create); err != nil {
			return err
		}
	}
	return nil
}
