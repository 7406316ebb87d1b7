package http

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/shardcounter/shardcounter"
)

// The take's fast path: the body nearly every take sends, its reply and
// its RateLimit headers, each without encoding/json's reflection or an
// allocation the answer does not need (TestTakeAllocs).

// fastTake reads the body nearly every take or peek sends, {"cost":N},
// without encoding/json's reflection (fastInt). Any other body (ok false)
// takes DecodeTake's general path, which reads this one alike
// (FuzzFastTake).
func fastTake(body []byte) (cost int64, ok bool) { return fastInt(body, `{"cost":`) }

// appendLimitResult writes into *b a take's or a peek's reply, byte for
// byte what encoding/json writes for res and a newline
// (TestAppendLimitResult): every field is a number or a bool, so every
// result has it.
func appendLimitResult(b *[]byte, res *shardcounter.LimitResult) *[]byte {
	out := append((*b)[:0], `{"allowed":`...)
	out = strconv.AppendBool(out, res.Allowed)
	out = append(out, `,"remaining":`...)
	out = strconv.AppendInt(out, res.Remaining, 10)
	out = append(out, `,"reset_after_ms":`...)
	out = strconv.AppendInt(out, res.ResetAfterMS, 10)
	out = append(out, `,"retry_after_ms":`...)
	out = strconv.AppendInt(out, res.RetryAfterMS, 10)
	if res.Duplicate {
		out = append(out, `,"duplicate":true`...)
	}
	*b = append(out, "}\n"...)
	return b
}

// The RateLimit headers' keys, in net/http's canonical form, so that
// setting them is an assignment (Header.Set would canonicalize
// "RateLimit-Policy" afresh, allocating, on every take).
const (
	rateLimitPolicyKey = "Ratelimit-Policy"
	rateLimitKey       = "Ratelimit"
)

// policyHeaders keeps the RateLimit-Policy value of each limit taken
// from: a take of a hot key writes the same one every time. It keeps at
// most maxPolicyHeaders limits, and past that builds the others' afresh.
type policyHeaders struct {
	m  sync.Map // limit name → *policyHeader
	n  int      // entries, under mu
	mu sync.Mutex
}

type policyHeader struct {
	p shardcounter.LimitPolicy
	v []string // the header's value, shared: net/http only reads it
}

const maxPolicyHeaders = 1024

// get returns the RateLimit-Policy value of limit name under policy p.
func (c *policyHeaders) get(name string, p shardcounter.LimitPolicy) []string {
	if e, ok := c.m.Load(name); ok && e.(*policyHeader).p == p {
		return e.(*policyHeader).v
	}
	v := []string{RateLimitPolicyHeader(name, p)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, had := c.m.Swap(name, &policyHeader{p: p, v: v}); !had {
		if c.n++; c.n > maxPolicyHeaders {
			c.m.Clear()
			c.n = 0
		}
	}
	return v
}

// setRateLimitHeaders sets a take's RateLimit-Policy and RateLimit
// headers, for limit name of policy p.
func (s *Server) setRateLimitHeaders(h http.Header, name string, p shardcounter.LimitPolicy, res *shardcounter.LimitResult) {
	h[rateLimitPolicyKey] = s.policyHeaders.get(name, p)
	h[rateLimitKey] = []string{RateLimitHeader(name, res)}
}
