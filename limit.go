package shardcounter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Rate limits.
//
// A limit is a named policy over a space of keys (a user, a tenant, an
// address): each key may take up to the policy's quota. A take of a key
// is decided by package decide, in the group commit, on the store's
// clock: a key's state is an internal counter (LimitKeyID) whose shards
// hold it, so every store that decides through decide keeps limits in
// records it already has, and a definition is an internal counter too
// (LimitDefinitionID), whose id holds the policy.

// LimitKind is the algorithm of a limit.
type LimitKind string

const (
	// LimitFixed admits Limit a Period, in windows aligned to Unix time
	// multiples of the period (as envoyproxy/ratelimit's are): a key's
	// count starts again at each window's start.
	LimitFixed LimitKind = "fixed"
	// LimitSliding admits Limit over the trailing Period, counted in
	// buckets of Bucket: a take is admitted when the buckets of the last
	// Period (the current one included) hold at most Limit with it. It is
	// exact to the bucket: a bucket counts whole until it leaves.
	LimitSliding LimitKind = "sliding"
	// LimitGCRA is a token bucket (the generic cell rate algorithm, as
	// redis-cell runs it): Limit tokens a Period flow in, up to Burst at
	// once. A key is one record, its theoretical arrival time.
	LimitGCRA LimitKind = "gcra"
)

// Bounds of a limit's policy.
const (
	// MinLimitPeriod is the shortest period (and sliding bucket): a
	// window shorter than a second is shorter than the clock skew between
	// servers that PostgreSQL or Redis would otherwise have to agree on.
	MinLimitPeriod = Duration(time.Second)
	// MaxLimitPeriod is the longest period: a year.
	MaxLimitPeriod = Duration(366 * 24 * time.Hour)
	// MaxLimitQuota bounds Limit and Burst, so that every sum of costs a
	// key's state holds stays far inside int64.
	MaxLimitQuota = int64(1) << 40
	// MaxSlidingBuckets bounds a sliding window's buckets (Period over
	// Bucket): a take reads every bucket.
	MaxSlidingBuckets = 512
	// DefaultSlidingBuckets is how many buckets a sliding window that
	// gives no Bucket is cut into, at most (see LimitPolicy.WithDefaults).
	DefaultSlidingBuckets = 60
	// MaxLimitNameLen bounds a limit's name in bytes: the name and its
	// policy make up the id of the definition's record.
	MaxLimitNameLen = 128
)

// LimitPolicy is what a limit admits. It is the body of
// PUT /v1/limits/{name}.
type LimitPolicy struct {
	Kind LimitKind `json:"kind"`
	// Limit is the quota: the cost admitted a Period (a fixed or sliding
	// window), or the tokens that flow in a Period (gcra).
	Limit  int64    `json:"limit"`
	Period Duration `json:"period"`
	// Burst (gcra only) is how many tokens the bucket holds at most: the
	// cost admitted at once after a quiet spell. 0 means Limit.
	Burst int64 `json:"burst,omitempty"`
	// Bucket (sliding only) is the width of the buckets the trailing
	// period is counted in. 0 means the narrowest whole number of seconds
	// that divides Period into at most DefaultSlidingBuckets buckets.
	Bucket Duration `json:"bucket,omitempty"`
}

// WithDefaults returns p with Burst or Bucket set when its kind takes one
// and it gives none. p is valid or not as before.
func (p LimitPolicy) WithDefaults() LimitPolicy {
	switch p.Kind {
	case LimitGCRA:
		if p.Burst == 0 {
			p.Burst = p.Limit
		}
	case LimitSliding:
		if p.Bucket == 0 && p.Period > 0 && p.Period%Duration(time.Second) == 0 {
			secs := int64(p.Period / Duration(time.Second))
			for d := int64(1); d <= secs; d++ {
				if secs%d == 0 && secs/d <= DefaultSlidingBuckets {
					p.Bucket = Duration(d) * Duration(time.Second)
					break
				}
			}
		}
	}
	return p
}

// ValidateLimitPolicy checks a policy (its defaults filled in or not),
// saying what to give instead.
func ValidateLimitPolicy(p LimitPolicy) error {
	switch p.Kind {
	case LimitFixed, LimitSliding, LimitGCRA:
	default:
		return Errorf(EINVALID, "limit kind %q is unknown: use fixed, sliding or gcra", p.Kind)
	}
	if p.Limit < 1 || p.Limit > MaxLimitQuota {
		return Errorf(EINVALID, "limit %d is out of range: give 1 to %d", p.Limit, MaxLimitQuota)
	}
	if p.Period < MinLimitPeriod || p.Period > MaxLimitPeriod {
		return Errorf(EINVALID, "limit period %s is out of range: give 1s to 366d", time.Duration(p.Period))
	}
	if p.Period%Duration(time.Millisecond) != 0 {
		return Errorf(EINVALID, "limit period %s is not a whole number of milliseconds", time.Duration(p.Period))
	}
	if p.Burst != 0 && p.Kind != LimitGCRA {
		return Errorf(EINVALID, "a %s window takes no burst: burst is for gcra", p.Kind)
	}
	if p.Bucket != 0 && p.Kind != LimitSliding {
		return Errorf(EINVALID, "a %s limit takes no bucket: bucket is for sliding windows", p.Kind)
	}
	switch p.Kind {
	case LimitGCRA:
		if p.Burst < 0 || p.Burst > MaxLimitQuota {
			return Errorf(EINVALID, "burst %d is out of range: give 1 to %d (0 for the limit)", p.Burst, MaxLimitQuota)
		}
		t := int64(p.Period) / p.Limit
		if t < 1 {
			return Errorf(EINVALID, "limit %d a %s is more than one a nanosecond: give a longer period", p.Limit, p.Period)
		}
		if b := p.WithDefaults().Burst; b > maxRefill/t {
			return Errorf(EINVALID, "burst %d takes longer than 100 years to refill at %d a %s: give a smaller burst", b, p.Limit, p.Period)
		}
	case LimitSliding:
		b := p.WithDefaults().Bucket
		if b == 0 {
			return Errorf(EINVALID, "sliding period %s is not a whole number of seconds: give a bucket that divides it", time.Duration(p.Period))
		}
		if b < MinLimitPeriod || b%Duration(time.Millisecond) != 0 {
			return Errorf(EINVALID, "bucket %s is out of range: give a whole number of milliseconds, at least 1s", time.Duration(b))
		}
		if p.Period%b != 0 {
			return Errorf(EINVALID, "bucket %s does not divide the period %s: give one that does", b, p.Period)
		}
		if n := p.Period / b; n > MaxSlidingBuckets {
			return Errorf(EINVALID, "period %s is %d buckets of %s: the limit is %d; give a wider bucket", p.Period, n, b, MaxSlidingBuckets)
		}
	}
	return nil
}

// maxRefill bounds the time a gcra bucket takes to fill (burst over the
// rate), so that a key's times stay far inside int64 nanoseconds.
const maxRefill = int64(100 * 366 * 24 * time.Hour)

// StateShards is the shard count of a key's state counter (LimitKeyID):
// a fixed window's is the window and the cost taken in it; a sliding
// window's, each bucket's slot and the cost taken in it; gcra's, its
// theoretical arrival time. p has its defaults.
func (p LimitPolicy) StateShards() int {
	switch p.Kind {
	case LimitSliding:
		return 2 * int(p.Period/p.Bucket)
	case LimitGCRA:
		return 1
	default:
		return 2
	}
}

// Quota is the cost a key may take at once when its state is empty: the
// q of the RateLimit-Policy header. p has its defaults.
func (p LimitPolicy) Quota() int64 {
	if p.Kind == LimitGCRA {
		return p.Burst
	}
	return p.Limit
}

// String writes p as ParseLimitPolicy reads it, defaults filled in:
// "fixed 300/10s", "sliding 300/10s bucket 1s", "gcra 10/1s burst 20".
func (p LimitPolicy) String() string {
	p = p.WithDefaults()
	s := fmt.Sprintf("%s %d/%s", p.Kind, p.Limit, p.Period)
	switch p.Kind {
	case LimitSliding:
		s += " bucket " + p.Bucket.String()
	case LimitGCRA:
		s += " burst " + strconv.FormatInt(p.Burst, 10)
	}
	return s
}

// ParseLimitPolicy reads a policy as String writes it (the CLI's and the
// definition record's form): KIND LIMIT/PERIOD, then "bucket DURATION"
// for a sliding window or "burst N" for gcra, each optional. It returns
// the policy with its defaults, valid, or ErrInvalid.
func ParseLimitPolicy(s string) (LimitPolicy, error) {
	var p LimitPolicy
	f := strings.Fields(s)
	if len(f) != 2 && len(f) != 4 {
		return p, Errorf(EINVALID, "limit policy %q is not KIND LIMIT/PERIOD [bucket D | burst N]: write fixed 300/10s", s)
	}
	p.Kind = LimitKind(f[0])
	n, per, ok := strings.Cut(f[1], "/")
	if !ok {
		return p, Errorf(EINVALID, "limit policy %q has no LIMIT/PERIOD: write fixed 300/10s", s)
	}
	var err error
	if p.Limit, err = strconv.ParseInt(n, 10, 64); err != nil {
		return p, Errorf(EINVALID, "limit %q is not a whole number: write fixed 300/10s", n)
	}
	if p.Period, err = ParseDuration(per); err != nil {
		return p, err
	}
	if len(f) == 4 {
		switch f[2] {
		case "bucket":
			if p.Bucket, err = ParseDuration(f[3]); err != nil {
				return p, err
			}
		case "burst":
			if p.Burst, err = strconv.ParseInt(f[3], 10, 64); err != nil || p.Burst < 1 {
				return p, Errorf(EINVALID, "burst %q is not a whole number from 1: write gcra 10/1s burst 20", f[3])
			}
		default:
			return p, Errorf(EINVALID, "limit policy %q: %q is neither bucket nor burst", s, f[2])
		}
	}
	if err := ValidateLimitPolicy(p); err != nil {
		return p, err
	}
	return p.WithDefaults(), nil
}

// Limit is a limit's definition as stored: its name, its policy with its
// defaults, and when it was defined.
type Limit struct {
	Name string `json:"name"`
	LimitPolicy
	CreatedAt time.Time `json:"created_at"`
}

// LimitResult is the decision of a take, or what a peek finds.
type LimitResult struct {
	// Allowed: the cost was taken (or, for a peek, would be).
	Allowed bool `json:"allowed"`
	// Remaining is the cost the key may still take now (after this take
	// when it was allowed).
	Remaining int64 `json:"remaining"`
	// ResetAfterMS is how long until the key's state is empty again (its
	// whole quota available), in milliseconds rounded up.
	ResetAfterMS int64 `json:"reset_after_ms"`
	// RetryAfterMS, on a refused take, is how long until the same take
	// would be allowed, in milliseconds rounded up; -1 when it never
	// would (its cost is above the quota). 0 on an allowed one.
	RetryAfterMS int64 `json:"retry_after_ms"`
	// Duplicate: the take's request id was recorded before, and Allowed
	// is the decision recorded then; nothing was taken now. Remaining and
	// the times are the key's state now.
	Duplicate bool `json:"duplicate,omitempty"`
	// Policy is the policy the take was decided under, when the service
	// says it (the engine does): the HTTP server writes its
	// RateLimit-Policy header from it. It is not part of the JSON answer.
	Policy LimitPolicy `json:"-"`
}

// LimitTake, on an Increment (Increment.Take), makes it a take of Cost
// from a key of a limit of Policy (a Peek takes nothing): the increment's
// Counter is the key's state counter, LimitKeyID, and its request id,
// when given, is recorded with the decision. Package decide decides it;
// a store that decides without package decide refuses it
// (ErrLimitsUnsupported).
type LimitTake struct {
	Policy LimitPolicy // with its defaults
	Cost   int64
	Peek   bool
	// Remove makes the item not a take but the removal of the key's
	// state counter if it is idle at the commit's time (a take would see
	// a fresh key: ValidateRemoveIncrement gives its shape). The store
	// decides it from the state it reads in the same atomic step as any
	// take of the key (package decide), so a take committed before it
	// keeps the state and one after it sees a fresh key: none is lost. A
	// kept state's outcome is Skipped. A store that does not decide it
	// refuses it (ErrRemoveUnsupported).
	Remove bool
}

// ValidateTake checks a take's cost as a client sends it: at least 1. A
// cost above the quota is valid, and refused whenever it is taken.
func ValidateTake(cost int64) error {
	if cost < 1 {
		return Errorf(EINVALID, "cost %d is not positive: give 1 or more", cost)
	}
	return nil
}

// ValidateLimitName checks a limit's name: a name of at most
// MaxLimitNameLen bytes.
func ValidateLimitName(name string) error {
	if err := ValidateName("limit name", name); err != nil {
		return err
	}
	if len(name) > MaxLimitNameLen {
		return Errorf(EINVALID, "limit name is %d bytes long: the limit is %d", len(name), MaxLimitNameLen)
	}
	return nil
}

// ValidateTakeIncrement checks an increment with Take as a store that
// decides takes (package decide) receives it. It refuses a removal
// (LimitTake.Remove, ErrRemoveUnsupported): a store that decides those
// checks them with ValidateRemoveIncrement first, so that one that takes
// through a rule of its own and does not remove refuses them clearly.
func ValidateTakeIncrement(inc Increment) error {
	if err := validateIncrementNames(inc); err != nil {
		return err
	}
	if inc.Take.Remove {
		return ErrRemoveUnsupported(inc.Counter)
	}
	if inc.Delta != 0 || inc.Member != "" || inc.Sketch != nil {
		return Errorf(EINVALID, "a take has no delta, member or sketch")
	}
	if err := ValidateLimitPolicy(inc.Take.Policy); err != nil {
		return err
	}
	if inc.Take.Policy != inc.Take.Policy.WithDefaults() {
		return Errorf(EINVALID, "a take's policy has its defaults filled in (LimitPolicy.WithDefaults)")
	}
	return ValidateTake(inc.Take.Cost)
}

// ValidateRemoveIncrement checks a removal of an idle key's state
// (LimitTake.Remove) as a store that decides them receives it: a state
// counter (IsLimitKeyID) under a policy with its defaults, cost 0, and no
// peek, delta, member, sketch, request id, Create, bound or total: a
// removal creates nothing and records nothing.
func ValidateRemoveIncrement(inc Increment) error {
	if err := validateIncrementNames(inc); err != nil {
		return err
	}
	if !IsLimitKeyID(inc.Counter) {
		return Errorf(EINVALID, "a removal's counter is a limit key's state (LimitKeyID)")
	}
	if inc.Delta != 0 || inc.Member != "" || inc.Sketch != nil || inc.RequestID != "" || inc.Create != nil || inc.Bound != nil || inc.Total {
		return Errorf(EINVALID, "a removal of an idle limit state has no delta, member, sketch, request id, create, bound or total")
	}
	if inc.Take.Cost != 0 || inc.Take.Peek {
		return Errorf(EINVALID, "a removal of an idle limit state has cost 0 and is no peek")
	}
	if err := ValidateLimitPolicy(inc.Take.Policy); err != nil {
		return err
	}
	if inc.Take.Policy != inc.Take.Policy.WithDefaults() {
		return Errorf(EINVALID, "a removal's policy has its defaults filled in (LimitPolicy.WithDefaults)")
	}
	return nil
}

// validateTakeWrite checks a write with Take, as ValidateWrite receives
// it from the engine's callers that take under a policy of their own (the
// RESP front end's CL.THROTTLE): the counter is a key's state
// (IsLimitKeyID), and the write holds nothing but the take and a request
// id.
func validateTakeWrite(w Write) error {
	if !IsLimitKeyID(w.Counter) {
		return Errorf(EINVALID, "a take's counter is a limit key's state (LimitKeyID)")
	}
	if w.Delta != 0 || w.Member != "" || w.Present != nil || w.Kind != "" || w.WantValue {
		return Errorf(EINVALID, "a take has no delta, member, kind or value wanted")
	}
	if w.Take.Remove {
		return ValidateRemoveIncrement(Increment{Counter: w.Counter, RequestID: w.RequestID, Take: w.Take})
	}
	if w.RequestID != "" {
		if err := ValidateID("request id", w.RequestID); err != nil {
			return err
		}
	}
	return ValidateTakeIncrement(Increment{Counter: w.Counter, RequestID: w.RequestID, Take: w.Take})
}

// limitsUnsupported starts the message of ErrLimitsUnsupported's errors.
const limitsUnsupported = "this store does not decide takes of rate limits"

// ErrLimitsUnsupported is the error of a take (Increment.Take) on a store
// that does not decide through package decide: ValidateIncrement, which
// every store calls, refuses it. IsLimitsUnsupported recognizes it.
func ErrLimitsUnsupported(counter string) error {
	return Errorf(EINVALID, "%s (counter %q): keep limits on Pebble, bolt, PostgreSQL, Redis, Firestore or Datastore", limitsUnsupported, counter)
}

// IsLimitsUnsupported reports whether err is ErrLimitsUnsupported's.
func IsLimitsUnsupported(err error) bool {
	var e *Error
	return errors.As(err, &e) && strings.HasPrefix(e.Message, limitsUnsupported)
}

// removeUnsupported starts the message of ErrRemoveUnsupported's errors.
const removeUnsupported = "this store does not remove idle limit states"

// ErrRemoveUnsupported is the error of a removal of an idle key's state
// (LimitTake.Remove) on a store that does not decide it: the engine's
// sweeper stops sending them there (IsRemoveUnsupported), and the states
// stay.
func ErrRemoveUnsupported(counter string) error {
	return Errorf(EINVALID, "%s (counter %q): the states stay; Pebble, bolt, PostgreSQL, Redis, Firestore and Datastore remove them", removeUnsupported, counter)
}

// IsRemoveUnsupported reports whether err is ErrRemoveUnsupported's.
func IsRemoveUnsupported(err error) bool {
	var e *Error
	return errors.As(err, &e) && strings.HasPrefix(e.Message, removeUnsupported)
}

// RefusedRequestID is the request id recorded for a refused take with
// request id id: beside id, which records an allowed one, so that a retry
// finds the decision first made. No request id a client gives starts with
// U+001E.
func RefusedRequestID(id string) string { return InternalPrefix + id }

// Internal ids of limits: a definition's record is
// InternalPrefix "m" hash(name) policy ";" name, and a key's state
// InternalPrefix "l" hash(name) hash(policy) key, so that a limit's keys
// and its definition are each a prefix apart, and a policy changed
// starts every key afresh.
const (
	tagLimitDef = "m"
	tagLimitKey = "l"
)

func nameHash(name string) string {
	h := sha256.Sum256([]byte(name))
	return hex.EncodeToString(h[:8])
}

func policyHash(p LimitPolicy) string {
	h := sha256.Sum256([]byte(p.String()))
	return hex.EncodeToString(h[:4])
}

// LimitDefinitionPrefix is the prefix of every limit definition's id, and
// with a name, of that limit's.
func LimitDefinitionPrefix(name string) string {
	if name == "" {
		return InternalPrefix + tagLimitDef
	}
	return InternalPrefix + tagLimitDef + nameHash(name)
}

// LimitDefinitionID is the id of the counter that records limit name's
// definition as p: it holds nothing, its id is the definition, and its
// creation time the definition's.
func LimitDefinitionID(name string, p LimitPolicy) string {
	return LimitDefinitionPrefix(name) + p.String() + ";" + name
}

// ParseLimitDefinitionID reads a LimitDefinitionID.
func ParseLimitDefinitionID(id string) (string, LimitPolicy, bool) {
	rest, ok := strings.CutPrefix(id, LimitDefinitionPrefix(""))
	if !ok || len(rest) < 16 {
		return "", LimitPolicy{}, false
	}
	ps, name, ok := strings.Cut(rest[16:], ";")
	if !ok || rest[:16] != nameHash(name) {
		return "", LimitPolicy{}, false
	}
	p, err := ParseLimitPolicy(ps)
	return name, p, err == nil
}

// LimitKeysPrefix is the prefix of the state counters of limit name's
// keys, under every policy it has had.
func LimitKeysPrefix(name string) string { return InternalPrefix + tagLimitKey + nameHash(name) }

// IsLimitKeyID reports whether id is a key's state counter (LimitKeyID):
// a store whose views do not read shard values reads these.
func IsLimitKeyID(id string) bool { return strings.HasPrefix(id, InternalPrefix+tagLimitKey) }

// LimitKeyID is the id of the counter that holds key's state under limit
// name of policy p.
func LimitKeyID(name string, p LimitPolicy, key string) string {
	return LimitKeysPrefix(name) + policyHash(p) + key
}

// LimitNotFound is the error of a limit that does not exist.
func LimitNotFound(name string) error {
	return Errorf(ENOTFOUND, "limit %q not found: define it with PUT /v1/limits/{name} or `shardcounter limit create`", name)
}

// LimitService is the rate-limit API, beside CounterService: the engine
// implements it over any store that decides takes, and the HTTP client
// over the network. Keys are names (ValidateName).
type LimitService interface {
	// CreateLimit defines limit name. It is idempotent: a name defined
	// with the same policy returns that definition with created false; a
	// name defined with another policy is redefined (every key starts
	// afresh), created true.
	CreateLimit(ctx context.Context, name string, p LimitPolicy) (l *Limit, created bool, err error)
	// GetLimit returns a limit's definition, or ErrNotFound.
	GetLimit(ctx context.Context, name string) (*Limit, error)
	// ListLimits returns every limit, by name.
	ListLimits(ctx context.Context) ([]*Limit, error)
	// DeleteLimit removes a limit and its keys' state, or returns
	// ErrNotFound.
	DeleteLimit(ctx context.Context, name string) error
	// Take takes cost (≥ 1) from key: the decision, allowed or not, is
	// committed before it is returned. With a request id, a retry returns
	// the decision first recorded and takes nothing more.
	Take(ctx context.Context, name, key string, cost int64, requestID string) (*LimitResult, error)
	// Peek answers what Take of cost would, and takes nothing.
	Peek(ctx context.Context, name, key string, cost int64) (*LimitResult, error)
	// ResetLimitKey empties key's state: its whole quota is available.
	ResetLimitKey(ctx context.Context, name, key string) error
}
