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
