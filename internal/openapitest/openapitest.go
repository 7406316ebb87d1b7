// Package openapitest checks HTTP traffic against the API's OpenAPI
// document (package http's openapi.json, served at /openapi.json) with
// kin-openapi, so that tests which talk to a server also check that the
// document says what the server does:
//
//   - every reply is one the document allows its request: a status it
//     lists for the operation, and a body and headers of its schemas (an
//     unknown path gets 404, a method a path does not serve 405 with the
//     path's methods in Allow, both with the API's error body);
//   - a request the document refuses gets a 4xx, never a 2xx.
//
// Validator.Handler wraps a server's handler so that every exchange of a
// test is checked; Validator.Check checks one.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	shttp "github.com/shardcounter/shardcounter/http"
)

func init() {
	// The media types of the document that are not JSON: checked as
	// strings (their schemas are), streams and files alike.
	for _, ct := range []string{"text/event-stream", "application/x-ndjson", "text/html", "text/css",
		"text/javascript", "application/openmetrics-text"} {
		openapi3filter.RegisterBodyDecoder(ct, openapi3filter.PlainBodyDecoder)
	}
	openapi3filter.RegisterBodyDecoder("application/x-tar", openapi3filter.FileBodyDecoder)
}

// Validator checks requests and replies against the document. It is safe
// for concurrent use.
type Validator struct {
	doc   *openapi3.T
	paths *http.ServeMux // the document's paths, as net/http patterns
}

var (
	loadOnce sync.Once
	loaded   *Validator
	loadErr  error
)

// New returns a Validator of the document package http serves, which it
// first checks is a valid OpenAPI 3 document.
func New() (*Validator, error) {
	loadOnce.Do(func() { loaded, loadErr = load(shttp.OpenAPI()) })
	return loaded, loadErr
}

// MustNew is New for tests.
func MustNew(tb testing.TB) *Validator {
	tb.Helper()
	v, err := New()
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

var wildcard = regexp.MustCompile(`\{([A-Za-z_]+)\}`)

func load(data []byte) (*Validator, error) {
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("openapi.json: %w", err)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableSchemaFormatValidation()); err != nil {
		return nil, fmt.Errorf("openapi.json is not a valid OpenAPI 3 document: %w", err)
	}
	v := &Validator{doc: doc, paths: http.NewServeMux()}
	for _, p := range doc.Paths.InMatchingOrder() {
		names := wildcard.FindAllStringSubmatch(p, -1)
		v.paths.HandleFunc(Pattern(p), func(w http.ResponseWriter, r *http.Request) {
			m := r.Context().Value(matchKey{}).(*match)
			m.path = p
			m.params = make(map[string]string, len(names))
			for _, n := range names {
				m.params[n[1]] = r.PathValue(n[1])
			}
		})
	}
	return v, nil
}

// Pattern returns the net/http pattern of an OpenAPI path: the same, but
// that a path ending in "/" matches itself alone ("/ui/{$}").
func Pattern(path string) string {
	if strings.HasSuffix(path, "/") {
		return path + "{$}"
	}
	return path
}

// Doc returns the document.
func (v *Validator) Doc() *openapi3.T { return v.doc }

type matchKey struct{}

type match struct {
	path   string
	params map[string]string
}

// find returns the document's path of r and its parameters, unescaped as
// the server's mux unescapes them; ok is false when r is on no path of
// the document.
func (v *Validator) find(r *http.Request) (path string, params map[string]string, ok bool) {
	m := &match{}
	probe := &http.Request{Method: http.MethodGet, URL: r.URL, Host: r.Host, Header: http.Header{}}
	v.paths.ServeHTTP(discard{}, probe.WithContext(context.WithValue(context.Background(), matchKey{}, m)))
	return m.path, m.params, m.path != ""
}

type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// operation returns the operation of r's method on path; HEAD is GET's.
func (v *Validator) operation(path, method string) *openapi3.Operation {
	item := v.doc.Paths.Value(path)
	if method == http.MethodHead {
		method = http.MethodGet
	}
	return item.GetOperation(method)
}

// Methods returns the methods the document lists for path, sorted.
func (v *Validator) Methods(path string) []string {
	var ms []string
	for m := range v.doc.Paths.Value(path).Operations() {
		ms = append(ms, m)
	}
	slices.Sort(ms)
	return ms
}

// input is the kin-openapi input for r with body on path's operation.
func (v *Validator) input(r *http.Request, body []byte, path string, params map[string]string, op *openapi3.Operation) *openapi3filter.RequestValidationInput {
	req := r.Clone(context.Background())
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	if len(body) > 0 && op.RequestBody != nil && len(op.RequestBody.Value.Content) == 1 {
		// The server reads a body without a Content-Type as the one
		// media type the route takes, and a JSON body of any +json type
		// as JSON (docs/API.md, "Content-Type").
		for ct := range op.RequestBody.Value.Content {
			mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
			if mt == "" || ct == "application/json" && strings.HasSuffix(mt, "+json") {
				req.Header.Set("Content-Type", ct)
			}
		}
	}
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	return &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: params,
		Route: &routers.Route{Spec: v.doc, Server: nil, Path: path, PathItem: v.doc.Paths.Value(path),
			Method: method, Operation: op},
		Options: options(&openapi3filter.Options{
			AuthenticationFunc:  openapi3filter.NoopAuthenticationFunc, // the server has tokens or not: the test's business
			SkipSettingDefaults: true,
		}),
	}
}

// options completes o with what every check uses: formats checked, and
// schema errors said in a line (where and why) rather than with the
// schema and the value dumped.
func options(o *openapi3filter.Options) *openapi3filter.Options {
	o.SchemaValidationOptions = []openapi3.SchemaValidationOption{openapi3.EnableFormatValidation()}
	o.WithCustomSchemaErrorFunc(func(err *openapi3.SchemaError) string {
		return fmt.Sprintf("at /%s: %s", strings.Join(err.JSONPointer(), "/"), err.Reason)
	})
	return o
}

// CheckRequest returns the document's verdict on a request with body: nil
// when it allows it, else why not.
func (v *Validator) CheckRequest(r *http.Request, body []byte) error {
	path, params, ok := v.find(r)
	if !ok {
		return fmt.Errorf("%s is on no path of the document", r.URL.EscapedPath())
	}
	op := v.operation(path, r.Method)
	if op == nil {
		return fmt.Errorf("%s %s: the document has no such operation", r.Method, path)
	}
	return openapi3filter.ValidateRequest(context.Background(), v.input(r, body, path, params, op))
}

// Exchange is one request and its reply, as a test saw them.
type Exchange struct {
	Request *http.Request
	// Body is the request's body; BodyComplete says that the server read
	// it to its end (one refused early, 413 say, leaves it unread).
	Body         []byte
	BodyComplete bool
	Status       int
	Header       http.Header
	// Reply is the reply's body; ReplyComplete is false when only its
	// start was kept (a stream, or a large export).
	Reply         []byte
	ReplyComplete bool
}

// Check returns what in e the document does not allow, or nil.
func (v *Validator) Check(e Exchange) error {
	r := e.Request
	name := r.Method + " " + r.URL.RequestURI()
	path, params, ok := v.find(r)
	if !ok {
		if e.Status/100 != 4 {
			return fmt.Errorf("%s: status %d on a path outside the document: want a 4xx", name, e.Status)
		}
		return v.checkError(name, e)
	}
	op := v.operation(path, r.Method)
	if op == nil {
		return v.checkNoMethod(name, path, e)
	}
	in := v.input(r, e.Body, path, params, op)
	var reqErr error
	if e.BodyComplete {
		reqErr = openapi3filter.ValidateRequest(context.Background(), in)
	}
	if reqErr != nil && e.Status/100 != 4 {
		return fmt.Errorf("%s: the document refuses the request (%v), but the server answered %d: want a 4xx", name, reqErr, e.Status)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 e.Status,
		Header:                 e.Header,
		Body:                   io.NopCloser(bytes.NewReader(e.Reply)),
		Options: options(&openapi3filter.Options{
			IncludeResponseStatus: true,
			ExcludeResponseBody:   r.Method == http.MethodHead || !e.ReplyComplete && !isText(e.Header),
		}),
	}
	if e.Status == http.StatusNotModified {
		return nil // ServeContent's answer to If-None-Match: no body, as the document says
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return fmt.Errorf("%s: reply %d does not match the document: %w", name, e.Status, err)
	}
	return nil
}

// isText reports whether a reply is a stream of text, whose start the
// document's string schema checks as well as the whole.
func isText(h http.Header) bool {
	ct := h.Get("Content-Type")
	return strings.HasPrefix(ct, "text/") || strings.HasPrefix(ct, "application/x-ndjson")
}

// checkNoMethod checks the reply to a method path does not serve: 405
// with Allow listing the document's methods, or the token's 401 or 429
// first.
func (v *Validator) checkNoMethod(name, path string, e Exchange) error {
	switch e.Status {
	case http.StatusUnauthorized, http.StatusTooManyRequests:
	case http.StatusMethodNotAllowed:
		if got, want := e.Header.Get("Allow"), strings.Join(v.Methods(path), ", "); got != want {
			return fmt.Errorf("%s: Allow %q, but the document lists %q", name, got, want)
		}
	default:
		return fmt.Errorf("%s: status %d on a method the document does not list for %s: want 405", name, e.Status, path)
	}
	return v.checkError(name, e)
}

// checkError checks that e's reply is the API's error body.
func (v *Validator) checkError(name string, e Exchange) error {
	if !e.ReplyComplete {
		return fmt.Errorf("%s: an error reply of %d bytes and more", name, len(e.Reply))
	}
	if ct := e.Header.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("%s: error reply %d with Content-Type %q, want application/json", name, e.Status, ct)
	}
	var body any
	if err := json.Unmarshal(e.Reply, &body); err != nil {
		return fmt.Errorf("%s: error reply %d is not JSON: %v", name, e.Status, err)
	}
	if err := v.doc.Components.Schemas["Error"].Value.VisitJSON(body); err != nil {
		return fmt.Errorf("%s: error reply %d is not the API's error body: %v", name, e.Status, err)
	}
	return nil
}

// maxKept bounds what Handler keeps of a body: the API's bodies are far
// smaller; streams and exports are checked by their start.
const maxKept = 8 << 20

// Handler returns h, every exchange of which is checked once h has
// answered, each violation failing tb. Put it right around the server,
// inside anything that stands for a proxy or a network.
func (v *Validator) Handler(tb testing.TB, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := &teeBody{}
		if r.Body != nil && r.Body != http.NoBody {
			in.ReadCloser = r.Body
			r2 := *r
			r2.Body = in
			r = &r2
		} else {
			in.done = true
		}
		out := &recorder{ResponseWriter: w}
		h.ServeHTTP(out, r)
		if out.status == 0 {
			out.status = http.StatusOK
		}
		e := Exchange{Request: r, Body: in.kept.Bytes(), BodyComplete: in.done && !in.cut,
			Status: out.status, Header: out.header, Reply: out.kept.Bytes(), ReplyComplete: !out.cut}
		if e.Header == nil {
			e.Header = w.Header().Clone()
		}
		if err := v.Check(e); err != nil {
			tb.Errorf("openapi: %v", err)
		}
	})
}

// teeBody keeps what the server reads of a request body.
type teeBody struct {
	io.ReadCloser
	kept bytes.Buffer
	done bool // read to EOF
	cut  bool // more than maxKept
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	keep(&t.kept, &t.cut, p[:n])
	if err == io.EOF {
		t.done = true
	}
	return n, err
}

func keep(buf *bytes.Buffer, cut *bool, p []byte) {
	if room := maxKept - buf.Len(); room < len(p) {
		p = p[:max(room, 0)]
		*cut = true
	}
	buf.Write(p)
}

// recorder keeps a reply's status, headers and body as the server writes
// them through.
type recorder struct {
	http.ResponseWriter
	status int
	header http.Header
	kept   bytes.Buffer
	cut    bool
}

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
		w.header = w.ResponseWriter.Header().Clone()
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	keep(&w.kept, &w.cut, p)
	return w.ResponseWriter.Write(p)
}

// Flush and Unwrap let the server flush streams and set deadlines through
// the recorder (http.ResponseController).
func (w *recorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Proxy returns a reverse proxy to target whose every exchange is
// checked, for a server in another process (the built binary). It passes
// streams on as they come.
func (v *Validator) Proxy(tb testing.TB, target *url.URL) http.Handler {
	p := httputil.NewSingleHostReverseProxy(target)
	p.FlushInterval = -1
	return v.Handler(tb, p)
}
