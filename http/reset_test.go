package http_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// TestReset drives POST /v1/counters/{id}/reset through the Go client and
// as raw requests: a reset returns the value before, creates a missing
// counter, deletes with delete, and refuses bad bodies.
func TestReset(t *testing.T) {
	ctx := context.Background()
	e := MustServe(t, EnvOptions{})
	c := e.Client
	if _, err := c.WriteCounter(ctx, shardcounter.Write{Counter: "views", Delta: 41}); err != nil {
		t.Fatal(err)
	}
	res, err := c.ResetCounter(ctx, "views", shardcounter.Reset{Value: 1})
	if err != nil || !res.Existed || res.Old != 41 || res.Value != 1 {
		t.Fatalf("reset: %+v, %v; want old 41", res, err)
	}
	if got := e.MustValue(t, "views"); got != 1 {
		t.Fatalf("value after reset %d, want 1", got)
	}
	res, err = c.ResetCounter(ctx, "views", shardcounter.Reset{Delete: true})
	if err != nil || !res.Deleted || res.Old != 1 {
		t.Fatalf("reset with delete: %+v, %v", res, err)
	}
	if _, err := c.ReadCounter(ctx, "views", shardcounter.Strong); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		t.Fatalf("read after reset with delete: %v", err)
	}
	res, err = c.ResetCounter(ctx, "fresh", shardcounter.Reset{})
	if err != nil || res.Existed || e.MustValue(t, "fresh") != 0 {
		t.Fatalf("reset of a missing counter: %+v, %v", res, err)
	}
	for _, tc := range []struct{ body, want string }{
		{``, `"old":0`},
		{`{"value":5}`, `"old":0`},
		{`{"value":5,"delete":true}`, "takes no value"},
		{`{"value":"5"}`, "must be a whole number"},
		{`{"vlaue":5}`, "unknown field"},
	} {
		resp, err := http.Post(e.URL+"/v1/counters/fresh/reset", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), tc.want) || strings.HasPrefix(tc.want, `"`) != (resp.StatusCode == 200) {
			t.Errorf("POST reset %s: %d %s; want %q", tc.body, resp.StatusCode, b, tc.want)
		}
	}
}

func FuzzDecodeReset(f *testing.F) {
	for _, s := range []string{`{"value":3}`, `{"delete":true}`, `{"value":1,"keep_ttl":true}`, `{"value":1,"expires_at":"2030-01-01T00:00:00Z"}`, ``, `{"value":-9223372036854775808}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := shttp.DecodeReset(body)
		if err != nil {
			mustInvalid(t, err, shardcounter.EINVALID)
			return
		}
		if r.Delete && (r.Value != 0 || r.ExpiresAt != nil || r.KeepTTL) {
			t.Fatalf("accepted %q: a delete with a value", body)
		}
	})
}
