package openapitest_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter/internal/openapitest"
)

// TestCheck pins the rules Check applies, on exchanges made by hand, so
// that a validator grown lenient fails here rather than passing every
// test that relies on it.
func TestCheck(t *testing.T) {
	v := openapitest.MustNew(t)
	errBody := `{"error":{"code":"invalid_argument","message":"m"}}`
	json := http.Header{"Content-Type": {"application/json"}}
	for _, c := range []struct {
		name, method, target, body string
		status                     int
		header                     http.Header
		reply                      string
		ok                         bool
	}{
		{"OK", "GET", "/healthz", "", 200, json, `{"status":"ok"}`, true},
		{"ReplyOutsideEnum", "GET", "/healthz", "", 200, json, `{"status":"fine"}`, false},
		{"ReplyUnknownField", "GET", "/healthz", "", 200, json, `{"status":"ok","x":1}`, false},
		{"StatusNotListed", "GET", "/healthz", "", 418, json, errBody, false},
		{"HeadHasNoBody", "HEAD", "/healthz", "", 200, json, ``, true},
		{"RefusedGets2xx", "POST", "/v1/counters/c/increment", `{"by":0}`, 200, json, `{"counter":"c","applied":true}`, false},
		{"RefusedGets4xx", "POST", "/v1/counters/c/increment", `{"by":0}`, 400, json, errBody, true},
		{"UnknownFieldGets2xx", "POST", "/v1/counters/c/increment", `{"bye":1}`, 200, json, `{"counter":"c","applied":true}`, false},
		{"EscapedID", "GET", "/v1/counters/a%2Fb", "", 200, json, `{"id":"a/b","value":1,"shards":1,"consistency":"strong","as_of":"2030-01-01T00:00:00Z"}`, true},
		{"BadTime", "GET", "/v1/counters/a", "", 200, json, `{"id":"a","value":1,"shards":1,"consistency":"strong","as_of":"today"}`, false},
		{"UnknownPath404", "GET", "/nosuch", "", 404, json, errBody, true},
		{"UnknownPath200", "GET", "/nosuch", "", 200, json, `{}`, false},
		{"UnknownPathPlainText", "GET", "/nosuch", "", 404, http.Header{"Content-Type": {"text/plain"}}, "404 page not found", false},
		{"MethodAllow", "POST", "/healthz", "", 405, http.Header{"Content-Type": {"application/json"}, "Allow": {"GET"}}, errBody, true},
		{"MethodWrongAllow", "POST", "/healthz", "", 405, http.Header{"Content-Type": {"application/json"}, "Allow": {"GET, POST"}}, errBody, false},
		{"Method200", "POST", "/healthz", "", 200, json, `{"status":"ok"}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
			if c.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			err := v.Check(openapitest.Exchange{Request: req, Body: []byte(c.body), BodyComplete: true,
				Status: c.status, Header: c.header, Reply: []byte(c.reply), ReplyComplete: true})
			if got := err == nil; got != c.ok {
				t.Errorf("Check: %v, want ok %v", err, c.ok)
			}
		})
	}
}
