package http_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// TestLimitsHTTP walks the rate-limit routes through HTTP against the
// engine on bolt and on PostgreSQL: definitions, takes with their
// headers, retries of a request id, peeks, resets, and every refusal,
// each changing nothing.
func TestLimitsHTTP(t *testing.T) {
	for _, pg := range []bool{false, true} {
		name := "bolt"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) { testLimitsHTTP(t, MustServe(t, EnvOptions{Postgres: pg})) })
	}
}

func testLimitsHTTP(t *testing.T, e *Env) {
	// A fixed window of a year: no window's edge passes during the test.
	var l shardcounter.Limit
	r := e.Do(t, "PUT", "/v1/limits/api", `{"kind":"fixed","limit":3,"period":"366d"}`)
	r.MustOK(t, 201, &l)
	if l.Name != "api" || l.Kind != shardcounter.LimitFixed || l.Limit != 3 || l.CreatedAt.IsZero() || r.Header.Get("Location") != "/v1/limits/api" {
		t.Fatalf("created %+v, Location %q", l, r.Header.Get("Location"))
	}
	e.Do(t, "PUT", "/v1/limits/api", `{"kind":"fixed","limit":3,"period":"366d"}`).MustOK(t, 200, &l)
	e.Do(t, "GET", "/v1/limits/api", "").MustOK(t, 200, &l)
	if l.String() != "fixed 3/366d" {
		t.Fatalf("read %s", l.String())
	}
	var g shardcounter.Limit
	e.Do(t, "PUT", "/v1/limits/bucket", `{"kind":"gcra","limit":1,"period":"1h","burst":2}`).MustOK(t, 201, &g)
	e.Do(t, "PUT", "/v1/limits/win", `{"kind":"sliding","limit":5,"period":"1m"}`).MustOK(t, 201, &l)
	if l.Bucket != shardcounter.Duration(1e9) {
		t.Fatalf("sliding defaults: %+v", l)
	}
	var list shttp.LimitsResponse
	e.Do(t, "GET", "/v1/limits", "").MustOK(t, 200, &list)
	if len(list.Limits) != 3 || list.Limits[0].Name != "api" || list.Limits[1].Name != "bucket" || list.Limits[2].Name != "win" {
		t.Fatalf("list %+v", list.Limits)
	}

	// Refused policies change nothing: not a limit made, nor one redefined.
	for _, bad := range []string{`{"kind":"leaky","limit":3,"period":"10s"}`, `{"kind":"fixed","limit":3,"period":"500ms"}`,
		`{"kind":"fixed","limit":0,"period":"10s"}`, `{"kind":"fixed","limit":3,"period":"10s","burst":2}`,
		`{"kind":"sliding","limit":3,"period":"10s","bucket":"3s"}`, `{"kind":"fixed","limit":3,"period":"10s","cost":1}`,
		`{"kind":"fixed","limit":3}`, `{"kind":"fixed","limit":"3","period":"10s"}`, ``, `[]`} {
		e.Do(t, "PUT", "/v1/limits/api", bad).MustError(t, 400, shardcounter.EINVALID)
		e.Do(t, "PUT", "/v1/limits/other", bad).MustError(t, 400, shardcounter.EINVALID)
	}
	e.Do(t, "GET", "/v1/limits/other", "").MustError(t, 404, shardcounter.ENOTFOUND)
	e.Do(t, "GET", "/v1/limits/api", "").MustOK(t, 200, &l)
	if l.String() != "fixed 3/366d" {
		t.Fatalf("a refused policy changed the limit to %s", l.String())
	}
	e.Do(t, "GET", "/v1/limits?x=1", "").MustError(t, 400, shardcounter.EINVALID)

	take := func(path, body string, status int) (shardcounter.LimitResult, Reply) {
		t.Helper()
		var res shardcounter.LimitResult
		r := e.Do(t, "POST", path, body)
		r.MustOK(t, status, &res)
		return res, r
	}
	mustHeaders := func(r Reply, policy string, res shardcounter.LimitResult) {
		t.Helper()
		if got := r.Header.Get("RateLimit-Policy"); got != policy {
			t.Fatalf("RateLimit-Policy %q, want %q", got, policy)
		}
		want := fmt.Sprintf(`"api";r=%d;t=%d`, res.Remaining, (res.ResetAfterMS+999)/1000)
		if strings.HasPrefix(policy, `"bucket"`) {
			want = strings.Replace(want, `"api"`, `"bucket"`, 1)
		}
		if got := r.Header.Get("RateLimit"); got != want {
			t.Fatalf("RateLimit %q, want %q", got, want)
		}
	}
	const apiPolicy = `"api";q=3;w=31622400`
	res, r := take("/v1/limits/api/keys/u1/take", "", 200)
	if !res.Allowed || res.Remaining != 2 || res.ResetAfterMS <= 0 || res.RetryAfterMS != 0 || res.Duplicate {
		t.Fatalf("first take %+v", res)
	}
	mustHeaders(r, apiPolicy, res)
	res, r = take("/v1/limits/api/keys/u1/take", `{"cost":2,"request_id":"r1"}`, 200)
	if !res.Allowed || res.Remaining != 0 {
		t.Fatalf("take of 2 %+v", res)
	}
	mustHeaders(r, apiPolicy, res)
	// The retry answers the decision recorded, and takes nothing more.
	res, _ = take("/v1/limits/api/keys/u1/take", `{"cost":2,"request_id":"r1"}`, 200)
	if !res.Allowed || !res.Duplicate || res.Remaining != 0 {
		t.Fatalf("retry %+v", res)
	}
	res, r = take("/v1/limits/api/keys/u1/take", `{"request_id":"r2"}`, 200)
	if res.Allowed || res.Remaining != 0 || res.RetryAfterMS <= 0 || res.Duplicate {
		t.Fatalf("take over the quota %+v", res)
	}
	mustHeaders(r, apiPolicy, res)
	// A refused take retried is refused again, as first decided.
	res, _ = take("/v1/limits/api/keys/u1/take", `{"request_id":"r2"}`, 200)
	if res.Allowed || !res.Duplicate {
		t.Fatalf("retry of a refused take %+v", res)
	}
	// A cost above the quota is valid, and never allowed.
	res, _ = take("/v1/limits/api/keys/u2/take", `{"cost":4}`, 200)
	if res.Allowed || res.RetryAfterMS != -1 || res.Remaining != 3 {
		t.Fatalf("cost above the quota %+v", res)
	}

	// A peek answers and takes nothing.
	for range 2 {
		res, r = take("/v1/limits/api/keys/u2/peek", `{"cost":2}`, 200)
		if !res.Allowed || res.Remaining != 3 {
			t.Fatalf("peek %+v", res)
		}
		mustHeaders(r, apiPolicy, res)
	}
	res, _ = take("/v1/limits/api/keys/u2/peek", "", 200)
	if !res.Allowed || res.Remaining != 3 {
		t.Fatalf("peek of 1 %+v", res)
	}

	// gcra: q is the burst, w the time an empty bucket takes to fill.
	res, r = take("/v1/limits/bucket/keys/u1/take", `{"cost":2}`, 200)
	if !res.Allowed || res.Remaining != 0 {
		t.Fatalf("gcra take %+v", res)
	}
	mustHeaders(r, `"bucket";q=2;w=7200`, res)

	// Refused takes and peeks: invalid_argument, nothing taken.
	for _, bad := range []string{`{"cost":0}`, `{"cost":-1}`, `{"cost":1.5}`, `{"cost":"1"}`, `{"request_id":""}`, `{"request_id":"a\u0000b"}`,
		`{"costs":1}`, `{"cost":1}{}`, `[]`, `{"cost":1,"cost":1}`} {
		e.Do(t, "POST", "/v1/limits/api/keys/u3/take", bad).MustError(t, 400, shardcounter.EINVALID)
	}
	for _, bad := range []string{`{"cost":0}`, `{"request_id":"r"}`, `{"cost":null,"x":1}`} {
		e.Do(t, "POST", "/v1/limits/api/keys/u3/peek", bad).MustError(t, 400, shardcounter.EINVALID)
	}
	e.Do(t, "POST", "/v1/limits/api/keys/u3/take?cost=2", "").MustError(t, 400, shardcounter.EINVALID)
	res, _ = take("/v1/limits/api/keys/u3/peek", "", 200)
	if res.Remaining != 3 {
		t.Fatalf("a refused take took something: %+v", res)
	}

	// A reset empties a key: its whole quota is back; other keys keep theirs.
	if r := e.Do(t, "DELETE", "/v1/limits/api/keys/u1", ""); r.Status != 204 {
		t.Fatalf("reset: %d %s", r.Status, r.Body)
	}
	res, _ = take("/v1/limits/api/keys/u1/peek", `{"cost":3}`, 200)
	if !res.Allowed || res.Remaining != 3 {
		t.Fatalf("after the reset %+v", res)
	}

	// A missing limit is not_found on every route.
	for _, req := range [][2]string{{"GET", "/v1/limits/none"}, {"DELETE", "/v1/limits/none"}, {"POST", "/v1/limits/none/keys/k/take"},
		{"POST", "/v1/limits/none/keys/k/peek"}, {"DELETE", "/v1/limits/none/keys/k"}} {
		e.Do(t, req[0], req[1], "").MustError(t, 404, shardcounter.ENOTFOUND)
	}
	// A name too long is invalid_argument.
	long := strings.Repeat("n", shardcounter.MaxLimitNameLen+1)
	e.Do(t, "PUT", "/v1/limits/"+long, `{"kind":"fixed","limit":3,"period":"10s"}`).MustError(t, 400, shardcounter.EINVALID)

	// Deleting a limit deletes it and its keys' state: defined again, a
	// key starts afresh.
	if r := e.Do(t, "DELETE", "/v1/limits/api", ""); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	e.Do(t, "GET", "/v1/limits/api", "").MustError(t, 404, shardcounter.ENOTFOUND)
	e.Do(t, "PUT", "/v1/limits/api", `{"kind":"fixed","limit":3,"period":"366d"}`).MustOK(t, 201, &l)
	res, _ = take("/v1/limits/api/keys/u2/peek", "", 200)
	if res.Remaining != 3 {
		t.Fatalf("a key kept its state past its limit's deletion: %+v", res)
	}
	// A redefinition with another policy starts every key afresh.
	take("/v1/limits/api/keys/u2/take", `{"cost":3}`, 200)
	e.Do(t, "PUT", "/v1/limits/api", `{"kind":"fixed","limit":4,"period":"366d"}`).MustOK(t, 201, &l)
	res, _ = take("/v1/limits/api/keys/u2/peek", "", 200)
	if res.Remaining != 4 {
		t.Fatalf("after a redefinition %+v", res)
	}
}

// TestRateLimitHeaders checks the fields' Structured Field syntax: the
// name a String, escaped, and URL-escaped when it holds bytes a String
// cannot.
func TestRateLimitHeaders(t *testing.T) {
	p, err := shardcounter.ParseLimitPolicy("sliding 300/10s")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, want string }{
		{"api", `"api";q=300;w=10`},
		{`a"b\c`, `"a\"b\\c";q=300;w=10`},
		{"é", `"%C3%A9";q=300;w=10`},
	} {
		if got := shttp.RateLimitPolicyHeader(c.name, p); got != c.want {
			t.Errorf("RateLimitPolicyHeader(%q) = %s, want %s", c.name, got, c.want)
		}
	}
	g, _ := shardcounter.ParseLimitPolicy("gcra 10/1s burst 25")
	if got := shttp.RateLimitPolicyHeader("g", g); got != `"g";q=25;w=3` {
		t.Errorf("gcra: %s", got)
	}
	if got := shttp.RateLimitHeader("g", &shardcounter.LimitResult{Remaining: 7, ResetAfterMS: 1001}); got != `"g";r=7;t=2` {
		t.Errorf("RateLimit %s", got)
	}
}

// TestLimitClient runs the Go client against a server over the engine:
// it is a shardcounter.LimitService with the engine's answers, and its
// errors carry the server's codes.
func TestLimitClient(t *testing.T) {
	ctx := context.Background()
	e := MustServe(t, EnvOptions{})
	var svc shardcounter.LimitService = e.Client
	p, _ := shardcounter.ParseLimitPolicy("fixed 2/366d")
	l, created, err := svc.CreateLimit(ctx, "c", p)
	if err != nil || !created || l.String() != "fixed 2/366d" {
		t.Fatalf("CreateLimit: %+v %v %v", l, created, err)
	}
	if _, created, err = svc.CreateLimit(ctx, "c", p); err != nil || created {
		t.Fatalf("CreateLimit again: %v %v", created, err)
	}
	if l, err = svc.GetLimit(ctx, "c"); err != nil || l.Name != "c" || l.Limit != 2 {
		t.Fatalf("GetLimit: %+v %v", l, err)
	}
	if ls, err := svc.ListLimits(ctx); err != nil || len(ls) != 1 || ls[0].Name != "c" {
		t.Fatalf("ListLimits: %v %v", ls, err)
	}
	if r, err := svc.Take(ctx, "c", "k", 2, "id1"); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("Take: %+v %v", r, err)
	}
	if r, err := svc.Take(ctx, "c", "k", 2, "id1"); err != nil || !r.Allowed || !r.Duplicate {
		t.Fatalf("Take retried: %+v %v", r, err)
	}
	if r, err := svc.Peek(ctx, "c", "k", 1); err != nil || r.Allowed || r.RetryAfterMS <= 0 {
		t.Fatalf("Peek: %+v %v", r, err)
	}
	if err := svc.ResetLimitKey(ctx, "c", "k"); err != nil {
		t.Fatal(err)
	}
	if r, err := svc.Peek(ctx, "c", "k", 2); err != nil || !r.Allowed {
		t.Fatalf("Peek after the reset: %+v %v", r, err)
	}
	// Invalid input is refused before it is sent, as the server would.
	if _, err := svc.Take(ctx, "c", "k", 0, ""); !errors.Is(err, shardcounter.ErrInvalid) {
		t.Fatalf("cost 0: %v", err)
	}
	if _, _, err := svc.CreateLimit(ctx, "d", shardcounter.LimitPolicy{Kind: "leaky", Limit: 1, Period: shardcounter.Duration(1e9)}); !errors.Is(err, shardcounter.ErrInvalid) {
		t.Fatalf("unknown kind: %v", err)
	}
	if err := svc.DeleteLimit(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Take(ctx, "c", "k", 1, ""); !errors.Is(err, shardcounter.ErrNotFound) {
		t.Fatalf("take of a deleted limit: %v", err)
	}
	if err := svc.DeleteLimit(ctx, "c"); !errors.Is(err, shardcounter.ErrNotFound) {
		t.Fatalf("delete of a deleted limit: %v", err)
	}
}
