package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

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
	// A create retried after a lost reply succeeds: 200 with the counter
	// when it exists with the same options, 409 only when they differ.
	t.Run("Idempotent", func(t *testing.T) {
		var first, again shardcounter.Counter
		r := e.Do(t, "PUT", path("retry"), `{"shards":4}`)
		r.MustOK(t, http.StatusCreated, &first)
		e.MustWrite(t, "retry", 3)
		r = e.Do(t, "PUT", path("retry"), `{"shards":4}`)
		r.MustOK(t, http.StatusOK, &again)
		if again.ID != "retry" || again.Shards != 4 || !again.CreatedAt.Equal(first.CreatedAt) {
			t.Fatalf("retried create %+v, want the existing counter %+v", again, first)
		}
		if r.Header.Get("Location") != "" {
			t.Fatal("a 200 for an existing counter has a Location, which says it was created")
		}
		e.Do(t, "PUT", path("retry"), `{"shards":8}`).MustError(t, http.StatusConflict, shardcounter.EEXISTS)
		e.Do(t, "PUT", path("retry"), `{"shards":4,"kind":"sum"}`).MustOK(t, http.StatusOK, nil) // sum is the default
		if got := e.MustValue(t, "retry"); got != 3 {
			t.Fatalf("value %d after retried creates, want 3", got)
		}
		// The client says which it was.
		_, created, err := e.Client.CreateCounter(context.Background(), "retry", shardcounter.CreateOptions{Shards: 4})
		if err != nil || created {
			t.Fatalf("client create of an existing counter: created %v, %v; want false, nil", created, err)
		}
		_, created, err = e.Client.CreateCounter(context.Background(), "fresh", shardcounter.CreateOptions{Shards: 4})
		if err != nil || !created {
			t.Fatalf("client create of a new counter: created %v, %v; want true, nil", created, err)
		}
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

// TestList checks listing over HTTP and through the Go client: paging,
// the documented example, an empty list, and bad parameters. The subtests
// share one server with seven counters under "page/" and one other.
func TestList(t *testing.T) {
	e := MustServe(t, EnvOptions{})
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("page/%02d", i)
		e.MustCreate(t, id, 1)
		want = append(want, id)
	}
	e.MustCreate(t, "other", 1)
	t.Run("Pages", func(t *testing.T) { testListPages(t, e, want) })
	t.Run("DocExample", func(t *testing.T) { testListDocExample(t, e) })
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
	t.Run("Client", func(t *testing.T) { testListClient(t, e, want) })
	t.Run("ErrPageToken", func(t *testing.T) { testListErrPageToken(t, e) })
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

// testListPages pages through the counters under "page/" three at a time
// and wants each once, in order.
func testListPages(t *testing.T, e *Env, want []string) {
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
}

// testListDocExample replays docs/API.md's listing example, with its own
// data and token, so that the example stays true; it deletes its counters
// after.
func testListDocExample(t *testing.T, e *Env) {
	for i := 1; i <= 3; i++ {
		e.MustCreate(t, fmt.Sprint("post/", i), 16)
	}
	const token = "AwVwb3N0L3Bvc3QvMszrMhM"
	for _, page := range []struct{ query, ids, next string }{
		{"?prefix=post%2F&limit=2", "[post/1 post/2]", token},
		{"?prefix=post%2F&limit=2&page_token=" + token, "[post/3]", ""},
	} {
		var resp shttp.ListResponse
		e.Do(t, "GET", "/v1/counters"+page.query, "").MustOK(t, http.StatusOK, &resp)
		var ids []string
		for _, c := range resp.Counters {
			ids = append(ids, c.ID)
		}
		if fmt.Sprint(ids) != page.ids || resp.NextPageToken != page.next {
			t.Fatalf("%s: %v and token %q, want %s and %q", page.query, ids, resp.NextPageToken, page.ids, page.next)
		}
	}
	for i := 1; i <= 3; i++ {
		e.Do(t, "DELETE", fmt.Sprint("/v1/counters/post%2F", i), "").MustOK(t, http.StatusNoContent, nil)
	}
}

// testListClient pages through the counters under "page/" with the Go
// client and wants each once, in order.
func testListClient(t *testing.T, e *Env, want []string) {
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
}

// testListErrPageToken checks that a page token that is not one the
// server gave for this prefix is refused with a message naming page_token.
func testListErrPageToken(t *testing.T, e *Env) {
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
}
