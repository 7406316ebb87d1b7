package shardcounter

import (
	"time"
	"unicode/utf8"
)

// Limits of the domain, shared by every store and the API.
const (
	MinShards = 1
	MaxShards = 1024 // a read costs one shard each; past this use a rollup, not more shards
	MaxIDLen  = 256  // bytes of UTF-8, for counter ids, request ids and members
	// MaxReadBatch bounds the counters of one ReadCounters call: a
	// timeline reads dozens, a page of search results a few hundred.
	MaxReadBatch = 1000
	// DefaultListLimit is the page size of a listing of counters or
	// members that gives none.
	DefaultListLimit = 100
	// MaxListLimit bounds the page size of a listing of counters or
	// members.
	MaxListLimit = 1000
)

// Consistency says how fresh a Reading is.
type Consistency string

const (
	// Strong readings are linearizable: the value the counter held at
	// some moment between the call and the reply, so every write
	// acknowledged before the call is in it.
	Strong Consistency = "strong"
	// Cached readings come from a rollup value kept by the engine; they may
	// lag acknowledged writes by at most Reading.MaxStalenessMS.
	Cached Consistency = "cached"
)

// Kind says what a counter counts.
type Kind string

const (
	// KindSum counters add the deltas written to them: likes as +1/−1,
	// views, stock. The default.
	KindSum Kind = "sum"
	// KindDistinct counters count members, each once: a user's like is
	// added or removed, never counted twice, and "did I like this?" is a
	// membership check. Members are sharded by a hash of the member, so
	// one member's presence is decided on one shard.
	KindDistinct Kind = "distinct"
	// KindApprox counters count distinct members approximately, in fixed
	// memory: unique visitors, where keeping every member would cost more
	// than the count is worth. Each shard keeps a HyperLogLog sketch
	// (package sketch) of the members that hash to it (shard.ForMember, as
	// for distinct counters), and the value is the estimate of the union
	// of the shards' sketches, within sketch.StdError (0.81 %) of the
	// truth. Members can be added, not removed, and are not kept: an
	// approx counter cannot say whether it saw one.
	KindApprox Kind = "approx"
)

// Spec is what a counter is created with and keeps for its life (only
// Shards changes, by resharding).
type Spec struct {
	// Shards is the number of shards, 1 to MaxShards.
	Shards int `json:"shards"`
	// Kind is KindSum, KindDistinct or KindApprox; stores record "" as
	// KindSum.
	Kind Kind `json:"kind"`
	// Min and Max, when set, bound the counter's total: a write that
	// would take it outside is refused with ErrOutOfRange and changes
	// nothing. A new counter starts at 0, so Min ≤ 0 ≤ Max. Sum counters
	// only.
	Min *int64 `json:"min,omitempty"`
	Max *int64 `json:"max,omitempty"`
	// Window, when set, also counts writes in time buckets, so the sum
	// of the last hour or day can be read. Sum counters only.
	Window *Window `json:"window,omitempty"`
	// TTL, when set, gives a new counter a deadline TTL after its
	// creation (see Expirer). It is an option of the create, not part of
	// what the counter keeps: Equal ignores it, and stores never see it.
	TTL Duration `json:"ttl,omitempty"`
}

// Bounded reports whether the spec bounds the counter's total.
func (s Spec) Bounded() bool { return s.Min != nil || s.Max != nil }

// Equal reports whether two specs describe the same counter: what makes a
// retried create of an existing counter a success rather than a conflict.
func (s Spec) Equal(t Spec) bool {
	eq := func(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	return s.Shards == t.Shards && s.Kind.orSum() == t.Kind.orSum() &&
		eq(s.Min, t.Min) && eq(s.Max, t.Max) &&
		(s.Window == nil) == (t.Window == nil) && (s.Window == nil || *s.Window == *t.Window)
}

func (k Kind) orSum() Kind {
	if k == "" {
		return KindSum
	}
	return k
}

// Counter is a counter's metadata: its id, its spec and when it was made.
type Counter struct {
	ID string `json:"id"`
	Spec
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is the counter's deadline, when its name has one.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
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
	// Window is set on a windowed read: Value is then the sum of the
	// writes committed in [From, To), aligned to the counter's buckets.
	Window *Interval `json:"window,omitempty"`
}

// ReadResult is one counter of a batch read: its reading, or the error
// of that counter alone (ErrNotFound, say) while the others were read.
type ReadResult struct {
	Reading *Reading
	Err     error
}

// Write is one write to a counter as a client sends it.
//
// On a sum counter it adds Delta (which may be negative, never 0). On a
// distinct counter it adds Member (Present true) or removes it (Present
// false), and Delta is 0. A non-empty RequestID makes the write
// retry-safe: a second write with the same counter and request id is not
// applied and reports Duplicate.
type Write struct {
	Counter   string `json:"counter"`
	Delta     int64  `json:"delta,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	Member    string `json:"member,omitempty"`
	Present   *bool  `json:"present,omitempty"`
	// Kind, when set, is the kind of counter the write is meant for: on a
	// counter of another kind it fails (ErrInvalid: RESP's WRONGTYPE, so
	// that PFADD never adds to a set, nor SADD to a HyperLogLog), and a
	// counter it creates on write is of this kind. Unset, a delta write
	// creates a sum counter and a member write a distinct one. An approx
	// counter takes member adds only (present true).
	Kind Kind `json:"kind,omitempty"`
	// WantValue asks for the counter's value read after the write
	// committed, in WriteResult.Value (the RESP front end's INCR). Writes
	// that share one commit may share the value: it is never a unique
	// sequence number.
	WantValue bool `json:"-"`
	// JoinNext asks the engine's WriteBatch to commit this write in the
	// same batch as the next write of the call: a run of writes joined so
	// is never cut between two commits (a RESP transaction's writes). The
	// batch is then one store commit, atomic where the store's Apply is.
	JoinNext bool `json:"-"`
	// Expire, when set, makes the write a change of the deadline of the
	// name Counter (a counter's id or a hash's name) instead of an
	// increment, made in the same commit as the writes it is batched
	// with (package expiry). Delta, Member and RequestID are then unset.
	// WriteResult.Applied says whether the deadline changed: false, with
	// no error, when the name holds nothing or the condition was not met.
	// Only a service that keeps deadlines (shardcounter.Expirer) takes it.
	Expire *ExpireChange `json:"-"`
	// Take, when set, makes the write a take of a rate limit's key
	// (LimitTake): Counter is the key's state counter (LimitKeyID), and
	// WriteResult.Limit the decision. The engine's LimitService and the
	// RESP front end's CL.THROTTLE (engine.ThrottleKeyID) make such
	// writes; ValidateWrite checks them (validateTakeWrite).
	Take *LimitTake `json:"-"`
	// Bound, when set, makes a delta write conditional on the counter's
	// total (Bound: RESP's INCREX); WriteResult.AppliedDelta is what it
	// applied, and Value the total after it (as WantValue). The engine
	// commits it in a group of its own.
	Bound *Bound `json:"-"`
}

// AddMember returns the write that adds member to a distinct counter.
func AddMember(counter, member string) Write {
	t := true
	return Write{Counter: counter, Member: member, Present: &t}
}

// RemoveMember returns the write that removes member from a distinct
// counter.
func RemoveMember(counter, member string) Write {
	f := false
	return Write{Counter: counter, Member: member, Present: &f}
}

// WriteResult is the outcome of one Write. Applied is true when the write
// was committed (or, in async mode, accepted); Duplicate when its request
// id had been seen and it changed nothing. On a member write, Member
// echoes it and Changed says whether membership changed (an add of a
// present member or a removal of an absent one changes nothing). Error is
// set, in a batch of writes, on an item that failed on its own (its
// counter is missing, say) while the others applied.
type WriteResult struct {
	Counter   string `json:"counter"`
	Applied   bool   `json:"applied"`
	Duplicate bool   `json:"duplicate,omitempty"`
	Member    string `json:"member,omitempty"`
	Changed   *bool  `json:"changed,omitempty"`
	// Value is the counter's value after the commit, when Write.WantValue
	// asked for it.
	Value *int64 `json:"value,omitempty"`
	Error *Error `json:"error,omitempty"`
	// Limit is a take's decision (Write.Take).
	Limit *LimitResult `json:"-"`
	// AppliedDelta is a bounded write's applied delta (Write.Bound,
	// Outcome.Applied): 0 when it was skipped.
	AppliedDelta *int64 `json:"-"`
	// Removed is set on a removal of an idle key's state
	// (LimitTake.Remove) that removed it; one that kept it (not idle, or
	// gone) leaves it false.
	Removed bool `json:"-"`
}

// CreateOptions choose a new counter's spec. The shard count is Shards
// directly, or derived from the expected audience (FollowersCount and
// Visibility) by a ShardPolicy, as seed 003 does; when neither is set the
// service's default shard count applies. Kind, Min, Max and Window are as
// in Spec.
type CreateOptions struct {
	Shards         int     `json:"shards,omitempty"`
	FollowersCount *int64  `json:"followers_count,omitempty"`
	Visibility     string  `json:"visibility,omitempty"` // "public" or "protected"
	Kind           Kind    `json:"kind,omitempty"`
	Min            *int64  `json:"min,omitempty"`
	Max            *int64  `json:"max,omitempty"`
	Window         *Window `json:"window,omitempty"`
	// TTL gives the counter a deadline this long after its creation.
	TTL Duration `json:"ttl,omitempty"`
}

// ListOptions select a page of counters (or members) in byte order.
type ListOptions struct {
	Prefix string // only ids that start with Prefix (counters only)
	After  string // only ids greater than After; "" starts at the beginning
	Limit  int    // at most this many, up to MaxListLimit; 0 means DefaultListLimit
}

// CounterList is one page of counters. Next, when not empty, is the After
// value for the next page.
type CounterList struct {
	Counters []*Counter
	Next     string
}

// MemberList is one page of a distinct counter's members, in byte order.
// Next, when not empty, is the After value for the next page.
type MemberList struct {
	Members []string
	Next    string
}

// Placement is the seed's shard-to-machine map of one counter: each
// shard's value and the node that holds it.
type Placement struct {
	ID     string           `json:"id"`
	Shards int              `json:"shards"`
	AsOf   time.Time        `json:"as_of"`
	Places []ShardPlacement `json:"placement"`
}

// ShardPlacement is one shard of a Placement. Node names the machine that
// holds it: a Redis master's address, host:port/db for PostgreSQL, the
// file for bolt. Slot is the Redis Cluster hash slot, when there is one.
type ShardPlacement struct {
	Shard int    `json:"shard"`
	Value int64  `json:"value"`
	Node  string `json:"node"`
	Slot  *int   `json:"slot,omitempty"`
}

// CounterIDKind is the kind of name ValidateID checks as a counter id.
const CounterIDKind = "counter id"

// ValidateID checks a counter id, request id, member or other name, kind
// saying which in its error: what ValidateName accepts, and for kind
// CounterIDKind ("counter id") also the id of a hash's field or marker
// (HashFieldID, HashMarkerID), up to MaxCounterIDLen bytes. Stores check
// their ids so, and so hold the counters of hashes as they hold any
// other.
func ValidateID(kind, id string) error {
	if kind == CounterIDKind {
		return ValidateCounterID(kind, id)
	}
	return ValidateName(kind, id)
}

// ValidateName checks a name a user gives: 1–256 bytes of UTF-8 with no
// control characters (so never HashSeparator). Counter ids given as keys
// of the RESP front end, hash names, fields and members are names.
func ValidateName(kind, id string) error {
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

// ValidateSpec checks a counter's spec: the shard count, the kind, bounds
// that hold the starting value 0, and the window. It leaves Kind "" alone
// (it means KindSum).
func ValidateSpec(s Spec) error {
	if err := ValidateShards(s.Shards); err != nil {
		return err
	}
	switch s.Kind {
	case "", KindSum:
	case KindDistinct:
		if s.Bounded() || s.Window != nil {
			return Errorf(EINVALID, "a distinct counter takes no min, max or window: its value is its member count")
		}
	case KindApprox:
		if s.Bounded() || s.Window != nil {
			return Errorf(EINVALID, "an approx counter takes no min, max or window: its value is an estimate of its member count")
		}
	default:
		return Errorf(EINVALID, "kind %q is unknown: use sum, distinct or approx", s.Kind)
	}
	if s.Min != nil && *s.Min > 0 {
		return Errorf(EINVALID, "min %d is above 0, where a new counter starts: give min ≤ 0", *s.Min)
	}
	if s.Max != nil && *s.Max < 0 {
		return Errorf(EINVALID, "max %d is below 0, where a new counter starts: give max ≥ 0", *s.Max)
	}
	if s.TTL != 0 {
		if err := ValidateTTL(time.Duration(s.TTL)); err != nil {
			return err
		}
	}
	if s.Window != nil {
		return s.Window.Validate()
	}
	return nil
}

// ValidateWrite checks a write as a client sent it: a delta write has a
// non-zero Delta and no member; a member write has a Member, Present set
// and no Delta.
func ValidateWrite(w Write) error {
	if w.Expire != nil {
		return validateExpireWrite(w)
	}
	if w.Take != nil {
		return validateTakeWrite(w)
	}
	if err := ValidateID("counter id", w.Counter); err != nil {
		return err
	}
	if IsInternalID(w.Counter) {
		return Errorf(EINVALID, "counter id %q starts with U+001E, reserved for internal records: remove it", w.Counter)
	}
	switch {
	case w.Member != "" || w.Present != nil:
		if err := ValidateID("member", w.Member); err != nil {
			return err
		}
		if w.Bound != nil {
			return Errorf(EINVALID, "a member write takes no bounds: bounds are a delta's")
		}
		if w.Present == nil {
			return Errorf(EINVALID, "a member write needs present: true to add the member, false to remove it")
		}
		if w.Delta != 0 {
			return Errorf(EINVALID, "a member write takes no delta: give either delta or member and present")
		}
	case w.Bound != nil:
		if err := ValidateBound(*w.Bound); err != nil {
			return err
		}
	case w.Delta == 0:
		return Errorf(EINVALID, "delta is 0: give a non-zero amount")
	}
	switch w.Kind {
	case "", KindSum, KindDistinct:
	case KindApprox:
		if w.Present == nil || !*w.Present {
			return Errorf(EINVALID, "an approx counter takes member adds (present true): its members cannot be removed, and it takes no deltas")
		}
	default:
		return Errorf(EINVALID, "kind %q is unknown: use sum, distinct or approx", w.Kind)
	}
	if w.RequestID != "" {
		if err := ValidateID("request id", w.RequestID); err != nil {
			return err
		}
	}
	return nil
}

// CheckReadBatch refuses a batch read of more than MaxReadBatch counters
// with ErrTooLarge: the engine and every store draw the line in the same
// place, so that a caller that splits its reads at MaxReadBatch is never
// refused by one store and served by another.
func CheckReadBatch(n int) error {
	if n > MaxReadBatch {
		return Errorf(ETOOLARGE, "%d counter ids in one read: the limit is %d; split the read", n, MaxReadBatch)
	}
	return nil
}
