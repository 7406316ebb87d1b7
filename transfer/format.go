package transfer

import (
	"bufio"
	"encoding/json"
	"io"
	"time"

	"github.com/shardcounter/shardcounter"
)

// The export format, version 2 (docs/EXPORT.md): JSON Lines, one record a
// line, each a JSON object whose "type" says what it is. The first line
// is the header, the last the end record, so that a file cut short is
// told from a whole one.
const (
	// FormatName is the header's "format": what tells an export from any
	// other JSON Lines file.
	FormatName = "shardcounter-export"
	// Version is the format version this package writes and the newest it
	// reads. A reader refuses a newer one rather than guess at it, and
	// reads every older one: version 2 added deadlines (a counter's
	// expires_at) and rankings to version 1. Approx counters (kind
	// approx, with their sketches) came later within version 2: a
	// reader that predates them refuses such a line (an unknown field
	// and kind), so none can misread it, and exports without one are
	// unchanged.
	Version = 2
	// MembersPerLine is how many members of a distinct counter one members
	// line holds at most: lines stay small whatever a counter's size.
	MembersPerLine = 1000
	// MaxLineBytes bounds one line a Decoder reads, so that a file that is
	// not an export cannot make it hold gigabytes. The longest line this
	// package writes, a counter with MaxWindowBuckets buckets, is under
	// 1 MiB.
	MaxLineBytes = 8 << 20
)

// Record types.
const (
	TypeHeader  = "header"
	TypeCounter = "counter"
	TypeMembers = "members"
	TypeEnd     = "end"
	// TypeCollection and TypeDocument are a time-ordered collection and
	// one of its documents, after every counter.
	TypeCollection = "collection"
	TypeDocument   = "document"
	// TypeRanking is a ranking's definition, after every counter and
	// before the collections (version 2).
	TypeRanking = "ranking"
)

// Ranking is a ranking's definition: its name and options, defaults
// filled in. Its created_at is not exported, as a counter's is not.
type Ranking struct {
	Type string `json:"type"` // TypeRanking
	Name string `json:"name"`
	shardcounter.RankingOptions
}

// Collection is a time-ordered collection's options; its documents
// follow it.
type Collection struct {
	Type           string                `json:"type"` // TypeCollection
	Name           string                `json:"name"`
	Shards         int                   `json:"shards"`
	TimestampField string                `json:"timestamp_field"`
	Indexes        []string              `json:"indexes"`
	ShardKey       shardcounter.ShardKey `json:"shard_key"`
}

// Options returns the collection as a shardcounter.Collection without
// its CreatedAt.
func (c *Collection) Options() *shardcounter.Collection {
	return &shardcounter.Collection{Name: c.Name, Shards: c.Shards, TimestampField: c.TimestampField, Indexes: c.Indexes, ShardKey: c.ShardKey}
}

// Document is one document of the collection on the collection line
// before it, on the shard it was written to. Documents come shard by
// shard, each shard's in (timestamp, id) order.
type Document struct {
	Type       string         `json:"type"` // TypeDocument
	Collection string         `json:"collection"`
	ID         string         `json:"id"`
	Shard      int            `json:"shard"`
	Timestamp  time.Time      `json:"timestamp"`
	Data       map[string]any `json:"data"`
}

// Header is the first line of an export.
type Header struct {
	Type    string `json:"type"` // TypeHeader
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Prefix is the --prefix the export was taken with, "" for all.
	Prefix string `json:"prefix,omitempty"`
	// Unsorted says that counters come in any order and may come more
	// than once: a migration from a source that cannot list in order
	// (import-redis, from Redis's SCAN). A reader then skips the order
	// check; import is idempotent, so a repeat changes nothing.
	Unsorted bool `json:"unsorted,omitempty"`
}

// Counter is one counter: its spec, its value, and the non-zero buckets
// of its window that lie in its retention. A distinct counter's members
// follow on members lines. Hash fields are counters whose id holds
// shardcounter.HashSeparator (JSON writes it \u001f).
type Counter struct {
	Type   string               `json:"type"` // TypeCounter
	ID     string               `json:"id"`
	Kind   shardcounter.Kind    `json:"kind"`
	Shards int                  `json:"shards"`
	Min    *int64               `json:"min,omitempty"`
	Max    *int64               `json:"max,omitempty"`
	Window *shardcounter.Window `json:"window,omitempty"`
	Value  int64                `json:"value"`
	// Buckets are the window's non-zero buckets, oldest first. Value may
	// exceed their sum: writes older than the retention count in the
	// value and in no bucket.
	Buckets []shardcounter.Bucket `json:"buckets,omitempty"`
	// ExpiresAt is the deadline of the counter's name (version 2), UTC
	// to the millisecond; nil for none. It is absolute, not a time to
	// live: an import made later keeps the deadline the source had, and
	// two exports of the same state are equal whenever they are taken.
	// Every field of a hash carries the hash's deadline.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Sketches are an approx counter's shards' sketches, one per shard
	// in shard order, as package sketch encodes them (JSON writes them in
	// standard base64; "" for a shard with none); Value is the estimate
	// of their union. Only approx counters have them, and always.
	Sketches [][]byte `json:"sketches,omitempty"`
}

// Spec returns the counter's spec.
func (c *Counter) Spec() shardcounter.Spec {
	return shardcounter.Spec{Shards: c.Shards, Kind: c.Kind, Min: c.Min, Max: c.Max, Window: c.Window}
}

// Members is a run of a distinct counter's members, in byte order, after
// its counter line or another members line of the same counter.
type Members struct {
	Type    string   `json:"type"` // TypeMembers
	ID      string   `json:"id"`
	Members []string `json:"members"`
}

// End is the last line: the counts of what came before, which a reader
// checks.
type End struct {
	Type        string `json:"type"` // TypeEnd
	Counters    int64  `json:"counters"`
	Members     int64  `json:"members"`
	Collections int64  `json:"collections,omitempty"`
	Documents   int64  `json:"documents,omitempty"`
	Rankings    int64  `json:"rankings,omitempty"`
}

// Encoder writes an export. It is not safe for concurrent use.
type Encoder struct {
	w   *bufio.Writer
	end End
}

// NewEncoder writes the header of an export of the counters whose ids
// start with prefix to w and returns the Encoder of the rest.
func NewEncoder(w io.Writer, prefix string) (*Encoder, error) {
	return NewEncoderHeader(w, Header{Prefix: prefix})
}

// NewEncoderHeader writes h, with its type, format and version set, to w
// and returns the Encoder of the rest.
func NewEncoderHeader(w io.Writer, h Header) (*Encoder, error) {
	e := &Encoder{w: bufio.NewWriterSize(w, 64<<10), end: End{Type: TypeEnd}}
	h.Type, h.Format, h.Version = TypeHeader, FormatName, Version
	return e, e.line(h)
}

// Flush writes what the Encoder buffers, for a stream read while it is
// written.
func (e *Encoder) Flush() error { return e.w.Flush() }

func (e *Encoder) line(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	e.w.Write(b)
	return e.w.WriteByte('\n')
}

// Counter writes a counter line.
func (e *Encoder) Counter(c *Counter) error {
	c.Type = TypeCounter
	e.end.Counters++
	return e.line(c)
}

// Members writes members lines of at most MembersPerLine each.
func (e *Encoder) Members(id string, members []string) error {
	for len(members) > 0 {
		n := min(len(members), MembersPerLine)
		if err := e.line(Members{Type: TypeMembers, ID: id, Members: members[:n]}); err != nil {
			return err
		}
		e.end.Members += int64(n)
		members = members[n:]
	}
	return nil
}

// Ranking writes a ranking line.
func (e *Encoder) Ranking(r *Ranking) error {
	r.Type = TypeRanking
	e.end.Rankings++
	return e.line(r)
}

// Collection writes a collection line.
func (e *Encoder) Collection(c *Collection) error {
	c.Type = TypeCollection
	e.end.Collections++
	return e.line(c)
}

// Document writes a document line.
func (e *Encoder) Document(d *Document) error {
	d.Type = TypeDocument
	e.end.Documents++
	return e.line(d)
}

// Close writes the end line and flushes. Without it the export reads as
// cut short.
func (e *Encoder) Close() error {
	if err := e.line(e.end); err != nil {
		return err
	}
	return e.w.Flush()
}
