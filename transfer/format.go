package transfer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/sketch"
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

// LineError is a line of an export that cannot be read: malformed,
// out of order, or missing at the end. Line counts from 1.
type LineError struct {
	Line int
	Msg  string
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// Record is one line of an export as a Decoder reads it: exactly one of
// its fields is set.
type Record struct {
	Line       int
	Counter    *Counter
	Members    *Members
	Collection *Collection
	Document   *Document
	Ranking    *Ranking
	End        *End
}

// Decoder reads an export line by line and checks it: the header first,
// counters in strictly increasing id order, members only after their
// distinct counter, the end line last with the right counts. It is not
// safe for concurrent use.
type Decoder struct {
	r      *bufio.Reader
	line   int
	Header Header
	last   *Counter    // the latest counter line
	coll   *Collection // the latest collection line
	rank   *Ranking    // the latest ranking line
	seen   End
	done   bool
}

// NewDecoder reads and checks the header.
func NewDecoder(r io.Reader) (*Decoder, error) {
	d := &Decoder{r: bufio.NewReaderSize(r, 64<<10)}
	b, err := d.readLine()
	if err == io.EOF {
		return nil, &LineError{1, "the input is empty: give a file that shardcounter export wrote"}
	}
	if err != nil {
		return nil, err
	}
	if err := strict(b, &d.Header); err != nil || d.Header.Type != TypeHeader || d.Header.Format != FormatName {
		return nil, &LineError{1, fmt.Sprintf("not a header {\"type\":\"header\",\"format\":%q,...}: this is not a shardcounter export", FormatName)}
	}
	if d.Header.Version < 1 || d.Header.Version > Version {
		return nil, &LineError{1, fmt.Sprintf("export format version %d: this shardcounter reads versions 1 to %d; use a shardcounter as new as the one that exported", d.Header.Version, Version)}
	}
	return d, nil
}

// readLine returns the next line without its newline, io.EOF at the end,
// and a LineError for a line cut short (no newline: every line the
// Encoder writes ends in one) or too long.
func (d *Decoder) readLine() ([]byte, error) {
	var buf []byte
	for {
		part, err := d.r.ReadSlice('\n')
		buf = append(buf, part...)
		if len(buf) > MaxLineBytes {
			return nil, &LineError{d.line + 1, fmt.Sprintf("longer than %d bytes: this is not a shardcounter export", MaxLineBytes)}
		}
		switch {
		case err == nil:
			d.line++
			return buf[:len(buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(buf) == 0:
			return nil, io.EOF
		case err == io.EOF:
			return nil, &LineError{d.line + 1, "cut short (no newline at its end): the export is truncated; export again"}
		default:
			return nil, err
		}
	}
}

// strict decodes one JSON object into v, refusing unknown fields and
// anything after the object.
func strict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

// Next returns the next record, io.EOF after the end line, or a
// *LineError naming the line that is wrong.
func (d *Decoder) Next() (*Record, error) {
	if d.done {
		return nil, io.EOF
	}
	b, err := d.readLine()
	if err == io.EOF {
		return nil, &LineError{d.line + 1, fmt.Sprintf("the export ends after line %d without its end line: it is truncated; export again", d.line)}
	}
	if err != nil {
		return nil, err
	}
	if rec, ok, err := d.quick(b); err != nil {
		return nil, err
	} else if ok {
		return rec, nil
	}
	var probe struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, d.errorf("not a JSON object: %v", err)
	}
	rec := &Record{Line: d.line}
	switch probe.Type {
	case TypeCounter:
		rec.Counter = &Counter{}
		err = d.counter(b, rec.Counter)
	case TypeMembers:
		rec.Members = &Members{}
		err = d.members(b, rec.Members)
	case TypeCollection:
		rec.Collection = &Collection{}
		err = d.collection(b, rec.Collection)
	case TypeDocument:
		rec.Document = &Document{}
		err = d.document(b, rec.Document)
	case TypeRanking:
		rec.Ranking = &Ranking{}
		err = d.ranking(b, rec.Ranking)
	case TypeEnd:
		rec.End = &End{}
		err = d.end(b, rec.End)
	case TypeHeader:
		err = d.errorf("a second header: two exports were joined; import them one at a time")
	default:
		err = d.errorf("record type %q is unknown: version %d has header, counter, members, ranking, collection, document and end", probe.Type, Version)
	}
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// quick decodes a counter or members line as the encoder writes it, its
// type first, in one pass: the lines that make up nearly all of an
// export. ok false sends the line to the general path, which reads its
// type first and so words the errors of a malformed line; a line that
// decodes here and fails a check is the same error on either path.
func (d *Decoder) quick(b []byte) (rec *Record, ok bool, err error) {
	const p = `{"type":"`
	if !bytes.HasPrefix(b, []byte(p)) {
		return nil, false, nil
	}
	t, _, _ := bytes.Cut(b[len(p):], []byte(`"`))
	switch string(t) {
	case TypeCounter:
		c := &Counter{}
		if strict(b, c) != nil || c.Type != TypeCounter {
			return nil, false, nil
		}
		return &Record{Line: d.line, Counter: c}, true, d.checkCounter(c)
	case TypeMembers:
		m := &Members{}
		if strict(b, m) != nil || m.Type != TypeMembers {
			return nil, false, nil
		}
		return &Record{Line: d.line, Members: m}, true, d.checkMembers(m)
	}
	return nil, false, nil
}

func (d *Decoder) errorf(format string, args ...any) error {
	return &LineError{d.line, fmt.Sprintf(format, args...)}
}

func (d *Decoder) counter(b []byte, c *Counter) error {
	if err := strict(b, c); err != nil {
		return d.errorf("counter: %v", err)
	}
	return d.checkCounter(c)
}

// checkCounter checks a decoded counter line against the format and the
// lines before it, and takes it in.
func (d *Decoder) checkCounter(c *Counter) error {
	if err := shardcounter.ValidateID(shardcounter.CounterIDKind, c.ID); err != nil {
		return d.errorf("%v", errorText(err))
	}
	if c.Kind == "" {
		return d.errorf("counter %q has no kind: give sum, distinct or approx", c.ID)
	}
	if err := shardcounter.ValidateSpec(c.Spec()); err != nil {
		return d.errorf("counter %q: %s", c.ID, errorText(err))
	}
	if shardcounter.IsInternalID(c.ID) {
		return d.errorf("counter %q starts with U+001E, reserved for internal records: an export never holds one; remove the line", c.ID)
	}
	if d.coll != nil || d.rank != nil {
		return d.errorf("counter %q comes after a ranking or a collection: counters come first", c.ID)
	}
	if c.ExpiresAt != nil {
		if d.Header.Version < 2 {
			return d.errorf("counter %q has expires_at, which version %d does not have: set the header's version to 2", c.ID, d.Header.Version)
		}
		at := time.UnixMilli(c.ExpiresAt.UnixMilli()).UTC()
		if !at.Equal(*c.ExpiresAt) || at.Year() < 1970 || at.Year() > 9999 {
			return d.errorf("counter %q: expires_at %s is not a time in years 1970 to 9999 to the millisecond", c.ID, c.ExpiresAt.Format(time.RFC3339Nano))
		}
		c.ExpiresAt = &at
	}
	if d.last != nil && c.ID <= d.last.ID && !d.Header.Unsorted {
		return d.errorf("counter %q comes after %q: counters are in increasing id order, each once", c.ID, d.last.ID)
	}
	if c.Window == nil && len(c.Buckets) > 0 {
		return d.errorf("counter %q has buckets but no window", c.ID)
	}
	for i, bk := range c.Buckets {
		if bk.Value == 0 || !bk.Start.Equal(c.Window.BucketOf(bk.Start)) || (i > 0 && !c.Buckets[i-1].Start.Before(bk.Start)) {
			return d.errorf("counter %q: bucket %d (%s) is zero, not at the start of a %s bucket, or out of order", c.ID, i, bk.Start.Format(time.RFC3339), c.Window.Bucket)
		}
	}
	if c.Kind == shardcounter.KindDistinct && c.Value < 0 {
		return d.errorf("distinct counter %q has value %d: a member count is never negative", c.ID, c.Value)
	}
	if err := d.sketches(c); err != nil {
		return err
	}
	d.last = c
	d.seen.Counters++
	return nil
}

// sketches checks an approx counter's sketches: one per shard, each one
// package sketch decodes; a counter of another kind has none.
func (d *Decoder) sketches(c *Counter) error {
	if c.Kind != shardcounter.KindApprox {
		if c.Sketches != nil {
			return d.errorf("counter %q is a %s counter: only an approx counter has sketches", c.ID, c.Kind)
		}
		return nil
	}
	if c.Value < 0 {
		return d.errorf("approx counter %q has value %d: an estimate of a member count is never negative", c.ID, c.Value)
	}
	if len(c.Sketches) != c.Shards {
		return d.errorf("approx counter %q has %d sketches for its %d shards: give one per shard, \"\" for a shard with none", c.ID, len(c.Sketches), c.Shards)
	}
	for i, b := range c.Sketches {
		if _, err := sketch.Decode(b); err != nil {
			return d.errorf("approx counter %q, shard %d: %v", c.ID, i, err)
		}
	}
	return nil
}

func (d *Decoder) members(b []byte, m *Members) error {
	if err := strict(b, m); err != nil {
		return d.errorf("members: %v", err)
	}
	return d.checkMembers(m)
}

// checkMembers checks a decoded members line and takes it in.
func (d *Decoder) checkMembers(m *Members) error {
	if d.coll != nil || d.last == nil || d.last.ID != m.ID || d.last.Kind != shardcounter.KindDistinct {
		return d.errorf("members of %q do not follow the line of the distinct counter %q", m.ID, m.ID)
	}
	if len(m.Members) == 0 || len(m.Members) > MembersPerLine {
		return d.errorf("members of %q: a members line holds 1 to %d members, not %d", m.ID, MembersPerLine, len(m.Members))
	}
	for _, x := range m.Members {
		if err := shardcounter.ValidateID("member", x); err != nil {
			return d.errorf("counter %q: %s", m.ID, errorText(err))
		}
	}
	d.seen.Members += int64(len(m.Members))
	return nil
}

func (d *Decoder) end(b []byte, e *End) error {
	if err := strict(b, e); err != nil {
		return d.errorf("end: %v", err)
	}
	if got := (End{Counters: e.Counters, Members: e.Members, Collections: e.Collections, Documents: e.Documents, Rankings: e.Rankings}); got != d.seen {
		return d.errorf("the end line counts %d counters, %d members, %d rankings, %d collections and %d documents, the lines before hold %d, %d, %d, %d and %d: the export is damaged; export again",
			e.Counters, e.Members, e.Rankings, e.Collections, e.Documents, d.seen.Counters, d.seen.Members, d.seen.Rankings, d.seen.Collections, d.seen.Documents)
	}
	if _, err := d.r.ReadByte(); err != io.EOF {
		return d.errorf("more lines after the end line: two exports were joined; import them one at a time")
	}
	d.done = true
	return nil
}

func (d *Decoder) ranking(b []byte, r *Ranking) error {
	if err := strict(b, r); err != nil {
		return d.errorf("ranking: %v", err)
	}
	if d.Header.Version < 2 {
		return d.errorf("a ranking line in a version %d export, which has none: set the header's version to 2", d.Header.Version)
	}
	if d.coll != nil {
		return d.errorf("ranking %q comes after a collection: rankings come after the counters and before the collections", r.Name)
	}
	if d.rank != nil && r.Name <= d.rank.Name {
		return d.errorf("ranking %q comes after %q: rankings are in increasing name order, each once", r.Name, d.rank.Name)
	}
	if err := shardcounter.ValidateRanking(r.Name, r.RankingOptions); err != nil {
		return d.errorf("ranking %q: %s", r.Name, errorText(err))
	}
	d.rank = r
	d.seen.Rankings++
	return nil
}

func (d *Decoder) collection(b []byte, c *Collection) error {
	if err := strict(b, c); err != nil {
		return d.errorf("collection: %v", err)
	}
	if d.coll != nil && c.Name <= d.coll.Name {
		return d.errorf("collection %q comes after %q: collections are in increasing name order, each once", c.Name, d.coll.Name)
	}
	o := c.Options()
	if err := shardcounter.ValidateCollection(o); err != nil {
		return d.errorf("collection %q: %s", c.Name, errorText(err))
	}
	if o.Shards != c.Shards || o.TimestampField != c.TimestampField || o.ShardKey != c.ShardKey || c.Indexes == nil {
		return d.errorf("collection %q: give shards, timestamp_field, indexes and shard_key", c.Name)
	}
	d.coll = c
	d.seen.Collections++
	return nil
}

func (d *Decoder) document(b []byte, doc *Document) error {
	if err := strict(b, doc); err != nil {
		return d.errorf("document: %v", err)
	}
	if d.coll == nil || d.coll.Name != doc.Collection {
		return d.errorf("document %q of collection %q does not follow the line of its collection", doc.ID, doc.Collection)
	}
	if err := shardcounter.ValidateID("document id", doc.ID); err != nil {
		return d.errorf("%s", errorText(err))
	}
	if doc.Shard < 0 || doc.Shard >= d.coll.Shards {
		return d.errorf("document %q is on shard %d: collection %q has shards 0 to %d", doc.ID, doc.Shard, doc.Collection, d.coll.Shards-1)
	}
	ts := shardcounter.TruncateTimestamp(doc.Timestamp)
	if !ts.Equal(doc.Timestamp) || ts.Before(shardcounter.MinTimestamp) || ts.After(shardcounter.MaxTimestamp) || doc.Data == nil {
		return d.errorf("document %q: give data and a timestamp in years 1 to 9999, to the microsecond", doc.ID)
	}
	doc.Timestamp = ts
	d.seen.Documents++
	return nil
}

// errorText is an error's message without the code prefix *Error adds.
func errorText(err error) string {
	var e *shardcounter.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
