package http_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// TestRankingsHTTP walks the contract: create (201, then 200 on a retry,
// 409 with other options), top k in order with as_of and the bound, the
// list, bad input refused changing nothing, delete.
func TestRankingsHTTP(t *testing.T) {
	e := MustServe(t, EnvOptions{})
	for i := range 30 {
		e.MustWrite(t, fmt.Sprintf("post:%02d", i), int64(i*7%31+1))
	}
	e.MustWrite(t, "other", 1000)
	var def shardcounter.Ranking
	e.Do(t, "PUT", "/v1/rankings/top", `{"prefix":"post:","size":20}`).MustOK(t, 201, &def)
	if def.Name != "top" || def.Prefix != "post:" || def.Size != 20 || def.MaxStaleness != shardcounter.DefaultMaxStaleness {
		t.Fatalf("created %+v", def)
	}
	e.Do(t, "PUT", "/v1/rankings/top", `{"prefix":"post:","size":20}`).MustOK(t, 200, &def)
	e.Do(t, "PUT", "/v1/rankings/top", `{"prefix":"post:","size":21}`).MustError(t, 409, shardcounter.EEXISTS)
	for _, bad := range []string{`{"size":10001}`, `{"last":"90s"}`, `{"prefix":"p","sise":3}`, `{"max_staleness":"1ms"}`, `[1]`} {
		e.Do(t, "PUT", "/v1/rankings/bad", bad).MustError(t, 400, shardcounter.EINVALID)
	}
	e.Do(t, "GET", "/v1/rankings/bad", "").MustError(t, 404, shardcounter.ENOTFOUND)
	e.Do(t, "GET", "/v1/rankings/top?k=-1", "").MustError(t, 400, shardcounter.EINVALID)
	e.Do(t, "GET", "/v1/rankings/top?kk=1", "").MustError(t, 400, shardcounter.EINVALID)

	var top shardcounter.TopList
	e.Do(t, "GET", "/v1/rankings/top?k=5", "").MustOK(t, 200, &top)
	want := []shardcounter.RankingEntry{{ID: "post:22", Value: 31}, {ID: "post:13", Value: 30}, {ID: "post:04", Value: 29}, {ID: "post:26", Value: 28}, {ID: "post:17", Value: 27}}
	if fmt.Sprint(top.Entries) != fmt.Sprint(want) || top.MaxStalenessMS != 1000 || top.AsOf.IsZero() || top.Counters != 30 {
		t.Fatalf("top 5 = %+v, want %v", top, want)
	}
	// A decrement takes the first one down, a new counter joins.
	e.MustWrite(t, "post:22", -31)
	e.MustWrite(t, "post:new", 30)
	time.Sleep(1100 * time.Millisecond) // past the bound: the next read refreshes
	e.Do(t, "GET", "/v1/rankings/top?k=3", "").MustOK(t, 200, &top)
	want = []shardcounter.RankingEntry{{ID: "post:13", Value: 30}, {ID: "post:new", Value: 30}, {ID: "post:04", Value: 29}}
	if fmt.Sprint(top.Entries) != fmt.Sprint(want) {
		t.Fatalf("top 3 after changes = %v, want %v", top.Entries, want)
	}

	var list shttp.RankingsResponse
	e.Do(t, "GET", "/v1/rankings", "").MustOK(t, 200, &list)
	if len(list.Rankings) != 1 || list.Rankings[0].Name != "top" {
		t.Fatalf("list %+v", list)
	}
	e.Do(t, "DELETE", "/v1/rankings/top", "").MustOK(t, 204, nil)
	e.Do(t, "DELETE", "/v1/rankings/top", "").MustError(t, 404, shardcounter.ENOTFOUND)
	e.Do(t, "GET", "/v1/rankings", "").MustOK(t, 200, &list)
	if len(list.Rankings) != 0 {
		t.Fatalf("list after delete %+v", list)
	}
}

// TestRankingsClient runs the Go client against the server.
func TestRankingsClient(t *testing.T) {
	ctx := context.Background()
	e := MustServe(t, EnvOptions{})
	c := e.Client
	for i := range 5 {
		e.MustWrite(t, fmt.Sprintf("tag:%d", i), int64(i+1))
	}
	r, created, err := c.CreateRanking(ctx, "tags", shardcounter.RankingOptions{Prefix: "tag:", Size: 3, MaxStaleness: shardcounter.Duration(50 * time.Millisecond)})
	if err != nil || !created || r.Size != 3 {
		t.Fatalf("CreateRanking = %+v, %v, %v", r, created, err)
	}
	if _, created, err := c.CreateRanking(ctx, "tags", shardcounter.RankingOptions{Prefix: "tag:", Size: 3, MaxStaleness: shardcounter.Duration(50 * time.Millisecond)}); err != nil || created {
		t.Fatalf("retry: %v, %v", created, err)
	}
	top, err := c.Top(ctx, "tags", 0)
	if err != nil || len(top.Entries) != 3 || top.Entries[0] != (shardcounter.RankingEntry{ID: "tag:4", Value: 5}) {
		t.Fatalf("Top = %+v, %v", top, err)
	}
	if g, err := c.GetRanking(ctx, "tags"); err != nil || g.Prefix != "tag:" {
		t.Fatalf("GetRanking = %+v, %v", g, err)
	}
	if _, err := c.Top(ctx, "nope", 1); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("Top of a missing ranking: %v", err)
	}
	if l, err := c.ListRankings(ctx); err != nil || len(l) != 1 {
		t.Fatalf("ListRankings = %v, %v", l, err)
	}
	if err := c.DeleteRanking(ctx, "tags"); err != nil {
		t.Fatal(err)
	}
}

// FuzzDecodeRankingOptions drives the PUT body decoder: it refuses with
// invalid_argument or returns options that validate.
func FuzzDecodeRankingOptions(f *testing.F) {
	f.Add("top", `{"prefix":"post:","size":1000}`)
	f.Add("t", `{"prefix":"tag:","last":"1h","size":100}`)
	f.Add("t", `{"prefix":1}`)
	f.Fuzz(func(t *testing.T, name, body string) {
		o, err := shttp.DecodeRankingOptions(name, []byte(body))
		if err != nil {
			if shardcounter.ErrorCode(err) != shardcounter.EINVALID {
				t.Fatalf("%q: %v is not invalid_argument", body, err)
			}
			return
		}
		if err := shardcounter.ValidateRanking(name, o.WithDefaults()); err != nil {
			t.Fatalf("%q accepted as %+v, whose defaults are invalid: %v", body, o, err)
		}
	})
}

// FuzzParseTopK: a k is refused with invalid_argument or is in range.
func FuzzParseTopK(f *testing.F) {
	for _, s := range []string{"", "10", "0", "-1", "10001", "1e3", " 5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := shttp.ParseTopK(s)
		if err != nil {
			if shardcounter.ErrorCode(err) != shardcounter.EINVALID {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if k < 0 || k > shardcounter.MaxRankingSize {
			t.Fatalf("%q accepted as %d", s, k)
		}
	})
}
