package http

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/shardcounter/shardcounter"
)

// The decoders below turn request bodies into validated domain values.
// They are pure functions of the body so that fuzz targets can drive them
// directly; every error they return is a *shardcounter.Error with code
// EINVALID (or ETOOLARGE for a batch over its limit), so a bad body is
// always a 400 and never reaches the service.

// Field lists quoted in "unknown field" messages, so the message says what
// the caller may send instead.
const (
	createFields  = `"shards", or "followers_count" and "visibility"`
	writeFields   = `"by" and "request_id"`
	reshardFields = `"shards"`
	writesFields  = `"writes", whose items have "counter", "delta" and "request_id"`
)

// decodeCreate decodes the body of PUT /v1/counters/{id}. An empty body
// means {}: the service's default shard count.
func decodeCreate(body []byte) (shardcounter.CreateOptions, error) {
	var req CreateRequest
	if err := decodeObject(body, &req, true, createFields, `{"shards":16}`); err != nil {
		return shardcounter.CreateOptions{}, err
	}
	var opts shardcounter.CreateOptions
	if req.Shards != nil {
		if req.FollowersCount != nil || req.Visibility != "" {
			return opts, shardcounter.Errorf(shardcounter.EINVALID,
				`body has both "shards" and "followers_count"/"visibility": give the shard count or the audience, not both`)
		}
		if err := shardcounter.ValidateShards(*req.Shards); err != nil {
			return opts, err
		}
		opts.Shards = *req.Shards
	}
	if req.FollowersCount != nil && *req.FollowersCount < 0 {
		return opts, shardcounter.Errorf(shardcounter.EINVALID,
			"followers_count is %d: give 0 or more", *req.FollowersCount)
	}
	switch req.Visibility {
	case "", "public", "protected":
	default:
		return opts, shardcounter.Errorf(shardcounter.EINVALID,
			`visibility is %q: give "public" or "protected"`, req.Visibility)
	}
	opts.FollowersCount = req.FollowersCount
	opts.Visibility = req.Visibility
	opts.Kind, opts.Min, opts.Max, opts.Window = req.Kind, req.Min, req.Max, req.Window
	return opts, nil
}

// decodeWrite decodes the body of POST .../increment or .../decrement into
// a signed delta and a request id. An empty body means {"by":1}.
func decodeWrite(body []byte, decrement bool) (delta int64, requestID string, err error) {
	var req WriteRequest
	if err := decodeObject(body, &req, true, writeFields, `{"by":5,"request_id":"abc"}`); err != nil {
		return 0, "", err
	}
	by := int64(1)
	if req.By != nil {
		by = *req.By
	}
	if by < 1 {
		op := "increment"
		if decrement {
			op = "decrement"
		}
		return 0, "", shardcounter.Errorf(shardcounter.EINVALID,
			"by is %d: give a whole number of at least 1 (the amount to %s by)", by, op)
	}
	if req.RequestID != "" {
		if err := shardcounter.ValidateID("request id", req.RequestID); err != nil {
			return 0, "", err
		}
	}
	if decrement {
		by = -by // by ≤ MaxInt64, so -by ≥ MinInt64+1 and cannot overflow
	}
	return by, req.RequestID, nil
}

// decodeReshard decodes the body of PATCH /v1/counters/{id}, where the
// shard count is required.
func decodeReshard(body []byte) (int, error) {
	var req ReshardRequest
	if err := decodeObject(body, &req, false, reshardFields, `{"shards":32}`); err != nil {
		return 0, err
	}
	if req.Shards == nil {
		return 0, shardcounter.Errorf(shardcounter.EINVALID,
			`body has no "shards": send the new shard count, e.g. {"shards":32}`)
	}
	if err := shardcounter.ValidateShards(*req.Shards); err != nil {
		return 0, err
	}
	return *req.Shards, nil
}

// decodeWrites decodes the body of POST /v1/writes and validates every
// item, so that one bad item fails the batch before anything is applied.
func decodeWrites(body []byte, maxBatch int) ([]shardcounter.Write, error) {
	var req WritesRequest
	if err := decodeObject(body, &req, false, writesFields, `{"writes":[{"counter":"likes","delta":1}]}`); err != nil {
		return nil, err
	}
	switch n := len(req.Writes); {
	case n == 0:
		return nil, shardcounter.Errorf(shardcounter.EINVALID,
			`"writes" is empty: give 1 to %d writes`, maxBatch)
	case n > maxBatch:
		return nil, shardcounter.Errorf(shardcounter.ETOOLARGE,
			"batch has %d writes: the limit is %d, split it into smaller batches", n, maxBatch)
	}
	for i, w := range req.Writes {
		if err := shardcounter.ValidateWrite(w); err != nil {
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "writes[%d]: %s", i, shardcounter.ErrorMessage(err))
		}
	}
	return req.Writes, nil
}

// decodeObject decodes body, which must be exactly one JSON object and
// nothing else, into v, refusing unknown fields. An empty body decodes as
// {} when emptyOK, and is an error otherwise. fields and example go into
// error messages so they say what a good body looks like.
func decodeObject(body []byte, v any, emptyOK bool, fields, example string) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		if emptyOK {
			return nil
		}
		return shardcounter.Errorf(shardcounter.EINVALID, "request body is empty: send a JSON object such as %s", example)
	}
	if !utf8.Valid(body) {
		return shardcounter.Errorf(shardcounter.EINVALID, "request body is not valid UTF-8: send UTF-8 encoded JSON")
	}
	if trimmed[0] != '{' {
		return shardcounter.Errorf(shardcounter.EINVALID, "request body is not a JSON object: send one such as %s", example)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, fields, example)
	}
	if rest := bytes.TrimSpace(body[dec.InputOffset():]); len(rest) > 0 {
		return shardcounter.Errorf(shardcounter.EINVALID,
			"request body has data after the JSON object at byte %d: send exactly one object such as %s", dec.InputOffset(), example)
	}
	return nil
}

// jsonError turns an encoding/json error into an EINVALID error that says
// what is wrong in the caller's terms.
func jsonError(err error, fields, example string) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return shardcounter.Errorf(shardcounter.EINVALID,
			"request body is not valid JSON at byte %d (%s): send an object such as %s",
			syntax.Offset, strings.TrimPrefix(syntax.Error(), "json: "), example)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "request body"
		} else {
			field = fmt.Sprintf("field %q", field)
		}
		want, ok := fieldWants[typ.Field]
		if !ok {
			want = describeType(typ.Type)
		}
		return shardcounter.Errorf(shardcounter.EINVALID, "%s is a JSON %s: it must be %s", field, typ.Value, want)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return shardcounter.Errorf(shardcounter.EINVALID,
			"request body ends before the JSON object is complete: send an object such as %s", example)
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return shardcounter.Errorf(shardcounter.EINVALID,
			"unknown field %s: the fields are %s", name, fields)
	}
	return shardcounter.Errorf(shardcounter.EINVALID,
		"request body cannot be decoded (%s): send an object such as %s", strings.TrimPrefix(msg, "json: "), example)
}

// fieldWants says what a field of a request body must be, where that is
// narrower than its Go type.
var fieldWants = map[string]string{
	"shards":          fmt.Sprintf("a whole number from %d to %d", shardcounter.MinShards, shardcounter.MaxShards),
	"by":              fmt.Sprintf("a whole number from 1 to %d", int64(math.MaxInt64)),
	"followers_count": fmt.Sprintf("a whole number from 0 to %d", int64(math.MaxInt64)),
	"writes.delta":    "a non-zero whole number in the int64 range",
}

// describeType names a Go type in the words of the API.
func describeType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int64:
		return fmt.Sprintf("a whole number from %d to %d", int64(math.MinInt64), int64(math.MaxInt64))
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Bool:
		return "true or false"
	}
	return "of type " + t.String()
}

// Page tokens: base64url (no padding) of
//
//	version byte (1) | uvarint len(prefix) | prefix | last id
//
// The prefix binds a token to its listing, so paging with a changed
// prefix is refused instead of silently skipping or repeating ids.
const (
	pageTokenVersion = 1
	maxPageTokenLen  = 1024 // 2×MaxIDLen plus framing, base64 encoded, with room
)

// encodePageToken returns the token for the page after id after in a
// listing of prefix.
func encodePageToken(prefix, after string) string {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(prefix)+len(after))
	b = append(b, pageTokenVersion)
	b = binary.AppendUvarint(b, uint64(len(prefix)))
	b = append(b, prefix...)
	b = append(b, after...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodePageToken returns the id a page token continues after, checking
// that it was issued for prefix. Only tokens encodePageToken can produce
// are accepted.
func decodePageToken(token, prefix string) (string, error) {
	bad := func(why string) error {
		return shardcounter.Errorf(shardcounter.EINVALID,
			"page_token is not valid (%s): pass the previous page's next_page_token unchanged, or omit it to start at the beginning", why)
	}
	if len(token) > maxPageTokenLen {
		return "", bad("too long")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil {
		return "", bad("not base64url")
	}
	if len(b) == 0 || b[0] != pageTokenVersion {
		return "", bad("unknown version")
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n > uint64(len(b)-1-k) {
		return "", bad("truncated")
	}
	tokPrefix := string(b[1+k : 1+k+int(n)])
	after := string(b[1+k+int(n):])
	if encodePageToken(tokPrefix, after) != token {
		return "", bad("not in canonical form")
	}
	if err := shardcounter.ValidateID("page_token id", after); err != nil {
		return "", bad("bad id")
	}
	if !strings.HasPrefix(after, tokPrefix) {
		return "", bad("id outside its prefix")
	}
	if tokPrefix != prefix {
		return "", shardcounter.Errorf(shardcounter.EINVALID,
			"page_token was issued for prefix %q, not %q: repeat the first request's prefix, or omit page_token to start again", tokPrefix, prefix)
	}
	return after, nil
}
