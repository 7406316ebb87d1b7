package shardcounter

import (
	"context"
	"time"
	"unicode/utf8"
)

// Limits of the domain, shared by every store and the API.
const (
	MinShards = 1
	MaxShards = 1024 // a read costs one shard each; past this use a rollup, not more shards
	MaxIDLen  = 256  // bytes of UTF-8, for counter ids and request ids
)

// Consistency says how fresh a Reading is.
type Consistency string

const (
	// Strong readings are taken after every acknowledged write: the exact
	// sum of the shards in one consistent snapshot.
	Strong Consistency = "strong"
	// Cached readings come from a rollup value kept by the engine; they may
	// lag acknowledged writes by at most Reading.MaxStalenessMS.
	Cached Consistency = "cached"
)

// Counter is a counter's metadata: its id and how many shards it has.
type Counter struct {
	ID        string    `json:"id"`
	Shards    int       `json:"shards"`
	CreatedAt time.Time `json:"created_at"`
}

// Reading is the value of a counter at a point in time.
type Reading struct {
	ID          string      `json:"id"`
	Value       int64       `json:"value"`
	Shards      int         `json:"shards"`
	Consistency Consistency `json:"consistency"`
	AsOf        time.Time   `json:"as_of"`
	// MaxStalenessMS bounds how far a cached reading may lag behind AsOf's
	// acknowledged writes; it is omitted on strong readings.
	MaxStalenessMS int64 `json:"max_staleness_ms,omitempty"`
}

// Write is one write to a counter as a client sends it: add Delta (which
// may be negative, never 0) to the counter. A non-empty RequestID makes the
// write retry-safe: a second write with the same counter and request id is
// not applied and reports Duplicate.
type Write struct {
	Counter   string `json:"counter"`
	Delta     int64  `json:"delta"`
	RequestID string `json:"request_id,omitempty"`
}

// WriteResult is the outcome of one Write. Applied is true when the write
// changed the counter; Duplicate when its request id had been seen and it
// changed nothing. Error is set, in a batch of writes, on an item that
// failed on its own (its counter is missing, say) while the others applied.
type WriteResult struct {
	Counter   string `json:"counter"`
	Applied   bool   `json:"applied"`
	Duplicate bool   `json:"duplicate,omitempty"`
	Error     *Error `json:"error,omitempty"`
}

// CreateOptions choose a new counter's shard count: either Shards
// directly, or the expected audience (FollowersCount and Visibility) from
// which a ShardPolicy derives it, as seed 003 does. When none is set the
// service's default shard count applies.
type CreateOptions struct {
	Shards         int    `json:"shards,omitempty"`
	FollowersCount *int64 `json:"followers_count,omitempty"`
	Visibility     string `json:"visibility,omitempty"` // "public" or "protected"
}

// ListOptions select a page of counters in id order.
type ListOptions struct {
	Prefix string // only ids that start with Prefix
	After  string // only ids greater than After; "" starts at the beginning
	Limit  int    // at most this many; 0 means the service's default
}

// CounterList is one page of counters. Next, when not empty, is the After
// value for the next page.
type CounterList struct {
	Counters []*Counter
	Next     string
}

// CounterService is the counter API: the seed service's createCounter,
// writeCounter and readCounter, plus resharding, deletion, listing and
// batches. The engine implements it over a CounterStore, and the HTTP
// client implements it over the network, so the CLI, tests and Go users
// share one API. Implementations are safe for concurrent use.
//
// Every method returns *Error values: EINVALID for bad arguments,
// ENOTFOUND, EEXISTS, EOUTOFRANGE, EUNAVAILABLE when the store cannot be
// reached (nothing was applied), EINTERNAL otherwise.
type CounterService interface {
	// CreateCounter makes a counter whose shards all start at 0.
	CreateCounter(ctx context.Context, id string, opts CreateOptions) (*Counter, error)
	// ReadCounter returns the counter's value with the given consistency
	// ("" means Strong).
	ReadCounter(ctx context.Context, id string, c Consistency) (*Reading, error)
	// WriteCounter adds w.Delta to w.Counter. A counter that does not exist
	// is created with the default shard count when the service allows it.
	WriteCounter(ctx context.Context, w Write) (*WriteResult, error)
	// WriteBatch validates every write first (an invalid one fails the
	// whole call, nothing applied), then applies them and returns one result
	// per write, in order.
	WriteBatch(ctx context.Context, ws []Write) ([]WriteResult, error)
	// ReshardCounter changes the shard count and keeps the value exactly.
	ReshardCounter(ctx context.Context, id string, shards int) (*Counter, error)
	// DeleteCounter removes the counter, its shards and its request ids.
	DeleteCounter(ctx context.Context, id string) error
	// ListCounters returns a page of counters in id order.
	ListCounters(ctx context.Context, opts ListOptions) (*CounterList, error)
}

// Increment is one shard delta as a store applies it. The store adds Delta
// to shard Pick mod n, where n is the counter's shard count at the moment
// the increment is applied, so a concurrent reshard can never strand it on
// a shard that no longer exists. Callers choose Pick uniformly at random
// (the seed's random shard). For an increment with a RequestID the pick is
// PickFor(Counter, RequestID), so every retry lands on the same shard: the
// engine sets it so, and a store that keeps request ids beside their shard
// (Redis Cluster) may ignore Pick and derive it itself.
type Increment struct {
	Counter   string
	Delta     int64
	Pick      uint64
	RequestID string // optional; recorded atomically with the delta
}

// Outcome is a store's result for one Increment. Err nil and Duplicate
// false means applied.
type Outcome struct {
	Duplicate bool  // the (counter, request id) was recorded before; nothing applied
	Err       error // this item was not applied (unless IsOutcomeUnknown(Err))
}

// CounterStore is where counters live: metadata and shard values. It holds
// storage only; coalescing, idempotency policy, rollups and the shard-count
// policy live in the engine. Every store passes the storetest suite.
// Implementations are safe for concurrent use, also by several processes
// sharing one database.
type CounterStore interface {
	// CreateCounter records a counter with shards zero-valued shards.
	// It returns ErrExists when the id is taken.
	CreateCounter(ctx context.Context, id string, shards int) (*Counter, error)
	// GetCounter returns the counter's metadata, or ErrNotFound.
	GetCounter(ctx context.Context, id string) (*Counter, error)
	// ListCounters returns up to limit counters whose ids start with prefix
	// and sort after after, in byte order of id.
	ListCounters(ctx context.Context, prefix, after string, limit int) ([]*Counter, error)
	// DeleteCounter removes the counter, its shards and its request ids, or
	// returns ErrNotFound.
	DeleteCounter(ctx context.Context, id string) error

	// ReadCounter returns the exact sum of the counter's shards taken in one
	// consistent snapshot, as a Strong reading. When the sum does not fit in
	// int64 it returns ErrOutOfRange, never a wrapped value.
	ReadCounter(ctx context.Context, id string) (*Reading, error)
	// ReadShards returns the counter and each shard's value, in shard
	// order, from one consistent snapshot (for tests, debugging and admin).
	ReadShards(ctx context.Context, id string) (*Counter, []int64, error)

	// Add is the seed algorithm: one store write that adds delta to shard
	// pick mod n of the counter. It is the baseline of every benchmark and
	// the path with the least work per call. It returns ErrNotFound for an
	// unknown counter and ErrOutOfRange when the shard would leave int64.
	Add(ctx context.Context, id string, delta int64, pick uint64) error

	// Apply applies a batch of increments and returns one Outcome per item,
	// in order. Items whose Outcome.Err is nil are applied together in one
	// atomic commit where the store can (one transaction); a store that can
	// only commit part of a batch atomically (Redis Cluster: per slot)
	// reports each item's own result, never a silent partial batch. Items
	// on one counter apply in batch order.
	//
	// An item fails on its own with ErrNotFound (no such counter) or
	// ErrOutOfRange (its shard would leave int64). An item whose
	// (counter, request id) was recorded before, or earlier in the same
	// batch, is a Duplicate and changes nothing.
	//
	// A non-nil error means the whole batch failed: nothing was applied,
	// unless IsOutcomeUnknown(err), when all of it may have been.
	Apply(ctx context.Context, incs []Increment) ([]Outcome, error)

	// ReshardCounter changes the counter's shard count to shards, keeping
	// its value exactly while writes go on. Shrinking folds each removed
	// shard i into shard i mod shards in one atomic step; growing adds
	// zero-valued shards.
	ReshardCounter(ctx context.Context, id string, shards int) (*Counter, error)

	// Ping checks that the store answers.
	Ping(ctx context.Context) error
	// Close releases the store's resources.
	Close() error
}

// RequestIDExpirer is implemented by a CounterStore that forgets request
// ids once they are older than a dedupe window, so that the ids of a busy
// store do not grow without bound. Within the window a request id is
// applied at most once; past it, the id may be recorded afresh. Stores
// expire ids as a side effect of writes, in work proportional to them,
// and do nothing while idle. The engine calls SetDedupeWindow once, before
// its first write; a store's own default applies until then.
type RequestIDExpirer interface {
	SetDedupeWindow(d time.Duration)
}

// ValidateID checks a counter id or request id: 1–256 bytes of UTF-8 with
// no control characters.
func ValidateID(kind, id string) error {
	switch {
	case id == "":
		return Errorf(EINVALID, "%s is empty: give 1 to %d bytes of UTF-8", kind, MaxIDLen)
	case len(id) > MaxIDLen:
		return Errorf(EINVALID, "%s is %d bytes long: the limit is %d", kind, len(id), MaxIDLen)
	case !utf8.ValidString(id):
		return Errorf(EINVALID, "%s is not valid UTF-8", kind)
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return Errorf(EINVALID, "%s contains control character %U: remove it", kind, r)
		}
	}
	return nil
}

// ValidateShards checks a shard count.
func ValidateShards(n int) error {
	if n < MinShards || n > MaxShards {
		return Errorf(EINVALID, "shard count %d is out of range: give %d to %d", n, MinShards, MaxShards)
	}
	return nil
}

// ValidateWrite checks a write as a client sent it.
func ValidateWrite(w Write) error {
	if err := ValidateID("counter id", w.Counter); err != nil {
		return err
	}
	if w.Delta == 0 {
		return Errorf(EINVALID, "delta is 0: give a non-zero amount")
	}
	if w.RequestID != "" {
		if err := ValidateID("request id", w.RequestID); err != nil {
			return err
		}
	}
	return nil
}

// ValidateIncrement checks an increment as a store receives it; every
// store refuses, as an item of its own, what this refuses.
func ValidateIncrement(inc Increment) error {
	return ValidateWrite(Write{Counter: inc.Counter, Delta: inc.Delta, RequestID: inc.RequestID})
}
