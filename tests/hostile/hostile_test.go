package hostile_test

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// Test1InvalidText: a JSON string with a lone surrogate ("w-\ud800") was
// decoded to U+FFFD, so "w-\ud800" and "w-\udbff" were one request id,
// and the second write was dropped as a duplicate; the same for counter
// ids in /v1/writes and /v1/reads and for document ids. Each is refused,
// naming its field, and changes nothing; a surrogate pair is text.
func Test1InvalidText(t *testing.T) {
	s := start(t)
	for _, c := range []struct{ method, path, body, field string }{
		{"POST", "/v1/writes", `{"writes":[{"counter":"c","delta":1,"request_id":"w-\ud800"}]}`, "writes[0].request_id"},
		{"POST", "/v1/writes", `{"writes":[{"counter":"c","delta":1,"request_id":"w-\udbff"}]}`, "writes[0].request_id"},
		{"POST", "/v1/counters/c/increment", `{"request_id":"w-\udc00"}`, "request_id"},
		{"POST", "/v1/writes", `{"writes":[{"counter":"c","delta":1},{"counter":"x\ud800","delta":1}]}`, "writes[1].counter"},
		{"POST", "/v1/writes", `{"writes":[{"counter":"d","member":"m\ude00","present":true}]}`, "writes[0].member"},
		{"POST", "/v1/reads", `{"counters":["c","x\ud800"]}`, "counters[1]"},
		{"PUT", "/v1/collections/docs", `{"indexes":["k\ud800"]}`, "indexes[0]"},
	} {
		s.do(t, c.method, c.path, c.body).must(t, 400, "invalid_argument", c.field, "surrogate")
	}
	s.do(t, "PUT", "/v1/collections/docs", `{"indexes":["k"]}`).must(t, 201)
	s.do(t, "POST", "/v1/collections/docs/documents", `{"id":"d\ud800","data":{"k":"v"}}`).must(t, 400, `field id`)
	s.do(t, "POST", "/v1/collections/docs/documents", `{"data":{"k":"v\udfff"}}`).must(t, 400, `data.k`)
	s.do(t, "GET", "/v1/counters/c", "").must(t, 404) // nothing was applied
	// A pair is one character: applied once, and its retry is a duplicate.
	s.do(t, "POST", "/v1/counters/c/increment", `{"request_id":"w-\ud83d\ude00"}`).must(t, 200, `"applied":true`)
	s.do(t, "POST", "/v1/counters/c/increment", `{"request_id":"w-😀"}`).must(t, 200, `"duplicate":true`)
	s.do(t, "POST", "/v1/counters/c/increment", `{"request_id":"w-\ufffd"}`).must(t, 200, `"applied":true`)
	s.do(t, "GET", "/v1/counters/c", "").must(t, 200, `"value":2`)
	// RESP keys are bytes: one that is not UTF-8 (a surrogate in CESU-8) is refused.
	c := s.dialRESP(t)
	c.send("AUTH " + token + "\r\n*3\r\n$9\r\nSC.INCRBY\r\n$4\r\nc\xed\xa0\x80\r\n$1\r\n1\r\n")
	if got := c.line(); got != "+OK" {
		t.Fatalf("AUTH: %q", got)
	}
	if got := c.line(); !strings.HasPrefix(got, "-ERR") || !strings.Contains(got, "UTF-8") {
		t.Fatalf("SC.INCRBY of a key that is not UTF-8: %q", got)
	}
}

// Test2EmptyRequestID: "request_id": "" was taken for no request id on
// HTTP (the write applied without dedupe) while RESP refused it. A given
// request id must be valid on both.
func Test2EmptyRequestID(t *testing.T) {
	s := start(t)
	s.do(t, "POST", "/v1/counters/c/increment", `{"by":1,"request_id":""}`).must(t, 400, "request_id", "empty")
	s.do(t, "POST", "/v1/writes", `{"writes":[{"counter":"c","delta":1,"request_id":""}]}`).must(t, 400, "writes[0].request_id", "empty")
	s.do(t, "POST", "/v1/writes", `{"writes":[{"counter":"c","member":"","present":true}]}`).must(t, 400, "member", "empty")
	s.do(t, "GET", "/v1/counters/c", "").must(t, 404)
	c := s.dialRESP(t)
	c.send("AUTH " + token + "\r\nSC.INCRBY c 1 REQUEST-ID \"\"\r\n")
	if got := c.line(); got != "+OK" {
		t.Fatalf("AUTH: %q", got)
	}
	if got := c.line(); !strings.HasPrefix(got, "-ERR") || !strings.Contains(got, "empty") {
		t.Fatalf("SC.INCRBY with an empty request id: %q", got)
	}
}

// Test3UnauthenticatedRESP: before AUTH a client could announce a
// multibulk of 4,000 arguments and hold up to 1 MiB of input with no
// deadline. Now an unauthenticated connection may send only small
// frames (a large one is refused at once), every half-sent command is
// cut off after --resp-read-timeout, also after AUTH, and past
// --resp-max-clients a connection is refused as Redis refuses it.
func Test3UnauthenticatedRESP(t *testing.T) {
	const timeout = time.Second
	s := start(t, "--resp-read-timeout", timeout.String(), "--resp-max-clients", "60")
	big := s.dialRESP(t)
	big.send("*4000\r\n$5000\r\n" + strings.Repeat("x", 1000))
	if got := big.line(); !strings.Contains(got, "Protocol error") || !strings.Contains(got, "before AUTH") {
		t.Fatalf("4,000 arguments before AUTH: %q", got)
	}
	if !big.closed(5 * time.Second) {
		t.Fatal("the connection stays open after a frame too large before AUTH")
	}
	// Half frames, before and after AUTH: each connection is answered and
	// closed once its command has not arrived within the read timeout.
	var half []*rconn
	for i := range 50 {
		c := s.dialRESP(t)
		if i%2 == 1 {
			c.send("AUTH " + token + "\r\n")
			if got := c.line(); got != "+OK" {
				t.Fatalf("AUTH: %q", got)
			}
		}
		c.send("*2\r\n$4\r\nINCR\r\n$10\r\nabc")
		half = append(half, c)
	}
	// The server is at its 60 connections now (50 and some closing): one
	// more than it allows is refused.
	extra := make([]*rconn, 0, 12)
	refused := false
	for range 12 {
		c := s.dialRESP(t)
		extra = append(extra, c)
		c.send("PING\r\n")
		if got := c.line(); got == "-ERR max number of clients reached" {
			refused = true
			break
		} else if got != "-NOAUTH Authentication required." {
			t.Fatalf("PING: %q", got)
		}
	}
	if !refused {
		t.Fatal("past --resp-max-clients 60, no connection was refused")
	}
	for i, c := range half {
		if got := c.line(); !strings.Contains(got, "did not arrive in full") {
			t.Fatalf("half-sent command %d: %q", i, got)
		}
		if !c.closed(5 * time.Second) {
			t.Fatalf("connection %d with a half-sent command stays open", i)
		}
	}
	for _, c := range extra {
		c.nc.Close()
	}
	// Below the limit again, connections are served.
	time.Sleep(100 * time.Millisecond)
	ok := s.dialRESP(t)
	ok.send("AUTH " + token + "\r\nPING\r\n")
	if got := ok.line() + ok.line(); got != "+OK+PONG" {
		t.Fatalf("after the half-sent commands closed: %q", got)
	}
}

// Test4RevokedToken: after the token file was edited and SIGHUP reloaded
// it, a RESP connection that authenticated with the removed token went on
// writing. Now its next command gets -NOAUTH and the connection is
// closed; HTTP refuses the token at once, and a watch stream opened with
// it ends.
func Test4RevokedToken(t *testing.T) {
	s := start(t)
	s.do(t, "POST", "/v1/counters/c/increment", "").must(t, 200)
	old := s.dialRESP(t)
	old.send("AUTH " + token + "\r\nINCR c\r\n")
	if got := old.line() + " " + old.line(); got != "+OK :2" {
		t.Fatalf("AUTH and INCR: %q", got)
	}
	watch := s.openWatch(t, "c")
	s.reloadTokens(t, "new-token")
	old.send("INCR c\r\nINCR c\r\n")
	if got := old.line(); got != "-NOAUTH Authentication required." {
		t.Fatalf("INCR with the removed token: %q", got)
	}
	if !old.closed(5 * time.Second) {
		t.Fatal("the session of the removed token stays open")
	}
	if !watch.ended(5 * time.Second) {
		t.Fatal("the watch stream of the removed token goes on")
	}
	s.do(t, "GET", "/v1/counters/c", "").must(t, 401)
	r := s.do(t, "GET", "/v1/counters/c", "", "Authorization", "Bearer new-token").must(t, 200)
	if !strings.Contains(r.Body, `"value":2`) {
		t.Fatalf("value after the revoked session's writes: %s, want 2", r.Body)
	}
	c := s.dialRESP(t)
	c.send("AUTH new-token\r\nINCR c\r\n")
	if got := c.line() + " " + c.line(); got != "+OK :3" {
		t.Fatalf("with the new token: %q", got)
	}
}

// atoi is strconv.Atoi for the test's own numbers.
func atoi(tb testing.TB, s string) int {
	tb.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
