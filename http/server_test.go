package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	shttp "github.com/shardcounter/shardcounter/http"
)

// Env is a running server over the real engine on a bolt store in a
// temporary directory, with a client for it.
type Env struct {
	URL     string
	Client  *shttp.Client
	Service shardcounter.CounterService
	Logs    *syncBuffer
}

// EnvOptions vary the server under test.
type EnvOptions struct {
	Server       shttp.ServerOptions
	NoAutoCreate bool
	// Wrap, when set, wraps the engine before it is served, to inject
	// failures.
	Wrap func(shardcounter.CounterService) shardcounter.CounterService
}

// MustServe starts a server, stopped at the end of the test.
func MustServe(tb testing.TB, opts EnvOptions) *Env {
	tb.Helper()
	store, err := bolt.Open(context.Background(), filepath.Join(tb.TempDir(), "shardcounter.db"), bolt.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	svc, closeSvc := newService(tb, store, !opts.NoAutoCreate)
	if opts.Wrap != nil {
		svc = opts.Wrap(svc)
	}
	logs := &syncBuffer{}
	if opts.Server.Logger == nil {
		opts.Server.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	ts := httptest.NewServer(shttp.NewServer(svc, opts.Server))
	tb.Cleanup(func() {
		ts.Close()
		closeSvc()
		store.Close()
	})
	return &Env{URL: ts.URL, Client: shttp.NewClient(ts.URL), Service: svc, Logs: logs}
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
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.URL+path, r)
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

func TestCreate(t *testing.T) {
	e := MustServe(t, EnvOptions{})
	t.Run("OK", func(t *testing.T) {
		r := e.Do(t, "PUT", path("likes"), `{"shards":8}`)
		var c shardcounter.Counter
		r.MustOK(t, http.StatusCreated, &c)
		if c.ID != "likes" || c.Shards != 8 || c.CreatedAt.IsZero() {
			t.Fatalf("got %+v, want likes with 8 shards and a created_at", c)
		}
		if got, want := r.Header.Get("Location"), "/v1/counters/likes"; got != want {
			t.Fatalf("Location %q, want %q", got, want)
		}
		var raw map[string]any
		json.Unmarshal(r.Body, &raw)
		if _, err := time.Parse(time.RFC3339Nano, raw["created_at"].(string)); err != nil {
			t.Fatalf("created_at: %v", err)
		}
	})
	t.Run("Default", func(t *testing.T) {
		for _, body := range []string{"", "{}", " { } \n"} {
			id := fmt.Sprintf("default-%d", len(body))
			var c shardcounter.Counter
			e.Do(t, "PUT", path(id), body).MustOK(t, http.StatusCreated, &c)
			if c.Shards != 16 {
				t.Fatalf("body %q: shards %d, want the default 16", body, c.Shards)
			}
		}
	})
	t.Run("Audience", func(t *testing.T) {
		var c shardcounter.Counter
		e.Do(t, "PUT", path("audience"), `{"followers_count":1000000,"visibility":"public"}`).MustOK(t, http.StatusCreated, &c)
		if err := shardcounter.ValidateShards(c.Shards); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ErrExists", func(t *testing.T) {
		e.Do(t, "PUT", path("dup"), `{}`).MustOK(t, http.StatusCreated, nil)
		e.Do(t, "PUT", path("dup"), `{"shards":4}`).MustError(t, http.StatusConflict, shardcounter.EEXISTS)
	})
	t.Run("ErrShards", func(t *testing.T) {
		for _, body := range []string{
			`{"shards":0}`, `{"shards":-1}`, `{"shards":1025}`, `{"shards":1.5}`, `{"shards":"4"}`,
			`{"shards":99999999999999999999}`, `{"shards":4,"followers_count":10}`,
			`{"visibility":"secret"}`, `{"followers_count":-1}`,
		} {
			e.Do(t, "PUT", path("bad-shards"), body).MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
		}
		e.Do(t, "GET", path("bad-shards"), "").MustError(t, http.StatusNotFound, shardcounter.ENOTFOUND)
	})
	t.Run("Boundaries", func(t *testing.T) {
		e.Do(t, "PUT", path("one"), `{"shards":1}`).MustOK(t, http.StatusCreated, nil)
		e.Do(t, "PUT", path("max"), `{"shards":1024}`).MustOK(t, http.StatusCreated, nil)
	})
}

// TestIDs checks that ids survive the trip through the URL path: the
// client escapes them, the server unescapes one segment.
func TestIDs(t *testing.T) {
	e := MustServe(t, EnvOptions{})
	ids := []string{
		"a/b", "a/b/increment", "with space", "100%", "%2F", "é☃日本", "a?b#c", "a+b", "..", ".", "-",
		"emoji 🎉", strings.Repeat("x", 256), strings.Repeat("é", 128), "trailing/",
	}
	for _, id := range ids {
		t.Run(id[:min(len(id), 20)], func(t *testing.T) {
			var c shardcounter.Counter
			e.Do(t, "PUT", path(id), `{"shards":2}`).MustOK(t, http.StatusCreated, &c)
			if c.ID != id {
				t.Fatalf("created id %q, want %q", c.ID, id)
			}
			var wr shardcounter.WriteResult
			e.Do(t, "POST", path(id)+"/increment", `{"by":3}`).MustOK(t, http.StatusOK, &wr)
			if wr.Counter != id || !wr.Applied {
				t.Fatalf("write result %+v", wr)
			}
			if got := e.MustValue(t, id); got != 3 {
				t.Fatalf("value %d, want 3", got)
			}
			list, err := e.Client.ListCounters(context.Background(), shardcounter.ListOptions{Prefix: id})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Counters) == 0 || list.Counters[0].ID != id {
				t.Fatalf("list with prefix %q: %+v", id, list.Counters)
			}
			e.Do(t, "DELETE", path(id), "").MustOK(t, http.StatusNoContent, nil)
		})
	}
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, p := range []string{
			"/v1/counters/",                                  // empty
			"/v1/counters/a%00b",                             // NUL
			"/v1/counters/a%0Ab",                             // newline
			"/v1/counters/a%7Fb",                             // DEL
			"/v1/counters/a%C2%85b",                          // NEL, a C1 control
			"/v1/counters/%FF%FE",                            // not UTF-8
			"/v1/counters/" + strings.Repeat("x", 257),       // too long
			"/v1/counters/" + strings.Repeat("é", 128) + "x", // 257 bytes
		} {
			e.Do(t, "PUT", p, `{}`).MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
			e.Do(t, "GET", p, "").MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
		}
		list, err := e.Client.ListCounters(context.Background(), shardcounter.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Counters) != 0 {
			t.Fatalf("invalid ids created counters: %+v", list.Counters)
		}
	})
	t.Run("DotSegments", func(t *testing.T) {
		for _, p := range []string{"/v1/counters/.", "/v1/counters/..", "/v1/counters//increment", "/v1/counters/a/../b", "//v1/counters"} {
			for _, method := range []string{"GET", "PUT", "POST"} {
				e.Do(t, method, p, "").MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
			}
		}
	})
	t.Run("UnescapedSlash", func(t *testing.T) {
		msg := e.Do(t, "GET", "/v1/counters/a/b", "").MustError(t, http.StatusNotFound, shardcounter.ENOTFOUND)
		if !strings.Contains(msg, "%2F") {
			t.Fatalf("message %q does not say to escape '/'", msg)
		}
	})
}

func TestGet(t *testing.T) {
	e := MustServe(t, EnvOptions{})
	e.MustCreate(t, "views", 4)
	e.MustWrite(t, "views", 42)
	t.Run("Strong", func(t *testing.T) {
		for _, q := range []string{"", "?consistency=strong"} {
			var r shardcounter.Reading
			e.Do(t, "GET", path("views")+q, "").MustOK(t, http.StatusOK, &r)
			if r.ID != "views" || r.Value != 42 || r.Shards != 4 || r.Consistency != shardcounter.Strong || r.AsOf.IsZero() {
				t.Fatalf("got %+v", r)
			}
			if bytes.Contains(e.Do(t, "GET", path("views")+q, "").Body, []byte("max_staleness_ms")) {
				t.Fatal("strong reading has max_staleness_ms")
			}
		}
	})
	t.Run("Cached", func(t *testing.T) {
		var r shardcounter.Reading
		e.Do(t, "GET", path("views")+"?consistency=cached", "").MustOK(t, http.StatusOK, &r)
		if r.Consistency != shardcounter.Cached || r.MaxStalenessMS <= 0 {
			t.Fatalf("got %+v, want a cached reading with max_staleness_ms", r)
		}
		if r.Value < 0 || r.Value > 42 {
			t.Fatalf("cached value %d outside what was written", r.Value)
		}
	})
	t.Run("HEAD", func(t *testing.T) {
		e.Do(t, "HEAD", path("views"), "").MustOK(t, http.StatusOK, nil)
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		e.Do(t, "GET", path("nope"), "").MustError(t, http.StatusNotFound, shardcounter.ENOTFOUND)
	})
	t.Run("ErrConsistency", func(t *testing.T) {
		e.Do(t, "GET", path("views")+"?consistency=eventual", "").MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
		e.Do(t, "GET", path("views")+"?consistency=strong&consistency=cached", "").MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
	})
	t.Run("ErrUnknownParameter", func(t *testing.T) {
		msg := e.Do(t, "GET", path("views")+"?consistncy=cached", "").MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
		if !strings.Contains(msg, "consistncy") {
			t.Fatalf("message %q does not name the parameter", msg)
		}
	})
}

func TestIncrementDecrement(t *testing.T) {
	e := MustServe(t, EnvOptions{})
	e.MustCreate(t, "c", 4)
	t.Run("OK", func(t *testing.T) {
		var wr shardcounter.WriteResult
		e.Do(t, "POST", path("c")+"/increment", "").MustOK(t, http.StatusOK, &wr)
		if wr != (shardcounter.WriteResult{Counter: "c", Applied: true}) {
			t.Fatalf("got %+v", wr)
		}
		if got, want := string(e.Do(t, "POST", path("c")+"/increment", `{"by":10}`).Body), `{"counter":"c","applied":true}`+"\n"; got != want {
			t.Fatalf("body %q, want %q", got, want)
		}
		e.Do(t, "POST", path("c")+"/decrement", `{"by":4}`).MustOK(t, http.StatusOK, nil)
		e.Do(t, "POST", path("c")+"/decrement", `{}`).MustOK(t, http.StatusOK, nil)
		if got := e.MustValue(t, "c"); got != 1+10-4-1 {
			t.Fatalf("value %d, want 6", got)
		}
	})
	t.Run("Duplicate", func(t *testing.T) {
		before := e.MustValue(t, "c")
		var first, second shardcounter.WriteResult
		e.Do(t, "POST", path("c")+"/increment", `{"by":5,"request_id":"r-1"}`).MustOK(t, http.StatusOK, &first)
		e.Do(t, "POST", path("c")+"/increment", `{"by":5,"request_id":"r-1"}`).MustOK(t, http.StatusOK, &second)
		if !first.Applied || first.Duplicate {
			t.Fatalf("first %+v, want applied", first)
		}
		if second.Applied || !second.Duplicate {
			t.Fatalf("second %+v, want a duplicate", second)
		}
		if got := string(e.Do(t, "POST", path("c")+"/decrement", `{"by":5,"request_id":"r-1"}`).Body); got != `{"counter":"c","applied":false,"duplicate":true}`+"\n" {
			t.Fatalf("body %s", got)
		}
		if got, want := e.MustValue(t, "c"), before+5; got != want {
			t.Fatalf("value %d, want %d", got, want)
		}
	})
	t.Run("ErrBy", func(t *testing.T) {
		before := e.MustValue(t, "c")
		for _, body := range []string{
			`{"by":0}`, `{"by":-1}`, `{"by":1.5}`, `{"by":"5"}`, `{"by":9223372036854775808}`,
			`{"by":null,"x":1}`, `{"request_id":""}x`, `{"request_id":"a\u0001b"}`,
			`{"request_id":"` + strings.Repeat("r", 257) + `"}`, `{"delta":5}`,
		} {
			for _, op := range []string{"/increment", "/decrement"} {
				e.Do(t, "POST", path("c")+op, body).MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
			}
		}
		if got := e.MustValue(t, "c"); got != before {
			t.Fatalf("value %d after bad writes, want %d", got, before)
		}
	})
	t.Run("ErrOutOfRange", func(t *testing.T) {
		e.MustCreate(t, "big", 1)
		e.Do(t, "POST", path("big")+"/increment", fmt.Sprintf(`{"by":%d}`, int64(math.MaxInt64))).MustOK(t, http.StatusOK, nil)
		e.Do(t, "POST", path("big")+"/increment", `{"by":1}`).MustError(t, http.StatusBadRequest, shardcounter.EOUTOFRANGE)
		if got := e.MustValue(t, "big"); got != math.MaxInt64 {
			t.Fatalf("value %d, want MaxInt64", got)
		}
	})
	t.Run("AutoCreate", func(t *testing.T) {
		e.Do(t, "POST", path("fresh")+"/decrement", `{"by":2}`).MustOK(t, http.StatusOK, nil)
		if got := e.MustValue(t, "fresh"); got != -2 {
			t.Fatalf("value %d, want -2", got)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		e := MustServe(t, EnvOptions{NoAutoCreate: true})
		e.Do(t, "POST", path("ghost")+"/increment", `{}`).MustError(t, http.StatusNotFound, shardcounter.ENOTFOUND)
		e.Do(t, "GET", path("ghost"), "").MustError(t, http.StatusNotFound, shardcounter.ENOTFOUND)
	})
}

func TestReshard(t *testing.T) {
	e := MustServe(t, EnvOptions{})
	e.MustCreate(t, "r", 4)
	e.MustWrite(t, "r", 1000)
	t.Run("OK", func(t *testing.T) {
		for _, n := range []int{32, 1, 1024, 3} {
			var c shardcounter.Counter
			e.Do(t, "PATCH", path("r"), fmt.Sprintf(`{"shards":%d}`, n)).MustOK(t, http.StatusOK, &c)
			if c.ID != "r" || c.Shards != n {
				t.Fatalf("got %+v, want %d shards", c, n)
			}
			if got := e.MustValue(t, "r"); got != 1000 {
				t.Fatalf("value %d after reshard to %d, want 1000", got, n)
			}
		}
	})
	t.Run("ErrShards", func(t *testing.T) {
		for _, body := range []string{"", `{}`, `{"shards":0}`, `{"shards":1025}`, `{"shards":-3}`, `{"shards":2,"by":1}`, `[2]`} {
			e.Do(t, "PATCH", path("r"), body).MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
		}
		var rd shardcounter.Reading
		e.Do(t, "GET", path("r"), "").MustOK(t, http.StatusOK, &rd)
		if rd.Shards != 3 || rd.Value != 1000 {
			t.Fatalf("got %+v after bad reshards, want 3 shards and 1000", rd)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		e.Do(t, "PATCH", path("nope"), `{"shards":2}`).MustError(t, http.StatusNotFound, shardcounter.ENOTFOUND)
	})
}

func TestDelete(t *testing.T) {
	e := MustServe(t, EnvOptions{})
	e.MustCreate(t, "d", 2)
	e.MustWrite(t, "d", 7)
	r := e.Do(t, "DELETE", path("d"), "")
	r.MustOK(t, http.StatusNoContent, nil)
	if len(r.Body) != 0 {
		t.Fatalf("204 with body %q", r.Body)
	}
	e.Do(t, "GET", path("d"), "").MustError(t, http.StatusNotFound, shardcounter.ENOTFOUND)
	e.Do(t, "DELETE", path("d"), "").MustError(t, http.StatusNotFound, shardcounter.ENOTFOUND)
	// A new counter of the same id starts from 0.
	e.MustCreate(t, "d", 2)
	if got := e.MustValue(t, "d"); got != 0 {
		t.Fatalf("recreated counter has value %d, want 0", got)
	}
}

func TestList(t *testing.T) {
	e := MustServe(t, EnvOptions{})
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("page/%02d", i)
		e.MustCreate(t, id, 1)
		want = append(want, id)
	}
	e.MustCreate(t, "other", 1)
	t.Run("Pages", func(t *testing.T) {
		var got []string
		token, pages := "", 0
		for {
			q := "?prefix=page%2F&limit=3"
			if token != "" {
				q += "&page_token=" + token
			}
			var resp shttp.ListResponse
			e.Do(t, "GET", "/v1/counters"+q, "").MustOK(t, http.StatusOK, &resp)
			pages++
			for _, c := range resp.Counters {
				got = append(got, c.ID)
			}
			if resp.NextPageToken == "" {
				break
			}
			token = resp.NextPageToken
			if pages > 10 {
				t.Fatal("paging does not end")
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
	t.Run("All", func(t *testing.T) {
		var resp shttp.ListResponse
		e.Do(t, "GET", "/v1/counters", "").MustOK(t, http.StatusOK, &resp)
		if len(resp.Counters) != 8 || resp.NextPageToken != "" {
			t.Fatalf("got %d counters and token %q, want 8 and none", len(resp.Counters), resp.NextPageToken)
		}
	})
	t.Run("Empty", func(t *testing.T) {
		r := e.Do(t, "GET", "/v1/counters?prefix=zzz", "")
		r.MustOK(t, http.StatusOK, nil)
		if got := strings.TrimSpace(string(r.Body)); got != `{"counters":[]}` {
			t.Fatalf("body %s, want an empty array", got)
		}
	})
	t.Run("Client", func(t *testing.T) {
		var got []string
		opts := shardcounter.ListOptions{Prefix: "page/", Limit: 2}
		for {
			list, err := e.Client.ListCounters(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range list.Counters {
				got = append(got, c.ID)
			}
			if list.Next == "" {
				break
			}
			opts.After = list.Next
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
	t.Run("ErrPageToken", func(t *testing.T) {
		var first shttp.ListResponse
		e.Do(t, "GET", "/v1/counters?prefix=page%2F&limit=2", "").MustOK(t, http.StatusOK, &first)
		tok := first.NextPageToken
		for name, q := range map[string]string{
			"Garbage":     "?page_token=!!!",
			"Padded":      "?prefix=page%2F&page_token=" + tok + "%3D",
			"Truncated":   "?prefix=page%2F&page_token=" + tok[:len(tok)-2],
			"Tampered":    "?prefix=page%2F&page_token=B" + tok[1:],
			"OtherPrefix": "?prefix=pag&page_token=" + tok,
			"NoPrefix":    "?page_token=" + tok,
			"Twice":       "?prefix=page%2F&page_token=" + tok + "&page_token=" + tok,
		} {
			t.Run(name, func(t *testing.T) {
				msg := e.Do(t, "GET", "/v1/counters"+q, "").MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
				if !strings.Contains(msg, "page_token") {
					t.Fatalf("message %q does not name page_token", msg)
				}
			})
		}
	})
	t.Run("ErrLimit", func(t *testing.T) {
		for _, l := range []string{"0", "-1", "1001", "abc", "1.5", ""} {
			e.Do(t, "GET", "/v1/counters?limit="+l, "").MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
		}
		e.Do(t, "GET", "/v1/counters?limit=1000", "").MustOK(t, http.StatusOK, nil)
	})
	t.Run("ErrPrefix", func(t *testing.T) {
		e.Do(t, "GET", "/v1/counters?prefix=a%01", "").MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
	})
}

func TestWrites(t *testing.T) {
	e := MustServe(t, EnvOptions{Server: shttp.ServerOptions{MaxBatch: 5}})
	e.MustCreate(t, "w1", 4)
	e.MustCreate(t, "w2", 4)
	t.Run("OK", func(t *testing.T) {
		var resp shttp.WritesResponse
		e.Do(t, "POST", "/v1/writes", `{"writes":[
			{"counter":"w1","delta":5},
			{"counter":"w2","delta":-3,"request_id":"b-1"},
			{"counter":"w2","delta":-3,"request_id":"b-1"},
			{"counter":"w1","delta":-1}]}`).MustOK(t, http.StatusOK, &resp)
		want := []shardcounter.WriteResult{
			{Counter: "w1", Applied: true},
			{Counter: "w2", Applied: true},
			{Counter: "w2", Duplicate: true},
			{Counter: "w1", Applied: true},
		}
		if fmt.Sprint(resp.Results) != fmt.Sprint(want) {
			t.Fatalf("results %+v, want %+v", resp.Results, want)
		}
		if got := e.MustValue(t, "w1"); got != 4 {
			t.Fatalf("w1 %d, want 4", got)
		}
		if got := e.MustValue(t, "w2"); got != -3 {
			t.Fatalf("w2 %d, want -3", got)
		}
	})
	t.Run("ErrInvalidItem", func(t *testing.T) {
		for _, body := range []string{
			`{"writes":[{"counter":"w1","delta":1},{"counter":"w1","delta":0}]}`,
			`{"writes":[{"counter":"w1","delta":1},{"counter":"","delta":1}]}`,
			`{"writes":[{"counter":"w1","delta":1},{"counter":"w1","delta":1,"extra":true}]}`,
			`{"writes":[{"counter":"w1","delta":1},{"counter":"w1","delta":1.5}]}`,
			`{"writes":[{"counter":"w1","delta":1},{"counter":"w1","delta":1,"request_id":"a\nb"}]}`,
			`{"writes":[{"counter":"w1","delta":1},null]}`,
			`{"writes":[]}`, `{}`, ``, `{"writes":{}}`,
		} {
			e.Do(t, "POST", "/v1/writes", body).MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
		}
		if got := e.MustValue(t, "w1"); got != 4 {
			t.Fatalf("w1 %d after refused batches, want 4", got)
		}
		msg := e.Do(t, "POST", "/v1/writes", `{"writes":[{"counter":"w1","delta":1},{"counter":"w1","delta":0}]}`).
			MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
		if !strings.Contains(msg, "writes[1]") {
			t.Fatalf("message %q does not name the bad item", msg)
		}
	})
	t.Run("ErrBatchTooLarge", func(t *testing.T) {
		items := strings.Repeat(`{"counter":"w1","delta":1},`, 6)
		e.Do(t, "POST", "/v1/writes", `{"writes":[`+strings.TrimSuffix(items, ",")+`]}`).
			MustError(t, http.StatusRequestEntityTooLarge, shardcounter.ETOOLARGE)
		if got := e.MustValue(t, "w1"); got != 4 {
			t.Fatalf("w1 %d after refused batch, want 4", got)
		}
	})
	t.Run("PerItemError", func(t *testing.T) {
		e := MustServe(t, EnvOptions{NoAutoCreate: true})
		e.MustCreate(t, "here", 2)
		var resp shttp.WritesResponse
		e.Do(t, "POST", "/v1/writes", `{"writes":[{"counter":"here","delta":2},{"counter":"gone","delta":1}]}`).
			MustOK(t, http.StatusOK, &resp)
		if r := resp.Results[0]; !r.Applied || r.Error != nil {
			t.Fatalf("first %+v, want applied", r)
		}
		if r := resp.Results[1]; r.Applied || r.Error == nil || r.Error.Code != shardcounter.ENOTFOUND || r.Error.Message == "" {
			t.Fatalf("second %+v, want a not_found error", r)
		}
		if got := e.MustValue(t, "here"); got != 2 {
			t.Fatalf("value %d, want 2", got)
		}
		// The client carries the item's error as a *shardcounter.Error.
		results, err := e.Client.WriteBatch(context.Background(), []shardcounter.Write{{Counter: "gone", Delta: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(results[0].Error, shardcounter.ErrNotFound) {
			t.Fatalf("client result %+v, want ErrNotFound", results[0])
		}
	})
}

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
		for _, p := range []string{"/", "/v2/counters", "/v1/counters/x/reset", "/v1/counters/x/"} {
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
		e.Do(t, "POST", path("x")+"/increment", "").MustError(t, http.StatusInternalServerError, shardcounter.EINTERNAL)
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

// TestConcurrentDuplicates retries one write with one request id from
// many goroutines at once: it counts exactly once.
func TestConcurrentDuplicates(t *testing.T) {
	e := MustServe(t, EnvOptions{})
	e.MustCreate(t, "once", 4)
	var wg sync.WaitGroup
	var mu sync.Mutex
	applied := 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Client.WriteCounter(context.Background(), shardcounter.Write{Counter: "once", Delta: 7, RequestID: "retry-me"})
			if err != nil {
				t.Error(err)
				return
			}
			if res.Applied {
				mu.Lock()
				applied++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if applied != 1 {
		t.Fatalf("%d writes applied, want 1", applied)
	}
	if got := e.MustValue(t, "once"); got != 7 {
		t.Fatalf("value %d, want 7", got)
	}
}
