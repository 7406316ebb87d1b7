package shardcounter

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
)

// Limits of collections, shared by every store and the API.
const (
	// DefaultTimestampField is the data field that holds a document's
	// timestamp when a collection does not name another.
	DefaultTimestampField = "timestamp"
	// MaxIndexes bounds a collection's declared indexes: every index is one
	// more entry written per document and shard.
	MaxIndexes = 16
	// MaxFieldPathLen bounds a field path (such as "price.currency") in
	// bytes.
	MaxFieldPathLen = 256
	// MaxIndexValueLen bounds, in bytes, the canonical form of a value of
	// an indexed field: it becomes part of an index key, and keys are small
	// in every store (a PostgreSQL B-tree row must fit a third of a page).
	MaxIndexValueLen = 1024
	// DefaultQueryLimit is the page size of a query that gives none.
	DefaultQueryLimit = 20
	// MaxQueryLimit bounds a query's page size.
	MaxQueryLimit = 1000
	// MaxDocumentBatch bounds the documents of one put, as Firestore bounds
	// a batched write.
	MaxDocumentBatch = 500
)

// ShardKey says how a collection chooses a new document's shard.
type ShardKey string

const (
	// ShardRandom puts each document on a shard chosen at random, as the
	// seed does: writes spread evenly whatever the ids.
	ShardRandom ShardKey = "random"
	// ShardIDHash puts a document on shard fnv64a(id) mod n, which spreads
	// as well for distinct ids and sends a rewrite of the same id to the
	// same shard while n is unchanged.
	ShardIDHash ShardKey = "id_hash"
)

// Order is the order of a query's results by (timestamp, id).
type Order string

const (
	// Desc is newest first, the default.
	Desc Order = "desc"
	// Asc is oldest first.
	Asc Order = "asc"
)

// Collection is a time-ordered collection's metadata. Its documents are
// spread over Shards shards, and every index that holds the timestamp
// holds the shard first (seed 001, "sharded timestamps"), so that no one
// index range takes every new document. Shards only grows: a document
// stays on the shard it was written to, and queries cover shards 0 to
// Shards-1, which is every shard that may hold data.
type Collection struct {
	Name           string    `json:"name"`
	Shards         int       `json:"shards"`
	TimestampField string    `json:"timestamp_field"`
	Indexes        []string  `json:"indexes"`
	ShardKey       ShardKey  `json:"shard_key"`
	CreatedAt      time.Time `json:"created_at"`
}

// HasIndex reports whether field is one of the collection's indexes.
func (c *Collection) HasIndex(field string) bool {
	for _, f := range c.Indexes {
		if f == field {
			return true
		}
	}
	return false
}

// CollectionOptions describe a collection to create; the zero value of a
// field takes its default. It is the body of PUT /v1/collections/{name}.
type CollectionOptions struct {
	// Shards is the shard count n, 1 to MaxShards. Default 1.
	Shards int `json:"shards,omitempty"`
	// TimestampField is the field path of the documents' timestamp.
	// Default "timestamp".
	TimestampField string `json:"timestamp_field,omitempty"`
	// Indexes are the field paths that queries may filter on by equality.
	Indexes []string `json:"indexes,omitempty"`
	// ShardKey is "random" (the default) or "id_hash".
	ShardKey ShardKey `json:"shard_key,omitempty"`
}

// Document is one document of a collection. Timestamp is kept to the
// microsecond, in UTC; documents sort by (Timestamp, ID).
type Document struct {
	ID        string         `json:"id"`
	Shard     int            `json:"shard"`
	Timestamp time.Time      `json:"timestamp"`
	Data      map[string]any `json:"data"`
}

// Position returns the document's place in the (timestamp, id) order.
func (d *Document) Position() Position { return Position{Time: d.Timestamp, ID: d.ID} }

// DocumentInput is a document as a client writes it. ID is optional: the
// service generates one when it is empty. The timestamp is read from Data
// (the collection's timestamp field, an RFC 3339 string); when Data has
// none the service's current time is used and written into Data.
type DocumentInput struct {
	ID   string         `json:"id,omitempty"`
	Data map[string]any `json:"data"`
}

// DocumentRef says where a written document went.
type DocumentRef struct {
	ID        string    `json:"id"`
	Shard     int       `json:"shard"`
	Timestamp time.Time `json:"timestamp"`
}

// Filter is a condition on a field. Only equality ("==") on an indexed
// field is supported: every other kind of filter would need a scan.
type Filter struct {
	Field string `json:"field"`
	Op    string `json:"op"`
	Value any    `json:"value"`
}

// Query selects a page of a collection's documents in (timestamp, id)
// order. It is the body of POST /v1/collections/{name}/query.
type Query struct {
	// Where holds at most one equality filter on an indexed field.
	Where []Filter `json:"where,omitempty"`
	// After and Before, when set, bound the timestamp, both exclusive.
	After  time.Time `json:"after,omitzero"`
	Before time.Time `json:"before,omitzero"`
	// Order is Desc (the default) or Asc.
	Order Order `json:"order,omitempty"`
	// Limit is the page size, 1 to MaxQueryLimit; 0 means
	// DefaultQueryLimit.
	Limit int `json:"limit,omitempty"`
	// PageToken continues a query from where its previous page ended. It
	// is valid only for the same collection, filter, range and order.
	PageToken string `json:"page_token,omitempty"`
}

// QueryResult is one page of a query. NextPageToken is empty on the last
// page.
type QueryResult struct {
	Documents     []*Document `json:"documents"`
	NextPageToken string      `json:"next_page_token,omitempty"`
}

// Position is a place in the (timestamp, id) order of a collection. An
// empty ID sorts before every document at Time (ids are never empty), so
// Position{Time: t} separates documents stamped before t from the others.
type Position struct {
	Time time.Time
	ID   string
}

// Compare returns -1, 0 or +1 as p sorts before, with or after q.
func (p Position) Compare(q Position) int {
	if c := p.Time.Compare(q.Time); c != 0 {
		return c
	}
	return strings.Compare(p.ID, q.ID)
}

// ScanRange is one ordered, limited read of an index, on a set of shards:
// the primitive a CollectionStore serves, from which the service builds
// merged queries.
type ScanRange struct {
	// Index is the indexed field path, or "" for the index of every
	// document by timestamp.
	Index string
	// Value is IndexValue of the filter's value; unused when Index is "".
	Value string
	// Shards are the shards to read; documents of every one of them come
	// back merged in order.
	Shards []int
	// After and Before, when not nil, bound the positions read, both
	// exclusive.
	After, Before *Position
	// Order is Desc or Asc.
	Order Order
	// Limit is the most documents to return, at least 1.
	Limit int
}

// CollectionStore is where collections live: their metadata, documents,
// and the per-shard indexes by (index value, shard, timestamp, id). It
// holds storage only: shard choice, ids, timestamps, validation and the
// merge of per-shard reads live in package collection, once for every
// store. Every store passes storetest.RunCollectionStore. Implementations
// are safe for concurrent use.
//
// Methods return *Error values: ENOTFOUND, EEXISTS, EUNAVAILABLE when the
// store cannot be reached (nothing was applied), EOUTCOMEUNKNOWN for a
// write the store did not confirm, EINTERNAL for a bug.
type CollectionStore interface {
	// CreateCollection records c, which the caller has validated. It
	// returns ErrExists when the name is taken.
	CreateCollection(ctx context.Context, c *Collection) error
	// GetCollection returns a collection's metadata, or ErrNotFound.
	GetCollection(ctx context.Context, name string) (*Collection, error)
	// GrowCollection raises a collection's shard count to shards and
	// returns the collection. A count below the current one is EINVALID:
	// documents stay on the shard they were written to, so a count never
	// shrinks.
	GrowCollection(ctx context.Context, name string, shards int) (*Collection, error)
	// DeleteCollection removes a collection and its documents, or returns
	// ErrNotFound.
	DeleteCollection(ctx context.Context, name string) error

	// PutDocuments writes documents into c, replacing any with the same id
	// (and its index entries). Each document has its id, shard (below
	// c.Shards), timestamp (to the microsecond) and data set. The store
	// returns ErrNotFound when c no longer exists, or exists with another
	// CreatedAt (it was deleted and made again).
	PutDocuments(ctx context.Context, c *Collection, docs []*Document) error
	// GetDocument returns one document, or ErrNotFound.
	GetDocument(ctx context.Context, c *Collection, id string) (*Document, error)
	// DeleteDocument removes one document and its index entries, or
	// returns ErrNotFound.
	DeleteDocument(ctx context.Context, c *Collection, id string) error

	// ScanDocuments returns up to r.Limit documents of c in r.Order whose
	// shard is in r.Shards, whose position lies strictly between r.After
	// and r.Before, and which match r.Index == r.Value (every document when
	// r.Index is ""). It returns fewer than r.Limit only when no more
	// documents are in the range. It reads an index range per shard, never
	// the whole collection.
	ScanDocuments(ctx context.Context, c *Collection, r ScanRange) ([]*Document, error)
	// MaxScanShards is how many shards one ScanDocuments call may cover: 1
	// for a store whose index ranges are per shard (bolt, Redis), the
	// number of values it takes in one `shard IN (...)` for SQL.
	MaxScanShards() int
}

// CollectionService is the collection API. Package collection implements
// it over a CollectionStore, and the HTTP client over the network.
// Implementations are safe for concurrent use.
//
// Every method returns *Error values: EINVALID for bad names, options,
// documents, filters, limits, ranges and page tokens; ETOOLARGE for a batch
// over MaxDocumentBatch; ENOTFOUND, EEXISTS, EUNAVAILABLE when the store
// cannot be reached (nothing was applied), EOUTCOMEUNKNOWN for a write the
// store did not confirm, EINTERNAL for a bug.
type CollectionService interface {
	// CreateCollection makes an empty collection.
	CreateCollection(ctx context.Context, name string, opts CollectionOptions) (*Collection, error)
	// GetCollection returns a collection's metadata.
	GetCollection(ctx context.Context, name string) (*Collection, error)
	// ReshardCollection raises the shard count to shards. New documents
	// spread over the new count; documents written before stay where they
	// are, and queries go on covering them. A count below the current one is
	// EINVALID.
	ReshardCollection(ctx context.Context, name string, shards int) (*Collection, error)
	// DeleteCollection removes the collection and its documents.
	DeleteCollection(ctx context.Context, name string) error
	// PutDocuments writes documents, each replacing any document with its
	// id, and says where each went, in order. An invalid document fails the
	// whole call and nothing is written.
	PutDocuments(ctx context.Context, name string, docs []DocumentInput) ([]DocumentRef, error)
	// GetDocument returns one document.
	GetDocument(ctx context.Context, name, id string) (*Document, error)
	// DeleteDocument removes one document.
	DeleteDocument(ctx context.Context, name, id string) error
	// QueryDocuments returns a page of the documents that match q, in
	// order. The result is exactly that of the same query on an unsharded
	// collection, and paging with NextPageToken returns every matching
	// document once, while documents are added and the shard count grows.
	QueryDocuments(ctx context.Context, name string, q Query) (*QueryResult, error)
}

// ValidateCollection checks a collection's metadata and fills in the
// defaults of its options.
func ValidateCollection(c *Collection) error {
	if err := ValidateID("collection name", c.Name); err != nil {
		return err
	}
	if c.Shards == 0 {
		c.Shards = 1
	}
	if err := ValidateShards(c.Shards); err != nil {
		return err
	}
	if c.TimestampField == "" {
		c.TimestampField = DefaultTimestampField
	}
	if err := ValidateFieldPath("timestamp field", c.TimestampField); err != nil {
		return err
	}
	switch c.ShardKey {
	case "":
		c.ShardKey = ShardRandom
	case ShardRandom, ShardIDHash:
	default:
		return Errorf(EINVALID, "shard key %q is unknown: use %q or %q", c.ShardKey, ShardRandom, ShardIDHash)
	}
	if len(c.Indexes) > MaxIndexes {
		return Errorf(EINVALID, "%d indexes declared: the limit is %d", len(c.Indexes), MaxIndexes)
	}
	seen := make(map[string]bool, len(c.Indexes))
	for _, f := range c.Indexes {
		if err := ValidateFieldPath("index field", f); err != nil {
			return err
		}
		if f == c.TimestampField {
			return Errorf(EINVALID, "index %q is the timestamp field, which every index holds already: remove it and use after/before", f)
		}
		if seen[f] {
			return Errorf(EINVALID, "index %q is declared twice", f)
		}
		seen[f] = true
	}
	if c.Indexes == nil {
		c.Indexes = []string{}
	}
	return nil
}

// ValidateFieldPath checks a field path: names separated by dots, each
// non-empty, with no control characters, at most MaxFieldPathLen bytes.
func ValidateFieldPath(kind, path string) error {
	if err := ValidateID(kind, path); err != nil {
		return err
	}
	if len(path) > MaxFieldPathLen {
		return Errorf(EINVALID, "%s is %d bytes long: the limit is %d", kind, len(path), MaxFieldPathLen)
	}
	for _, seg := range strings.Split(path, ".") {
		if seg == "" {
			return Errorf(EINVALID, "%s %q has an empty name between dots", kind, path)
		}
	}
	return nil
}

// Lookup returns the value at a dotted field path of data ("price.currency"
// is data["price"]["currency"]), and whether it is there.
func Lookup(data map[string]any, path string) (any, bool) {
	var v any = data
	for seg := range strings.SplitSeq(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[seg]; !ok {
			return nil, false
		}
	}
	return v, true
}

// IndexValue returns the canonical form of a value for an index key, and
// false when the value cannot be indexed. Strings, numbers and booleans
// can; null, objects and arrays cannot, so a document whose indexed field
// holds one of them (or is missing) matches no equality filter on it.
// Numbers compare as JSON numbers do in JavaScript: as float64, so 1 and
// 1.0 are equal. The kinds get distinct prefixes, so "1" never equals 1.
func IndexValue(v any) (string, bool) {
	var f float64
	switch x := v.(type) {
	case string:
		return "s" + x, true
	case bool:
		if x {
			return "t", true
		}
		return "f", true
	case float64:
		f = x
	case float32:
		f = float64(x)
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	case int32:
		f = float64(x)
	case uint64:
		f = float64(x)
	case json.Number:
		var err error
		if f, err = x.Float64(); err != nil {
			return "", false
		}
	default:
		return "", false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", false
	}
	if f == 0 {
		f = 0 // -0 == 0
	}
	return "n" + strconv.FormatFloat(f, 'g', -1, 64), true
}

// Bounds of a document timestamp: RFC 3339 years 1 to 9999, which every
// store can order as microseconds in an int64.
var (
	MinTimestamp = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxTimestamp = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// TruncateTimestamp returns t in UTC, kept to the microsecond: the
// precision every store keeps.
func TruncateTimestamp(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// ParseTimestamp parses an RFC 3339 timestamp and keeps it to the
// microsecond.
func ParseTimestamp(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, Errorf(EINVALID, "timestamp %q is not RFC 3339: write it as 2019-01-01T13:45:23.010Z", s)
	}
	t = TruncateTimestamp(t)
	if t.Before(MinTimestamp) || t.After(MaxTimestamp) {
		return time.Time{}, Errorf(EINVALID, "timestamp %q is outside years 1 to 9999", s)
	}
	return t, nil
}

// ValidateQueryShape checks the parts of a query that do not depend on its
// collection: the page size, the order and the time range.
func ValidateQueryShape(q Query) error {
	if q.Limit < 0 || q.Limit > MaxQueryLimit {
		return Errorf(EINVALID, "limit %d is out of range: give 1 to %d", q.Limit, MaxQueryLimit)
	}
	switch q.Order {
	case "", Desc, Asc:
	default:
		return Errorf(EINVALID, "order %q is unknown: use %q or %q", q.Order, Desc, Asc)
	}
	if !q.After.IsZero() && !q.Before.IsZero() && !q.After.Before(q.Before) {
		return Errorf(EINVALID, "after (%s) is not before before (%s): the range is empty", q.After.Format(time.RFC3339Nano), q.Before.Format(time.RFC3339Nano))
	}
	if len(q.Where) > 1 {
		return Errorf(EINVALID, "%d filters given: a query takes at most one equality filter", len(q.Where))
	}
	return nil
}

// ValidateFilter checks a query's filter against its collection and
// returns the index field and IndexValue of the value it selects.
func ValidateFilter(c *Collection, f Filter) (field, value string, err error) {
	if err := ValidateFieldPath("filter field", f.Field); err != nil {
		return "", "", err
	}
	if f.Op != "==" {
		return "", "", Errorf(EINVALID, "filter operator %q is not supported: use ==, and after/before for the timestamp", f.Op)
	}
	if f.Field == c.TimestampField {
		return "", "", Errorf(EINVALID, "filter on the timestamp field %q: use after and before instead", f.Field)
	}
	if !c.HasIndex(f.Field) {
		return "", "", Errorf(EINVALID, "field %q is not indexed in collection %q, so the query would need a full scan: add %q to the collection's indexes", f.Field, c.Name, f.Field)
	}
	v, ok := IndexValue(f.Value)
	if !ok {
		return "", "", Errorf(EINVALID, "filter value for %q must be a string, a number or a boolean", f.Field)
	}
	if len(v) > MaxIndexValueLen {
		return "", "", Errorf(EINVALID, "filter value for %q is %d bytes long: the limit is %d", f.Field, len(v), MaxIndexValueLen)
	}
	return f.Field, v, nil
}
