package shardcounter

import (
	"context"
	"encoding/json"
	"strings"
	"time"
)

// Limits and defaults of rankings.
const (
	// MaxRankingSize bounds the entries a ranking keeps: a top list is for
	// reading, and ten thousand is more than any page shows.
	MaxRankingSize = 10000
	// DefaultRankingSize is the size of a ranking that gives none.
	DefaultRankingSize = 100
	// DefaultMaxStaleness is the staleness bound of a ranking that gives
	// none: a top list a second old is what a page of "most liked" shows.
	DefaultMaxStaleness = Duration(time.Second)
	// MinMaxStaleness is the tightest staleness bound a ranking may ask
	// for: every refresh costs a read of the counters changed since the
	// last, so a bound far below a commit's latency buys nothing.
	MinMaxStaleness = Duration(10 * time.Millisecond)
	// MaxRankings bounds how many rankings one store holds: each is kept
	// in memory by every server and costs work on every commit.
	MaxRankings = 100
)

// RankingOptions describe a ranking to create; the zero value of a field
// takes its default. It is the body of PUT /v1/rankings/{name}.
type RankingOptions struct {
	// Prefix selects the counters ranked: those whose ids start with it.
	// Empty ranks every counter.
	Prefix string `json:"prefix"`
	// Last, when set, ranks counters by the sum of their window's buckets
	// over the trailing Last (as ReadWindow counts it) instead of by
	// value; only counters with a window whose bucket divides Last take
	// part. It is a whole number of minutes, the narrowest bucket.
	Last Duration `json:"last,omitempty"`
	// Size is how many entries the ranking keeps, 1 to MaxRankingSize;
	// 0 means DefaultRankingSize.
	Size int `json:"size,omitempty"`
	// MaxStaleness bounds how old a top list may be when it is read; 0
	// means DefaultMaxStaleness.
	MaxStaleness Duration `json:"max_staleness,omitempty"`
}

// Ranking is a ranking's definition as stored: its name, its options
// with every default filled in, and when it was created.
type Ranking struct {
	Name string `json:"name"`
	RankingOptions
	CreatedAt time.Time `json:"created_at"`
}

// Windowed reports whether the ranking orders counters by a window sum.
func (r *Ranking) Windowed() bool { return r.Last > 0 }

// SameOptions reports whether r was created with the options o asks for
// (defaults filled in): a create retried after a lost reply.
func (r *Ranking) SameOptions(o RankingOptions) bool {
	return r.RankingOptions == o
}

// Matches reports whether counter id belongs to the ranking.
func (r *Ranking) Matches(id string) bool { return strings.HasPrefix(id, r.Prefix) }

// RankingEntry is one counter of a top list.
type RankingEntry struct {
	ID    string `json:"id"`
	Value int64  `json:"value"`
}

// TopList is the answer of a ranking read: the first k entries, by value
// descending and then id ascending, as they were at AsOf. Every write
// acknowledged before AsOf is in it; MaxStaleness is the bound the
// ranking keeps between AsOf and the moment of the read.
type TopList struct {
	Ranking
	Entries []RankingEntry `json:"entries"`
	AsOf    time.Time      `json:"as_of"`
	// MaxStalenessMS is MaxStaleness in milliseconds, for clients that
	// do not parse durations.
	MaxStalenessMS int64 `json:"max_staleness_ms"`
	// Counters is how many counters take part in the ranking: those whose
	// id has the prefix (and, for a windowed ranking, a window that fits
	// Last).
	Counters int `json:"counters"`
	// Note says what a windowed ranking leaves out.
	Note string `json:"note,omitempty"`
}

// RankingService is the ranking API, beside CounterService: the engine
// implements it over a store that keeps definitions (RankingStore), and
// the HTTP client over the network.
type RankingService interface {
	// CreateRanking records a ranking and starts keeping it. It is
	// idempotent: when the name is taken by a ranking with the same
	// options it returns that one with created false; with other options
	// it returns ErrExists.
	CreateRanking(ctx context.Context, name string, opts RankingOptions) (r *Ranking, created bool, err error)
	// GetRanking returns a ranking's definition, or ErrNotFound.
	GetRanking(ctx context.Context, name string) (*Ranking, error)
	// ListRankings returns every ranking, by name.
	ListRankings(ctx context.Context) ([]*Ranking, error)
	// DeleteRanking removes a ranking (never its counters).
	DeleteRanking(ctx context.Context, name string) error
	// Top returns the first k entries of a ranking (k 0 means all it
	// keeps, k above its size is cut to it), no older than its
	// MaxStaleness.
	Top(ctx context.Context, name string, k int) (*TopList, error)
}

// RankingStore keeps ranking definitions durably, beside the counters:
// a small record per ranking in every store. It holds definitions only:
// the top lists are kept by the engine. It is part of every CounterStore,
// and every store passes storetest.RunRankingStore.
type RankingStore interface {
	// CreateRanking records r unless its name is taken, atomically. It
	// returns the ranking stored under the name afterwards — r when it
	// created it (created true), the earlier one otherwise.
	CreateRanking(ctx context.Context, r *Ranking) (stored *Ranking, created bool, err error)
	// GetRanking returns a ranking, or ErrNotFound.
	GetRanking(ctx context.Context, name string) (*Ranking, error)
	// ListRankings returns every ranking in byte order of name.
	ListRankings(ctx context.Context) ([]*Ranking, error)
	// DeleteRanking removes a ranking, or returns ErrNotFound.
	DeleteRanking(ctx context.Context, name string) error
}

// RankingNotFound is the error of a ranking that does not exist.
func RankingNotFound(name string) error {
	return Errorf(ENOTFOUND, "ranking %q not found: create it with PUT /v1/rankings/{name} or `shardcounter rank create`", name)
}

// WithDefaults returns o with every zero field set to its default.
func (o RankingOptions) WithDefaults() RankingOptions {
	if o.Size == 0 {
		o.Size = DefaultRankingSize
	}
	if o.MaxStaleness == 0 {
		o.MaxStaleness = DefaultMaxStaleness
	}
	return o
}

// ValidateRanking checks a ranking's name and options (defaults filled
// in or not), saying what to give instead.
func ValidateRanking(name string, o RankingOptions) error {
	if err := ValidateName("ranking name", name); err != nil {
		return err
	}
	if o.Prefix != "" {
		if err := ValidateName("ranking prefix", o.Prefix); err != nil {
			return err
		}
	}
	if o.Size < 0 || o.Size > MaxRankingSize {
		return Errorf(EINVALID, "ranking size %d is out of range: give 1 to %d (0 for %d)", o.Size, MaxRankingSize, DefaultRankingSize)
	}
	if o.Last < 0 || o.Last%Duration(BucketMinute) != 0 {
		return Errorf(EINVALID, "ranking last %s is not a whole number of minutes: give a multiple of the counters' bucket (1m, 1h or 1d)", time.Duration(o.Last))
	}
	if n := o.Last / Duration(BucketMinute); n > MaxWindowBuckets {
		return Errorf(EINVALID, "ranking last %s is longer than any window keeps: give at most %s", o.Last, Duration(MaxWindowBuckets)*Duration(BucketMinute))
	}
	if o.MaxStaleness != 0 && (o.MaxStaleness < MinMaxStaleness || o.MaxStaleness > Duration(time.Hour)) {
		return Errorf(EINVALID, "ranking max_staleness %s is out of range: give 10ms to 1h (default 1s)", time.Duration(o.MaxStaleness))
	}
	return nil
}

// CheckTopK checks the k of a top read: 0 (all the ranking keeps) to
// MaxRankingSize.
func CheckTopK(k int) error {
	if k < 0 || k > MaxRankingSize {
		return Errorf(EINVALID, "k %d is out of range: give 1 to %d (0 for the whole ranking)", k, MaxRankingSize)
	}
	return nil
}

// EncodeRanking returns the record a store keeps for r: its JSON, so that
// every store holds the same thing and an operator can read it.
func EncodeRanking(r *Ranking) []byte {
	b, _ := json.Marshal(r) // a Ranking always encodes
	return b
}

// DecodeRanking reads a record EncodeRanking wrote.
func DecodeRanking(b []byte) (*Ranking, error) {
	var r Ranking
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, Errorf(EINTERNAL, "ranking record %q cannot be read: %v", b, err)
	}
	return &r, nil
}
