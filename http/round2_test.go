package http_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// TestRound2Refusals checks that the round-2 routes refuse what they
// cannot use before the service sees it, and change nothing.
func TestRound2Refusals(t *testing.T) {
	e := MustServe(t, EnvOptions{Server: shttp.ServerOptions{}})
	e.MustCreate(t, "c", 2)
	e.MustWrite(t, "c", 5)
	for _, c := range []struct {
		method, path, body string
		status             int
		code, want         string
	}{
		{"PUT", path("n"), `{"kind":"set"}`, 400, shardcounter.EINVALID, "kind"},
		{"PUT", path("n"), `{"min":1}`, 400, shardcounter.EINVALID, "min"},
		{"PUT", path("n"), `{"max":-1}`, 400, shardcounter.EINVALID, "max"},
		{"PUT", path("n"), `{"min":"0"}`, 400, shardcounter.EINVALID, "min"},
		{"PUT", path("n"), `{"kind":"distinct","max":5}`, 400, shardcounter.EINVALID, "distinct"},
		{"PUT", path("n"), `{"window":{"bucket":"90s","retention":"1h"}}`, 400, shardcounter.EINVALID, "bucket"},
		{"PUT", path("n"), `{"window":{"bucket":"1h","retention":"90m"}}`, 400, shardcounter.EINVALID, "retention"},
		{"PUT", path("n"), `{"window":{"bucket":"1m","retention":"365d"}}`, 400, shardcounter.EINVALID, "limit"},
		{"PUT", path("n"), `{"window":{"bucket":"soon","retention":"1h"}}`, 400, shardcounter.EINVALID, "soon"},
		{"PUT", path("n"), `{"window":{"bucket":"1m","retention":"1h","size":3}}`, 400, shardcounter.EINVALID, "size"},
		{"PUT", path("n"), `{"window":"1m:1h"}`, 400, shardcounter.EINVALID, "window"},
		{"GET", path("c") + "?last=yesterday", "", 400, shardcounter.EINVALID, "last"},
		{"GET", path("c") + "?last=0s", "", 400, shardcounter.EINVALID, "last"},
		{"GET", path("c") + "?last=24h&consistency=cached", "", 400, shardcounter.EINVALID, "strong"},
		{"GET", path("c") + "?last=1h&last=2h", "", 400, shardcounter.EINVALID, "last"},
		{"GET", path("c") + "/series?last=-1h", "", 400, shardcounter.EINVALID, "last"},
		{"GET", path("c") + "/series?bucket=x", "", 400, shardcounter.EINVALID, "bucket"},
		{"GET", path("c") + "/series?buckets=1h", "", 400, shardcounter.EINVALID, "buckets"},
		{"GET", path("c") + "/shards?consistency=strong", "", 400, shardcounter.EINVALID, "consistency"},
		{"POST", "/v1/reads", `{"counters":[]}`, 400, shardcounter.EINVALID, "counters"},
		{"POST", "/v1/reads", `{}`, 400, shardcounter.EINVALID, "counters"},
		{"POST", "/v1/reads", `{"counters":["c",""]}`, 400, shardcounter.EINVALID, "counters[1]"},
		{"POST", "/v1/reads", `{"counters":["c"],"consistency":"eventual"}`, 400, shardcounter.EINVALID, "consistency"},
		{"POST", "/v1/reads", `{"Counters":["c"]}`, 400, shardcounter.EINVALID, "Counters"},
		{"POST", "/v1/reads", `{"counters":[` + strings.TrimSuffix(strings.Repeat(`"c",`, shardcounter.MaxReadBatch+1), ",") + `]}`, 413, shardcounter.ETOOLARGE, "1000"},
		{"GET", "/v1/reads", "", 405, shardcounter.EINVALID, "POST"},
		{"PUT", path("c") + "/members/m", `{"present":true}`, 400, shardcounter.EINVALID, "present"},
		{"PUT", path("c") + "/members/a%00b", "", 400, shardcounter.EINVALID, "member"},
		{"GET", path("c") + "/members?limit=0", "", 400, shardcounter.EINVALID, "limit"},
		{"GET", path("c") + "/members?prefix=a", "", 400, shardcounter.EINVALID, "prefix"},
		{"GET", path("c") + "/members?page_token=" + shttp.EncodeMemberToken("other", "m"), "", 400, shardcounter.EINVALID, "other"},
		{"GET", path("c") + "/members?page_token=" + shttp.EncodePageToken("", "c"), "", 400, shardcounter.EINVALID, "page_token"},
		{"POST", "/v1/writes", `{"writes":[{"counter":"c","member":"m"}]}`, 400, shardcounter.EINVALID, "present"},
		{"POST", "/v1/writes", `{"writes":[{"counter":"c","member":"m","present":true,"delta":1}]}`, 400, shardcounter.EINVALID, "delta"},
	} {
		msg := e.Do(t, c.method, c.path, c.body).MustError(t, c.status, c.code)
		if !strings.Contains(msg, c.want) {
			t.Errorf("%s %s %s: message %q does not mention %q", c.method, c.path, c.body, msg, c.want)
		}
	}
	if _, err := e.Client.ReadCounter(context.Background(), "n", ""); !errors.Is(err, shardcounter.ErrNotFound) {
		t.Fatalf("a refused create made counter n: %v", err)
	}
	if got := e.MustValue(t, "c"); got != 5 {
		t.Fatalf("value %d after refused requests, want 5", got)
	}
}

// TestBatchReads reads many counters in one request: in order, a
// missing counter's error in its place.
func TestBatchReads(t *testing.T) { eachStore(t, testBatchReads) }

func testBatchReads(t *testing.T, env EnvOptions) {
	ctx := context.Background()
	e := MustServe(t, env)
	for i := range 5 {
		e.MustCreate(t, fmt.Sprintf("r%d", i), 2)
		e.MustWrite(t, fmt.Sprintf("r%d", i), int64(10*i+1))
	}
	var resp shttp.ReadsResponse
	e.Do(t, "POST", "/v1/reads", `{"counters":["r3","gone","r0","r3"]}`).MustOK(t, http.StatusOK, &resp)
	if len(resp.Readings) != 4 {
		t.Fatalf("%d readings, want 4", len(resp.Readings))
	}
	for i, want := range []struct {
		id    string
		value int64
	}{{"r3", 31}, {"gone", -1}, {"r0", 1}, {"r3", 31}} {
		got := resp.Readings[i]
		if got.ID != want.id {
			t.Fatalf("reading %d is %q, want %q", i, got.ID, want.id)
		}
		if want.value < 0 {
			if got.Error == nil || got.Error.Code != shardcounter.ENOTFOUND || got.Reading != nil {
				t.Fatalf("reading %d: %+v, want a not_found error in place", i, got)
			}
			continue
		}
		if got.Error != nil || got.Reading == nil || got.Value != want.value || got.Consistency != shardcounter.Strong {
			t.Fatalf("reading %d: %+v, want %d", i, got, want.value)
		}
	}
	// The client: the same, as ReadResults.
	ids := make([]string, 0, shardcounter.MaxReadBatch)
	for len(ids) < shardcounter.MaxReadBatch {
		ids = append(ids, fmt.Sprintf("r%d", len(ids)%7)) // r5 and r6 do not exist
	}
	results, err := e.Client.ReadCounters(ctx, ids, shardcounter.Cached)
	if err != nil {
		t.Fatal(err)
	}
	for i, res := range results {
		n := i % 7
		if n >= 5 {
			if !errors.Is(res.Err, shardcounter.ErrNotFound) {
				t.Fatalf("result %d (%s): %+v, want ErrNotFound", i, ids[i], res)
			}
			continue
		}
		if res.Err != nil || res.Reading.ID != ids[i] || res.Reading.Value != int64(10*n+1) || res.Reading.Consistency != shardcounter.Cached {
			t.Fatalf("result %d (%s): %+v %+v", i, ids[i], res.Reading, res.Err)
		}
	}
}

// TestDistinct counts members through the member routes, the batch
// route and the client.
func TestDistinct(t *testing.T) { eachStore(t, testDistinct) }

func testDistinct(t *testing.T, env EnvOptions) {
	ctx := context.Background()
	e := MustServe(t, env)
	var c shardcounter.Counter
	e.Do(t, "PUT", path("likes"), `{"kind":"distinct","shards":4}`).MustOK(t, http.StatusCreated, &c)
	if c.Kind != shardcounter.KindDistinct {
		t.Fatalf("created %+v, want a distinct counter", c)
	}
	var m shttp.MemberResponse
	e.Do(t, "PUT", path("likes")+"/members/alice", "").MustOK(t, http.StatusOK, &m)
	if m.Counter != "likes" || m.Member != "alice" || m.Added == nil || !*m.Added {
		t.Fatalf("first add: %+v", m)
	}
	e.Do(t, "PUT", path("likes")+"/members/alice", "").MustOK(t, http.StatusOK, &m)
	if m.Added == nil || *m.Added {
		t.Fatalf("second add: %+v, want added false", m)
	}
	e.Do(t, "PUT", path("likes")+"/members/bob%2Fsmith", "{}").MustOK(t, http.StatusOK, nil)
	e.Do(t, "GET", path("likes")+"/members/alice", "").MustOK(t, http.StatusOK, &m)
	if m.Present == nil || !*m.Present {
		t.Fatalf("GET alice: %+v", m)
	}
	e.Do(t, "GET", path("likes")+"/members/carol", "").MustError(t, http.StatusNotFound, shardcounter.ENOTFOUND)
	e.Do(t, "DELETE", path("likes")+"/members/alice", "").MustOK(t, http.StatusOK, &m)
	if m.Removed == nil || !*m.Removed {
		t.Fatalf("remove: %+v", m)
	}
	e.Do(t, "DELETE", path("likes")+"/members/alice", "").MustOK(t, http.StatusOK, &m)
	if m.Removed == nil || *m.Removed {
		t.Fatalf("second remove: %+v, want removed false", m)
	}
	if got := e.MustValue(t, "likes"); got != 1 {
		t.Fatalf("value %d, want 1 (bob/smith)", got)
	}
	// Increment and decrement are for sum counters.
	e.Do(t, "POST", path("likes")+"/increment", "").MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
	e.Do(t, "POST", path("likes")+"/decrement", "").MustError(t, http.StatusBadRequest, shardcounter.EINVALID)

	// The batch route takes member writes, with request ids.
	var wr shttp.WritesResponse
	e.Do(t, "POST", "/v1/writes", `{"writes":[{"counter":"likes","member":"dan","present":true,"request_id":"q1"},{"counter":"likes","member":"dan","present":true,"request_id":"q1"},{"counter":"likes","member":"bob/smith","present":false}]}`).
		MustOK(t, http.StatusOK, &wr)
	if r := wr.Results[0]; !r.Applied || r.Changed == nil || !*r.Changed || r.Member != "dan" {
		t.Fatalf("batch add: %+v", r)
	}
	if r := wr.Results[1]; r.Applied || !r.Duplicate {
		t.Fatalf("batch repeat: %+v, want a duplicate", r)
	}

	// 50 concurrent adds of one member count once; the client pages.
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, err := e.Client.WriteCounter(ctx, shardcounter.AddMember("likes", "erin")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := range 7 {
		if _, err := e.Client.WriteCounter(ctx, shardcounter.AddMember("likes", fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	var all []string
	opts := shardcounter.ListOptions{Limit: 3}
	for pages := 0; ; pages++ {
		list, err := e.Client.ListMembers(ctx, "likes", opts)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, list.Members...)
		if list.Next == "" || pages > 10 {
			break
		}
		opts.After = list.Next
	}
	want := "[dan erin m0 m1 m2 m3 m4 m5 m6]"
	if fmt.Sprint(all) != want {
		t.Fatalf("members %v, want %s", all, want)
	}
	if got := e.MustValue(t, "likes"); got != 9 {
		t.Fatalf("value %d, want 9", got)
	}
	for member, want := range map[string]bool{"erin": true, "alice": false} {
		if got, err := e.Client.IsMember(ctx, "likes", member); err != nil || got != want {
			t.Fatalf("IsMember(%s) = %v, %v; want %v", member, got, err, want)
		}
	}
	if _, err := e.Client.IsMember(ctx, "nope", "erin"); !errors.Is(err, shardcounter.ErrNotFound) {
		t.Fatalf("IsMember on a missing counter: %v, want ErrNotFound", err)
	}
	got, err := e.Client.GetCounter(ctx, "likes")
	if err != nil || got.Kind != shardcounter.KindDistinct || got.Shards != 4 {
		t.Fatalf("GetCounter: %+v, %v", got, err)
	}
}

// TestBoundsAndWindow creates a bounded, windowed counter and reads its
// window, series and placement.
func TestBoundsAndWindow(t *testing.T) { eachStore(t, testBoundsAndWindow) }

func testBoundsAndWindow(t *testing.T, env EnvOptions) {
	ctx := context.Background()
	e := MustServe(t, env)
	var c shardcounter.Counter
	e.Do(t, "PUT", path("stock"), `{"shards":3,"min":0,"max":10,"window":{"bucket":"1m","retention":"1h"}}`).MustOK(t, http.StatusCreated, &c)
	if c.Min == nil || *c.Min != 0 || c.Max == nil || *c.Max != 10 || c.Window == nil || c.Window.Bucket != shardcounter.BucketMinute {
		t.Fatalf("created %+v", c)
	}
	// The same create again is a retry.
	e.Do(t, "PUT", path("stock"), `{"shards":3,"min":0,"max":10,"window":{"bucket":"1m","retention":"60m"}}`).MustOK(t, http.StatusOK, nil)
	// Other bounds or another window: a conflict, not a retry.
	e.Do(t, "PUT", path("stock"), `{"shards":3,"min":0,"max":11,"window":{"bucket":"1m","retention":"1h"}}`).MustError(t, http.StatusConflict, shardcounter.EEXISTS)
	e.Do(t, "PUT", path("stock"), `{"shards":3,"min":0,"max":10}`).MustError(t, http.StatusConflict, shardcounter.EEXISTS)
	e.Do(t, "POST", path("stock")+"/decrement", "").MustError(t, http.StatusBadRequest, shardcounter.EOUTOFRANGE)
	e.Do(t, "POST", path("stock")+"/increment", `{"by":7}`).MustOK(t, http.StatusOK, nil)
	e.Do(t, "POST", path("stock")+"/increment", `{"by":4}`).MustError(t, http.StatusBadRequest, shardcounter.EOUTOFRANGE)
	e.Do(t, "POST", path("stock")+"/decrement", `{"by":2}`).MustOK(t, http.StatusOK, nil)
	if got := e.MustValue(t, "stock"); got != 5 {
		t.Fatalf("value %d, want 5", got)
	}

	var r shardcounter.Reading
	e.Do(t, "GET", path("stock")+"?last=1h", "").MustOK(t, http.StatusOK, &r)
	if r.Value != 5 || r.Window == nil || r.Window.To.Sub(r.Window.From) != time.Hour {
		t.Fatalf("windowed reading %+v, want 5 over the 60 minute buckets ending with the current one", r)
	}
	rw, err := e.Client.ReadWindow(ctx, "stock", 10*time.Minute)
	if err != nil || rw.Value != 5 {
		t.Fatalf("client ReadWindow: %+v, %v", rw, err)
	}
	var s shardcounter.Series
	e.Do(t, "GET", path("stock")+"/series?last=10m", "").MustOK(t, http.StatusOK, &s)
	var sum int64
	for _, b := range s.Buckets {
		sum += b.Value
	}
	if s.Bucket != shardcounter.BucketMinute || len(s.Buckets) != 10 || sum != 5 {
		t.Fatalf("series %+v, want 10 minute buckets summing to 5", s)
	}
	all, err := e.Client.ReadSeries(ctx, "stock", time.Duration(shttp.AllRetained), 0)
	if err != nil || len(all.Buckets) != 60 {
		t.Fatalf("series of all retained: %d buckets, %v; want 60", len(all.Buckets), err)
	}
	e.Do(t, "GET", path("stock")+"/series?bucket=1h", "").MustOK(t, http.StatusOK, &s)
	e.Do(t, "GET", path("stock")+"/series?bucket=90s", "").MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
	e.MustCreate(t, "plain", 1)
	e.Do(t, "GET", path("plain")+"?last=1h", "").MustError(t, http.StatusBadRequest, shardcounter.EINVALID)

	var p shardcounter.Placement
	e.Do(t, "GET", path("stock")+"/shards", "").MustOK(t, http.StatusOK, &p)
	var total int64
	for i, sp := range p.Places {
		total += sp.Value
		if sp.Shard != i || sp.Node == "" {
			t.Fatalf("shard %d: %+v", i, sp)
		}
	}
	if p.ID != "stock" || p.Shards != 3 || len(p.Places) != 3 || total != 5 {
		t.Fatalf("placement %+v", p)
	}
	if _, err := e.Client.Placement(ctx, "nope"); !errors.Is(err, shardcounter.ErrNotFound) {
		t.Fatalf("placement of a missing counter: %v", err)
	}
}

// eachStore runs f over the engine on bolt and on PostgreSQL: batch reads,
// members, bounds and windows are the store's own work.
func eachStore(t *testing.T, f func(t *testing.T, opts EnvOptions)) {
	t.Run("bolt", func(t *testing.T) { f(t, EnvOptions{}) })
	t.Run("postgres", func(t *testing.T) { f(t, EnvOptions{Postgres: true}) })
}
