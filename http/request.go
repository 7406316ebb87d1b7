package http

import (
	"bytes"
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

// smallBody is the most a body buffer is made before the bytes arrive:
// the usual request fits, and a Content-Length header, which costs a
// client nothing to send, cannot make the server allocate more.
const smallBody = 4 << 10

// readBody reads r's body in full, up to MaxBodyBytes, within BodyTimeout.
// A body that is not empty must be JSON: Content-Type application/json
// (charset utf-8 if any), a +json type, or no Content-Type at all. The
// buffer grows as the bytes arrive: it is sized from Content-Length only
// up to smallBody.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > s.opts.MaxBodyBytes {
		w.Header().Set("Connection", "close") // the body stays unread
		return nil, tooLarge(s.opts.MaxBodyBytes)
	}
	if s.opts.BodyTimeout > 0 {
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout)) == nil {
			// No deadline once the body is in: the connection's next read
			// is net/http's wait for the next request, which has its own.
			defer rc.SetReadDeadline(time.Time{})
		}
	}
	var body []byte
	var err error
	if n := r.ContentLength; n >= 0 && n <= smallBody {
		body = getBody(int(n))
		_, err = io.ReadFull(r.Body, body)
	} else {
		body, err = readAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes), smallBody)
		if err == nil && n >= 0 && int64(len(body)) != n {
			err = io.ErrUnexpectedEOF
		}
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &tooBig):
			return nil, tooLarge(tooBig.Limit)
		case errors.As(err, &ne) && ne.Timeout():
			w.Header().Set("Connection", "close")
			return nil, shardcounter.Errorf(shardcounter.EINVALID,
				"request body did not arrive within %v: send the body right after the headers", s.opts.BodyTimeout)
		case err == io.ErrUnexpectedEOF:
			return nil, shardcounter.Errorf(shardcounter.EINVALID,
				"request body ended after fewer than the %d bytes of its Content-Length", r.ContentLength)
		}
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "request body could not be read: %v", err)
	}
	if len(body) == 0 {
		return body, nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/json" { // the usual one needs no parsing
		mt, params, err := mime.ParseMediaType(ct)
		switch {
		case err != nil:
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "Content-Type %q cannot be parsed: send Content-Type: application/json", ct)
		case mt != "application/json" && !strings.HasSuffix(mt, "+json"):
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "Content-Type %q is not supported: send JSON with Content-Type: application/json", mt)
		case params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8"):
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "charset %q is not supported: send UTF-8", params["charset"])
		}
	}
	return body, nil
}

func tooLarge(limit int64) error {
	return shardcounter.Errorf(shardcounter.ETOOLARGE,
		"request body is over the limit of %d bytes: send less, or split a batch into smaller ones", limit)
}

// bodies recycles the buffers of small bodies: a request's body is
// garbage once its handler returns, since decoders copy what they keep.
var bodies = sync.Pool{New: func() any { b := make([]byte, 0, smallBody); return &b }}

// getBody returns a buffer of n ≤ smallBody bytes.
func getBody(n int) []byte {
	return (*bodies.Get().(*[]byte))[:n]
}

// putBody gives back a buffer from getBody; any other is left to the
// garbage collector.
func putBody(b []byte) {
	if cap(b) == smallBody {
		b = b[:0]
		bodies.Put(&b)
	}
}

// readAll is io.ReadAll starting from a buffer of size bytes.
func readAll(r io.Reader, size int) ([]byte, error) {
	b := make([]byte, 0, size)
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
			b = append(b, 0)[:len(b)] // let append choose the growth
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
