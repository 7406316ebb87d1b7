package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/collection"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/internal/openapitest"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/postgres"
	"github.com/shardcounter/shardcounter/transfer"
)

// Env is a running server over the real engine on a bolt store in a
// temporary directory, with a client for it.
type Env struct {
	URL     string
	Client  *shttp.Client
	Service shardcounter.CounterService
	Logs    *syncBuffer
	Server  *shttp.Server
}

// EnvOptions vary the server under test.
type EnvOptions struct {
	Server       shttp.ServerOptions
	NoAutoCreate bool
	// Async serves an engine that answers writes once queued, and tells
	// the server so.
	Async bool
	// Wrap, when set, wraps the engine before it is served, to inject
	// failures.
	Wrap func(shardcounter.CounterService) shardcounter.CounterService
	// Front, when set, wraps the server's handler: a stand-in for what
	// sits between a client and the server (a proxy, a network that drops
	// replies). The server and the engine behind it stay real.
	Front func(http.Handler) http.Handler
	// Postgres serves the engine over a PostgreSQL store on a fresh
	// database of the test server (internal/pgtest) instead of bolt.
	Postgres bool
	// All serves every route of the table: the collections and the admin
	// endpoints too, on the same store.
	All bool
}

// MustServe starts a server, stopped at the end of the test.
func MustServe(tb testing.TB, opts EnvOptions) *Env {
	tb.Helper()
	var store shardcounter.CounterStore
	var err error
	if opts.Postgres {
		store, err = postgres.Open(context.Background(), pgtest.MustDatabase(tb), postgres.Options{})
	} else {
		store, err = bolt.Open(context.Background(), filepath.Join(tb.TempDir(), "shardcounter.db"), bolt.Options{})
	}
	if err != nil {
		tb.Fatal(err)
	}
	svc, closeSvc := newService(tb, store, serviceOptions{NoAutoCreate: opts.NoAutoCreate, Async: opts.Async})
	opts.Server.AsyncWrites = opts.Async
	if opts.Wrap != nil {
		svc = opts.Wrap(svc)
	}
	logs := &syncBuffer{}
	if opts.Server.Logger == nil {
		opts.Server.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if opts.All {
		var cs shardcounter.CollectionStore
		switch s := store.(type) {
		case *bolt.CounterStore:
			cs, err = s.Collections()
		case *postgres.CounterStore:
			cs = s.Collections()
		}
		if err != nil {
			tb.Fatal(err)
		}
		opts.Server.Collections = collection.New(cs, collection.Config{})
		opts.Server.Admin = transfer.Admin(store, opts.Server.Logger)
	}
	srv := shttp.NewServer(svc, opts.Server)
	h := Checked(tb, srv)
	if opts.Front != nil {
		h = opts.Front(h)
	}
	ts := httptest.NewServer(h)
	tb.Cleanup(func() {
		ts.Close()
		closeSvc()
		store.Close()
	})
	return &Env{URL: ts.URL, Client: shttp.NewClient(ts.URL), Service: svc, Logs: logs, Server: srv}
}

// Checked wraps a server's handler so that every request of the test and
// its reply are checked against the OpenAPI document (openapi.json): a
// reply it does not allow, or a request it refuses that is not answered
// 4xx, fails the test.
func Checked(tb testing.TB, h http.Handler) http.Handler {
	return openapitest.MustNew(tb).Handler(tb, h)
}

// syncBuffer is a bytes.Buffer safe for the server's concurrent logging.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Reply is an HTTP reply, read in full.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends a request with a JSON body (none when body is "") and returns
// the reply. Headers come in name, value pairs.
func (e *Env) Do(tb testing.TB, method, path, body string, headers ...string) Reply {
	tb.Helper()
	return do(tb, method, e.URL+path, body, headers...)
}

// do is Env.Do for a whole URL.
func do(tb testing.TB, method, url, body string, headers ...string) Reply {
	tb.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		tb.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return Reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// MustOK checks the status and decodes the JSON body into v (if not nil).
func (r Reply) MustOK(tb testing.TB, status int, v any) {
	tb.Helper()
	if r.Status != status {
		tb.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	if v != nil {
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			tb.Fatalf("Content-Type %q, want application/json", ct)
		}
		dec := json.NewDecoder(bytes.NewReader(r.Body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			tb.Fatalf("decode %s: %v", r.Body, err)
		}
	}
}

// MustError checks that the reply is the API's error body with the given
// status and code, and returns its message.
func (r Reply) MustError(tb testing.TB, status int, code string) string {
	tb.Helper()
	if r.Status != status {
		tb.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		tb.Fatalf("Content-Type %q, want application/json", ct)
	}
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		tb.Fatalf("error body %s: %v", r.Body, err)
	}
	if body.Error.Code != code {
		tb.Fatalf("code %q, want %q; message %q", body.Error.Code, code, body.Error.Message)
	}
	if body.Error.Message == "" {
		tb.Fatalf("empty error message")
	}
	return body.Error.Message
}

// MustCreate creates a counter through the API.
func (e *Env) MustCreate(tb testing.TB, id string, shards int) {
	tb.Helper()
	if _, _, err := e.Client.CreateCounter(context.Background(), id, shardcounter.CreateOptions{Shards: shards}); err != nil {
		tb.Fatal(err)
	}
}

// MustWrite adds delta to a counter through the API.
func (e *Env) MustWrite(tb testing.TB, id string, delta int64) {
	tb.Helper()
	if _, err := e.Client.WriteCounter(context.Background(), shardcounter.Write{Counter: id, Delta: delta}); err != nil {
		tb.Fatal(err)
	}
}

// MustValue reads a counter's strong value through the API.
func (e *Env) MustValue(tb testing.TB, id string) int64 {
	tb.Helper()
	r, err := e.Client.ReadCounter(context.Background(), id, shardcounter.Strong)
	if err != nil {
		tb.Fatal(err)
	}
	return r.Value
}

func path(id string) string { return "/v1/counters/" + shttp.EscapeID(id) }

// TestBodies checks the strict reading of request bodies on every route
// that takes one.
func TestBodies(t *testing.T) {
	e := MustServe(t, EnvOptions{Server: shttp.ServerOptions{MaxBodyBytes: 256}})
	e.MustCreate(t, "b", 2)
	routes := []struct{ method, path, good string }{
		{"PUT", path("new"), `{"shards":2}`},
		{"POST", path("b") + "/increment", `{"by":1}`},
		{"POST", path("b") + "/decrement", `{"by":1}`},
		{"PATCH", path("b"), `{"shards":2}`},
		{"POST", "/v1/writes", `{"writes":[{"counter":"b","delta":1}]}`},
	}
	for _, rt := range routes {
		t.Run(rt.method+rt.path, func(t *testing.T) {
			for name, body := range map[string]string{
				"UnknownField": strings.TrimSuffix(rt.good, "}") + `,"bogus":1}`,
				"Trailing":     rt.good + `{}`,
				"TrailingJunk": rt.good + ` x`,
				"NotObject":    `[` + rt.good + `]`,
				"Null":         `null`,
				"Truncated":    rt.good[:len(rt.good)-1],
				"Syntax":       `{"shards":}`,
				"NotUTF8":      strings.TrimSuffix(rt.good, "}") + `,"x":"` + "\xff" + `"}`,
			} {
				msg := e.Do(t, rt.method, rt.path, body).MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
				if name == "UnknownField" && !strings.Contains(msg, `"bogus"`) {
					t.Fatalf("message %q does not name the field", msg)
				}
			}
			e.Do(t, rt.method, rt.path, `{"pad":"`+strings.Repeat("x", 300)+`"}`).
				MustError(t, http.StatusRequestEntityTooLarge, shardcounter.ETOOLARGE)
			e.Do(t, rt.method, rt.path, rt.good, "Content-Type", "text/plain").
				MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
			e.Do(t, rt.method, rt.path, rt.good, "Content-Type", "application/x-www-form-urlencoded").
				MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
			e.Do(t, rt.method, rt.path, rt.good, "Content-Type", "application/json; charset=latin1").
				MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
			e.Do(t, rt.method, rt.path, rt.good+"?x=1", "Content-Type", "application/json").
				MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
		})
	}
	t.Run("ContentTypeAccepted", func(t *testing.T) {
		for _, ct := range []string{"application/json", "application/json; charset=UTF-8", "application/merge-patch+json", ""} {
			e.Do(t, "POST", path("b")+"/increment", `{"by":1}`, "Content-Type", ct).MustOK(t, http.StatusOK, nil)
		}
	})
	// Every refused request above changed nothing.
	if got := e.MustValue(t, "b"); got != 4 {
		t.Fatalf("value %d, want 4 from the accepted increments", got)
	}
	if _, err := e.Client.ReadCounter(context.Background(), "new", ""); !errors.Is(err, shardcounter.ErrNotFound) {
		t.Fatalf("refused create made a counter: %v", err)
	}
}

func TestRoutes(t *testing.T) {
	e := MustServe(t, EnvOptions{})
	t.Run("MethodNotAllowed", func(t *testing.T) {
		for _, c := range []struct{ method, path, allow string }{
			{"POST", path("x"), "DELETE, GET, PATCH, PUT"},
			{"GET", path("x") + "/increment", "POST"},
			{"PUT", "/v1/counters", "GET"},
			{"GET", "/v1/writes", "POST"},
			{"POST", "/healthz", "GET"},
		} {
			r := e.Do(t, c.method, c.path, "")
			r.MustError(t, http.StatusMethodNotAllowed, shardcounter.EINVALID)
			if got := r.Header.Get("Allow"); got != c.allow {
				t.Fatalf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
			}
		}
	})
	t.Run("NotFound", func(t *testing.T) {
		for _, p := range []string{"/", "/v2/counters", "/v1/counters/x/nosuch", "/v1/counters/x/"} {
			e.Do(t, "GET", p, "").MustError(t, http.StatusNotFound, shardcounter.ENOTFOUND)
		}
	})
	t.Run("RequestID", func(t *testing.T) {
		if got := e.Do(t, "GET", "/healthz", "", "X-Request-Id", "abc-123").Header.Get("X-Request-Id"); got != "abc-123" {
			t.Fatalf("X-Request-Id %q, want the client's", got)
		}
		if got := e.Do(t, "GET", "/healthz", "").Header.Get("X-Request-Id"); got == "" {
			t.Fatal("no X-Request-Id")
		}
	})
}

func TestHealth(t *testing.T) {
	e := MustServe(t, EnvOptions{})
	e.Do(t, "GET", "/healthz", "").MustOK(t, http.StatusOK, nil)
	e.Do(t, "GET", "/readyz", "").MustOK(t, http.StatusOK, nil)
	if err := e.Client.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Run("NotReady", func(t *testing.T) {
		e := MustServe(t, EnvOptions{Server: shttp.ServerOptions{
			Ping: func(context.Context) error { return errors.New("connection refused") },
		}})
		r := e.Do(t, "GET", "/readyz", "")
		r.MustError(t, http.StatusServiceUnavailable, shardcounter.EUNAVAILABLE)
		if r.Header.Get("Retry-After") == "" {
			t.Fatal("503 without Retry-After")
		}
		e.Do(t, "GET", "/healthz", "").MustOK(t, http.StatusOK, nil)
		if err := e.Client.Ping(context.Background()); !errors.Is(err, shardcounter.ErrUnavailable) {
			t.Fatalf("Ping: %v, want ErrUnavailable", err)
		}
	})
}

// failing is a CounterService whose writes and reads fail with err.
type failing struct {
	shardcounter.CounterService
	err error
}

func (f failing) ReadCounter(context.Context, string, shardcounter.Consistency) (*shardcounter.Reading, error) {
	return nil, f.err
}

func (f failing) WriteCounter(context.Context, shardcounter.Write) (*shardcounter.WriteResult, error) {
	return nil, f.err
}

func TestServiceErrors(t *testing.T) {
	t.Run("Unavailable", func(t *testing.T) {
		e := MustServe(t, EnvOptions{Wrap: func(s shardcounter.CounterService) shardcounter.CounterService {
			return failing{s, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "store down: retry later")}
		}})
		r := e.Do(t, "POST", path("x")+"/increment", "")
		if got := r.MustError(t, http.StatusServiceUnavailable, shardcounter.EUNAVAILABLE); got != "store down: retry later" {
			t.Fatalf("message %q", got)
		}
		if got := r.Header.Get("Retry-After"); got != "1" {
			t.Fatalf("Retry-After %q, want 1", got)
		}
		_, err := e.Client.WriteCounter(context.Background(), shardcounter.Write{Counter: "x", Delta: 1})
		if !errors.Is(err, shardcounter.ErrUnavailable) || shardcounter.IsOutcomeUnknown(err) {
			t.Fatalf("client error %#v, want unavailable with a known outcome", err)
		}
	})
	t.Run("OutcomeUnknown", func(t *testing.T) {
		e := MustServe(t, EnvOptions{Wrap: func(s shardcounter.CounterService) shardcounter.CounterService {
			return failing{s, &shardcounter.Error{Code: shardcounter.EUNAVAILABLE, Message: "commit timed out", OutcomeUnknown: true}}
		}})
		e.Do(t, "POST", path("x")+"/increment", "").MustError(t, http.StatusGatewayTimeout, shardcounter.EOUTCOMEUNKNOWN)
		_, err := e.Client.WriteCounter(context.Background(), shardcounter.Write{Counter: "x", Delta: 1})
		if !shardcounter.IsOutcomeUnknown(err) {
			t.Fatalf("client error %#v, want outcome unknown", err)
		}
	})
	t.Run("Internal", func(t *testing.T) {
		e := MustServe(t, EnvOptions{Wrap: func(s shardcounter.CounterService) shardcounter.CounterService {
			return failing{s, errors.New("secret detail: disk on fire")}
		}})
		r := e.Do(t, "GET", path("x"), "", "X-Request-Id", "trace-42")
		msg := r.MustError(t, http.StatusInternalServerError, shardcounter.EINTERNAL)
		if strings.Contains(msg, "secret") || !strings.Contains(msg, "trace-42") {
			t.Fatalf("message %q leaks the cause or lacks the request id", msg)
		}
		if logs := e.Logs.String(); !strings.Contains(logs, "trace-42") || !strings.Contains(logs, "disk on fire") {
			t.Fatalf("log %q lacks the request id or the cause", logs)
		}
	})
}

func TestAuth(t *testing.T) {
	e := MustServe(t, EnvOptions{Server: shttp.ServerOptions{AuthTokens: []string{"s3cret", "other-token"}}})
	for _, h := range []string{"", "Bearer", "Bearer ", "Bearer wrong", "Bearer s3cre", "Bearer s3cret2", "Basic s3cret", "s3cret"} {
		r := e.Do(t, "PUT", path("a"), `{}`, "Authorization", h)
		r.MustError(t, http.StatusUnauthorized, shardcounter.EUNAUTHENTICATED)
		if r.Header.Get("WWW-Authenticate") == "" {
			t.Fatal("401 without WWW-Authenticate")
		}
	}
	e.Do(t, "GET", "/v1/counters", "").MustError(t, http.StatusUnauthorized, shardcounter.EUNAUTHENTICATED)
	e.Do(t, "GET", "/healthz", "").MustOK(t, http.StatusOK, nil)
	e.Do(t, "GET", "/readyz", "").MustOK(t, http.StatusOK, nil)
	e.Do(t, "PUT", path("a"), `{}`, "Authorization", "Bearer other-token").MustOK(t, http.StatusCreated, nil)

	if _, err := e.Client.ReadCounter(context.Background(), "a", ""); !errors.Is(err, &shardcounter.Error{Code: shardcounter.EUNAUTHENTICATED}) {
		t.Fatalf("client without token: %v, want unauthenticated", err)
	}
	e.Client.Token = "s3cret"
	if _, err := e.Client.ReadCounter(context.Background(), "a", ""); err != nil {
		t.Fatal(err)
	}
}

// snapshot is every counter with its shard count and strong value.
func (e *Env) snapshot(tb testing.TB) string {
	tb.Helper()
	list, err := e.Service.ListCounters(context.Background(), shardcounter.ListOptions{Limit: 1000})
	if err != nil {
		tb.Fatal(err)
	}
	var b strings.Builder
	for _, c := range list.Counters {
		r, err := e.Service.ReadCounter(context.Background(), c.ID, shardcounter.Strong)
		if err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(&b, "%s shards=%d value=%d\n", c.ID, r.Shards, r.Value)
	}
	return b.String()
}

// TestErrorsChangeNothing sends a refused request of every kind and checks
// that the data is exactly as before: SPEC.md's "a request that gets an
// error changes nothing".
func TestErrorsChangeNothing(t *testing.T) {
	e := MustServe(t, EnvOptions{Server: shttp.ServerOptions{MaxBodyBytes: 512, MaxBatch: 3}})
	e.MustCreate(t, "a", 4)
	e.MustCreate(t, "b", 2)
	e.MustWrite(t, "a", 10)
	e.MustWrite(t, "b", -5)
	e.Do(t, "POST", path("a")+"/increment", `{"request_id":"once"}`).MustOK(t, http.StatusOK, nil)
	before := e.snapshot(t)

	bad := []struct {
		method, path, body string
		status             int
	}{
		{"PUT", path("a"), `{"shards":8}`, http.StatusConflict},
		{"PUT", path("c"), `{"shards":0}`, http.StatusBadRequest},
		{"PUT", path("c"), `{"shards":2,"x":1}`, http.StatusBadRequest},
		{"PUT", path("c") + "?shards=2", `{}`, http.StatusBadRequest},
		{"POST", path("a") + "/increment", `{"by":0}`, http.StatusBadRequest},
		{"POST", path("a") + "/increment", `{"by":5}{"by":5}`, http.StatusBadRequest},
		{"POST", path("a") + "/decrement", `{"by":-5}`, http.StatusBadRequest},
		{"POST", path("a") + "/increment", `{"by":9223372036854775807}`, http.StatusBadRequest}, // out_of_range
		{"POST", path("new") + "/increment", `{"by":1,"bogus":true}`, http.StatusBadRequest},
		{"POST", path("new\x01") + "/increment", `{}`, http.StatusBadRequest},
		{"POST", path("a") + "/increment", `{"pad":"` + strings.Repeat("x", 600) + `"}`, http.StatusRequestEntityTooLarge},
		{"PATCH", path("a"), `{"shards":2000}`, http.StatusBadRequest},
		{"PATCH", path("a"), `{}`, http.StatusBadRequest},
		{"DELETE", path("a") + "?force=1", "", http.StatusBadRequest},
		{"POST", path("a"), `{}`, http.StatusMethodNotAllowed},
		{"POST", "/v1/writes", `{"writes":[{"counter":"a","delta":1},{"counter":"b","delta":0}]}`, http.StatusBadRequest},
		{"POST", "/v1/writes", `{"writes":[{"counter":"a","delta":1},{"counter":"new","delta":1,"request_id":""},{"counter":"","delta":1}]}`, http.StatusBadRequest},
		{"POST", "/v1/writes", `{"writes":[{"counter":"a","delta":1},{"counter":"a","delta":1},{"counter":"a","delta":1},{"counter":"a","delta":1}]}`, http.StatusRequestEntityTooLarge},
		{"POST", "/v1/writes", `{"writes":[{"counter":"a","delta":1}]} trailing`, http.StatusBadRequest},
	}
	for _, b := range bad {
		if r := e.Do(t, b.method, b.path, b.body); r.Status != b.status {
			t.Fatalf("%s %s %s: status %d, want %d; body %s", b.method, b.path, b.body, r.Status, b.status, r.Body)
		}
	}
	// A duplicate is a success that changes nothing, too.
	e.Do(t, "POST", path("a")+"/increment", `{"request_id":"once"}`).MustOK(t, http.StatusOK, nil)

	if after := e.snapshot(t); after != before {
		t.Fatalf("refused requests changed the data:\nbefore:\n%safter:\n%s", before, after)
	}
}
