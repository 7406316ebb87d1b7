package http_test

import (
	"testing"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

var limitSeeds = []string{
	``, `{}`, `[]`, `null`, `{"kind":"fixed","limit":300,"period":"10s"}`, `{"kind":"sliding","limit":5,"period":"1m","bucket":"5s"}`,
	`{"kind":"gcra","limit":10,"period":"1s","burst":20}`, `{"kind":"gcra","limit":1,"period":"366d","burst":1099511627776}`,
	`{"kind":"fixed","limit":3,"period":"500ms"}`, `{"kind":"fixed","limit":3,"period":"10s","burst":1}`, `{"kind":"leaky"}`,
	`{"kind":"sliding","limit":1,"period":"1001ms"}`, `{"kind":"fixed","limit":1e3,"period":"1s"}`, `{"kind":"fixed","kind":"gcra"}`,
	`{"cost":1}`, `{"cost":0}`, `{"cost":-9223372036854775808}`, `{"cost":1,"request_id":"r"}`, `{"request_id":"\u0000"}`,
	`{"cost":null}`, `{"cost":1.0}`, `{"cost":1}x`, "{\"request_id\":\"\xff\"}",
}

// FuzzDecodeLimitPolicy checks PUT /v1/limits/{name}'s decoder: a body is
// refused with invalid_argument, or decoded to a valid policy with its
// defaults, which ParseLimitPolicy reads back from its String.
func FuzzDecodeLimitPolicy(f *testing.F) {
	for _, s := range limitSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := shttp.DecodeLimitPolicy(body)
		if err != nil {
			mustInvalid(t, err, shardcounter.EINVALID)
			return
		}
		if err := shardcounter.ValidateLimitPolicy(p); err != nil || p != p.WithDefaults() {
			t.Fatalf("accepted %q as %+v: %v", body, p, err)
		}
		back, err := shardcounter.ParseLimitPolicy(p.String())
		if err != nil || back != p {
			t.Fatalf("%q: %+v reads back from %q as %+v, %v", body, p, p.String(), back, err)
		}
		if h := shttp.RateLimitPolicyHeader("n", p); len(h) < len(`"n";q=1;w=1`) {
			t.Fatalf("RateLimit-Policy %q", h)
		}
	})
}

// FuzzDecodeTake checks the take and peek bodies' decoder: refused with
// invalid_argument, or a cost of at least 1 and a valid request id (none
// for a peek).
func FuzzDecodeTake(f *testing.F) {
	for _, s := range limitSeeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, peek bool) {
		cost, rid, err := shttp.DecodeTake(body, peek)
		if err != nil {
			mustInvalid(t, err, shardcounter.EINVALID)
			return
		}
		if cost < 1 || (peek && rid != "") {
			t.Fatalf("accepted %q (peek %v) as cost %d, request id %q", body, peek, cost, rid)
		}
		if rid != "" {
			if err := shardcounter.ValidateID("request id", rid); err != nil {
				t.Fatalf("accepted %q with request id %q: %v", body, rid, err)
			}
		}
	})
}
