package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/shardcounter/shardcounter"
)

// Request parsing shared by every route: the query string, the body and
// the strict decoding of a JSON object. The route-specific decoders turn
// bodies into validated domain values. They are pure functions of the
// body so that fuzz targets can drive them directly; every error they
// return is a *shardcounter.Error with code EINVALID (or ETOOLARGE for a
// batch over its limit), so a bad body is always a 400 and never reaches
// the service.

// query returns r's query parameters, refusing any not in allowed and
// any given twice, as unknown JSON fields are refused: a typo such as
// ?limt=5 is an error, not a silent default.
func query(r *http.Request, allowed ...string) (url.Values, error) {
	if r.URL.RawQuery == "" {
		return nil, nil // url.Values' methods read a nil map as empty
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "query string is malformed: URL-escape parameter values")
	}
	for k, v := range q {
		if !slices.Contains(allowed, k) {
			if len(allowed) == 0 {
				return nil, shardcounter.Errorf(shardcounter.EINVALID, "unknown query parameter %q: this route takes none", k)
			}
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "unknown query parameter %q: the parameters are %s", k, strings.Join(allowed, ", "))
		}
		if len(v) > 1 {
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "query parameter %q is given %d times: give it once", k, len(v))
		}
	}
	return q, nil
}

// CheckQuery returns r's query parameters, refusing as the API does any
// parameter not in allowed and any given twice (invalid_argument), for
// the handlers served beside the API (the admin endpoints).
func CheckQuery(r *http.Request, allowed ...string) (url.Values, error) {
	return query(r, allowed...)
}

// smallBody is the most a body buffer is made before the bytes arrive
// when the body's length is not known, and the size of the pooled buffers
// that ordinary bodies are read into.
const smallBody = 4 << 10

// readBody reads r's body in full, up to MaxBodyBytes, within BodyTimeout
// (which the server's deadline watcher keeps when watched, and a read
// deadline on the connection otherwise), after taking its size from the server's body budget (MaxBodyTotal); it
// returns the bytes taken, to give back once the body is no longer used,
// also when it fails. A body that is not empty must be JSON: Content-Type
// application/json (charset utf-8 if any), a +json type, or no
// Content-Type at all; and it must come as it is (no Content-Encoding but
// identity: 415 otherwise). A body of known length is read into a buffer
// of that length (a pooled one up to smallBody); one of unknown length
// (chunked) into a buffer that grows as the bytes arrive, taking each
// growth from the budget.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, watched bool) (body []byte, taken int64, err error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, 0, nil
	}
	// The header map's own key: Get would canonicalize it on every request.
	if ce := r.Header["Content-Encoding"]; len(ce) > 0 && (len(ce) > 1 || !strings.EqualFold(ce[0], "identity")) {
		w.Header().Set("Connection", "close") // the body stays unread
		return nil, 0, errUnsupportedEncoding(strings.Join(ce, ", "))
	}
	if r.ContentLength > s.opts.MaxBodyBytes {
		w.Header().Set("Connection", "close")
		return nil, 0, tooLarge(s.opts.MaxBodyBytes)
	}
	n := r.ContentLength
	if s.opts.BodyTimeout > 0 && !watched {
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout)) == nil {
			// No deadline once the body is in: the connection's next read
			// is net/http's wait for the next request, which has its own.
			defer rc.SetReadDeadline(time.Time{})
		}
	}
	taken = smallBody
	if !s.bodies.takeWait(r.Context(), taken, s.opts.QueueWait) {
		s.drain(w, r)
		return nil, 0, s.bodiesFull()
	}
	switch {
	case n >= 0 && n <= smallBody:
		body = getBody(int(n))
		_, err = io.ReadFull(r.Body, body)
	case n > 0:
		body, err = s.readAll(r.Context(), r.Body, n, &taken)
		if err == nil && int64(len(body)) != n {
			err = io.ErrUnexpectedEOF
		}
	default:
		body, err = s.readAll(r.Context(), http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes), s.opts.MaxBodyBytes+1, &taken)
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &tooBig):
			return nil, taken, tooLarge(tooBig.Limit)
		case errors.Is(err, errBodiesFull):
			s.bodies.give(taken) // before the rest is drained: it holds nothing
			s.drain(w, r)
			return nil, 0, s.bodiesFull()
		case errors.As(err, &ne) && ne.Timeout():
			return nil, taken, s.bodyLate(w)
		case err == io.ErrUnexpectedEOF:
			return nil, taken, shardcounter.Errorf(shardcounter.EINVALID,
				"request body ended after fewer than the %d bytes of its Content-Length", r.ContentLength)
		}
		return nil, taken, shardcounter.Errorf(shardcounter.EINVALID, "request body could not be read: %v", err)
	}
	// The body is in, to its end: closed now, net/http has nothing left
	// to discard once the reply is written (an io.CopyN, its reader and
	// a read a request).
	r.Body.Close()
	if len(body) == 0 {
		return body, taken, nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/json" { // the usual one needs no parsing
		mt, params, err := mime.ParseMediaType(ct)
		switch {
		case err != nil:
			return nil, taken, shardcounter.Errorf(shardcounter.EINVALID, "Content-Type %q cannot be parsed: send Content-Type: application/json", ct)
		case mt != "application/json" && !strings.HasSuffix(mt, "+json"):
			return nil, taken, shardcounter.Errorf(shardcounter.EINVALID, "Content-Type %q is not supported: send JSON with Content-Type: application/json", mt)
		case params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8"):
			return nil, taken, shardcounter.Errorf(shardcounter.EINVALID, "charset %q is not supported: send UTF-8", params["charset"])
		}
	}
	return body, taken, nil
}

// bodyLate is the error of a body that did not arrive within
// BodyTimeout; the connection, whose reads were cut, is closed after the
// reply.
func (s *Server) bodyLate(w http.ResponseWriter) error {
	w.Header().Set("Connection", "close")
	return shardcounter.Errorf(shardcounter.EINVALID,
		"request body did not arrive within %v: send the body right after the headers", s.opts.BodyTimeout)
}

func tooLarge(limit int64) error {
	return shardcounter.Errorf(shardcounter.ETOOLARGE,
		"request body is over the limit of %d bytes: send less, or split a batch into smaller ones", limit)
}

// errBodiesFull is readAll's error when the body budget has no room for
// the next growth of the buffer.
var errBodiesFull = errors.New("request bodies in flight are at their limit")

// drain reads and drops the rest of a body the budget has no room for,
// in a small buffer, within BodyTimeout and up to MaxBodyBytes, so that
// the 503 reaches the client: a server that closes a connection with
// unread input sends a TCP reset, which can destroy the reply before the
// client reads it. A body that does not end so is left, with the
// connection closed after the reply.
func (s *Server) drain(w http.ResponseWriter, r *http.Request) {
	s.metrics.ObserveBodyRejected()
	n, err := io.Copy(io.Discard, io.LimitReader(r.Body, s.opts.MaxBodyBytes+1))
	if err != nil || n > s.opts.MaxBodyBytes {
		w.Header().Set("Connection", "close")
	}
}

// bodiesFull is the error of a body the budget has no room for: 503, so
// the client retries after Retry-After; nothing was held or done.
func (s *Server) bodiesFull() error {
	return shardcounter.Errorf(shardcounter.EUNAVAILABLE,
		"the server holds its limit of %d bytes of request bodies (--max-body-total): nothing was done, retry after the Retry-After delay", s.opts.MaxBodyTotal)
}

// unsupportedEncoding is the error of a body sent with a Content-Encoding
// (gzip, say), answered 415 with code invalid_argument: the API reads
// bodies as they are sent, and a decompressed body could be far larger
// than what was sent.
type unsupportedEncoding struct{ err *shardcounter.Error }

func errUnsupportedEncoding(ce string) error {
	return unsupportedEncoding{shardcounter.Errorf(shardcounter.EINVALID,
		"Content-Encoding %q is not supported: send the body uncompressed (request bodies are small JSON)", ce)}
}

func (e unsupportedEncoding) Error() string { return e.err.Error() }
func (e unsupportedEncoding) Unwrap() error { return e.err }

// bodies recycles the buffers of small bodies: a request's body is
// garbage once its handler returns, since decoders copy what they keep.
// It holds arrays, whose pointers, unlike a slice, go into the pool
// without an allocation.
var bodies = sync.Pool{New: func() any { return new([smallBody]byte) }}

// getBody returns a buffer of n ≤ smallBody bytes.
func getBody(n int) []byte {
	return bodies.Get().(*[smallBody]byte)[:n]
}

// putBody gives back a buffer from getBody; any other is left to the
// garbage collector.
func putBody(b []byte) {
	if cap(b) == smallBody {
		bodies.Put((*[smallBody]byte)(b[:smallBody]))
	}
}

// readAll is io.ReadAll into a buffer that starts at smallBody bytes,
// already taken from the body budget, and grows as the bytes arrive, never
// past size bytes (a Content-Length, or just past MaxBodyBytes): a
// Content-Length header costs a client nothing to send, so the buffer is
// never sized from it before the bytes come. Each growth is taken from the
// budget first and added to *taken; readAll fails with errBodiesFull when
// the budget has no room for it.
func (s *Server) readAll(ctx context.Context, r io.Reader, size int64, taken *int64) ([]byte, error) {
	b := make([]byte, 0, min(smallBody, size))
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			if int64(cap(b)) >= size {
				return b, nil // the reader would give no more: Content-Length, or the limit's extra byte
			}
			grow := min(int64(cap(b)), size-int64(cap(b))) // doubling, up to size
			if !s.bodies.takeWait(ctx, grow, s.opts.QueueWait) {
				return b, errBodiesFull
			}
			*taken += grow
			nb := make([]byte, len(b), int64(cap(b))+grow)
			copy(nb, b)
			b = nb
		}
	}
}

// bodyOf returns the request's name, validated by nameOf (collectionName,
// plainCounterID), and its body, which the middleware has read.
func (s *Server) bodyOf(r *http.Request, nameOf func(*http.Request) (string, error)) (string, []byte, error) {
	name, err := nameOf(r)
	if err != nil {
		return "", nil, err
	}
	return name, requestOf(r).body, nil
}

// jsonSpace is JSON's white space (RFC 8259), narrower than Unicode's.
const jsonSpace = " \t\r\n"

// decodeObject decodes body, which must be exactly one JSON object and
// nothing else, into v, refusing unknown fields. An empty body decodes as
// {} when emptyOK, and is an error otherwise. fields and example go into
// error messages so they say what a good body looks like.
func decodeObject(body []byte, v any, emptyOK bool, fields, example string) error {
	trimmed := bytes.Trim(body, jsonSpace)
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
	// Unmarshal, not a Decoder with DisallowUnknownFields: checkKeys
	// refuses unknown fields itself, and more strictly, and Unmarshal
	// allocates no reader and buffer of its own.
	if err := json.Unmarshal(body, v); err != nil {
		return jsonError(err, fields, example)
	}
	if err := checkKeys(body, v); err != nil {
		return strictError(err, fields)
	}
	return nil
}

// jsonError turns an encoding/json error into an EINVALID error that says
// what is wrong in the caller's terms.
func jsonError(err error, fields, example string) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax) && strings.HasSuffix(syntax.Error(), "after top-level value"):
		return shardcounter.Errorf(shardcounter.EINVALID,
			"request body has data after the JSON object at byte %d: send exactly one object such as %s", syntax.Offset-1, example)
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
