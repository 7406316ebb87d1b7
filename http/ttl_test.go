package http_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// TestTTL drives deadlines through the Go client and the routes of
// /v1/counters/{id}/ttl: a create with a ttl, reading, replacing and
// removing a deadline, a counter read as absent once it passed, and the
// errors of bad bodies and missing names.
func TestTTL(t *testing.T) {
	ctx := context.Background()
	e := MustServe(t, EnvOptions{})
	c := e.Client

	made, _, err := c.CreateCounter(ctx, "daily", shardcounter.CreateOptions{Shards: 2, TTL: shardcounter.Duration(time.Hour)})
	if err != nil || made.ExpiresAt == nil || time.Until(*made.ExpiresAt) < 59*time.Minute {
		t.Fatalf("create with ttl 1h: %+v, %v", made, err)
	}
	got, err := c.CounterTTL(ctx, "daily")
	if err != nil || !got.Exists || got.RemainingMS <= 59*60*1000 || got.RemainingMS > 3600*1000 {
		t.Fatalf("CounterTTL: %+v, %v", got, err)
	}
	if ok, err := c.PersistCounter(ctx, "daily"); !ok || err != nil {
		t.Fatalf("PersistCounter: %v, %v", ok, err)
	}
	if got, err := c.CounterTTL(ctx, "daily"); err != nil || got.RemainingMS != -1 || got.ExpiresAt != nil {
		t.Fatalf("CounterTTL after persist: %+v, %v", got, err)
	}
	if ok, err := c.ExpireCounter(ctx, "missing", time.Now().Add(time.Hour)); ok || err != nil {
		t.Fatalf("ExpireCounter of a missing name: %v, %v; want false", ok, err)
	}
	if got, err := c.CounterTTL(ctx, "missing"); err != nil || got.Exists || got.RemainingMS != -2 {
		t.Fatalf("CounterTTL of a missing name: %+v, %v", got, err)
	}

	if _, err := c.WriteCounter(ctx, shardcounter.Write{Counter: "daily", Delta: 5}); err != nil {
		t.Fatal(err)
	}
	// A second leaves a loaded machine time to list it before its deadline.
	if ok, err := c.ExpireCounter(ctx, "daily", time.Now().Add(time.Second)); !ok || err != nil {
		t.Fatalf("ExpireCounter: %v, %v", ok, err)
	}
	if g, err := c.GetCounter(ctx, "daily"); err != nil || g.ExpiresAt == nil {
		t.Fatalf("listed counter without its deadline: %+v, %v", g, err)
	}
	time.Sleep(1100 * time.Millisecond)
	if _, err := c.ReadCounter(ctx, "daily", shardcounter.Strong); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		t.Fatalf("read past the deadline: %v, want not_found", err)
	}
	res, err := c.WriteCounter(ctx, shardcounter.Write{Counter: "daily", Delta: 2, WantValue: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.MustValue(t, "daily"); got != 2 {
		t.Fatalf("a write past the deadline: value %d (%+v), want 2, a new counter", got, res)
	}

	for _, tc := range []struct{ method, body, want string }{
		{http.MethodPut, `{}`, `give either \"ttl\"`},
		{http.MethodPut, `{"ttl":"-5s"}`, "is not positive"},
		{http.MethodPut, `{"ttl":"1s","expires_at":"2030-01-01T00:00:00Z"}`, "not both"},
		{http.MethodPut, `{"ttl":"1s","x":1}`, "unknown field"},
		{http.MethodPut, `{"ttl":"1h"}` + "\n", ""},
		{http.MethodGet, ``, `"remaining_ms":`},
	} {
		req, _ := http.NewRequest(tc.method, e.URL+"/v1/counters/daily/ttl", strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), tc.want) || (tc.want == "" || strings.HasPrefix(tc.want, `"`)) != (resp.StatusCode == 200) {
			t.Errorf("%s %s: %d %s; want %q", tc.method, tc.body, resp.StatusCode, b, tc.want)
		}
	}
	resp, err := http.Get(e.URL + "/v1/counters/nothing/ttl")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET ttl of a missing name: %d, want 404", resp.StatusCode)
	}
}

func FuzzDecodeTTL(f *testing.F) {
	for _, s := range []string{`{"ttl":"30s"}`, `{"expires_at":"2030-01-01T00:00:00Z"}`, `{"ttl":"7d"}`, `{}`, `{"ttl":"0s"}`, `{"ttl":1}`, ``} {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte) {
		at, err := shttp.DecodeTTL(body, now)
		if err != nil {
			mustInvalid(t, err, shardcounter.EINVALID)
			return
		}
		if at.After(now.Add(shardcounter.MaxTTL)) {
			t.Fatalf("accepted %q: deadline %v more than MaxTTL away", body, at)
		}
	})
}
