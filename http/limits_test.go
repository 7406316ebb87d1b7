package http_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/internal/authtoken"
)

// TestMaxBodyTotal checks the process-wide bound on request bodies in
// flight: while held bodies take MaxBodyTotal, another body is refused
// with 503 and Retry-After before it is read, changing nothing; once they
// are gone, bodies are taken again.
func TestMaxBodyTotal(t *testing.T) {
	e := MustServe(t, EnvOptions{Server: shttp.ServerOptions{MaxBodyTotal: 64 << 10, BodyTimeout: 20 * time.Second}})
	e.MustCreate(t, "c", 1)
	// Two slow bodies, 40 KiB announced and 30 KiB sent, hold 32 KiB
	// each (the buffer grows 4, 8, 16, 32 KiB as the bytes arrive): the
	// whole budget.
	held := make([]net.Conn, 0, 2)
	for range 2 {
		conn := slowBody(t, e.URL, path("c")+"/increment", 40<<10)
		conn.Write([]byte(strings.Repeat(" ", 30<<10)))
		held = append(held, conn)
	}
	time.Sleep(200 * time.Millisecond) // let the server read what was sent
	big := `{"by":1}` + strings.Repeat(" ", 40<<10)
	r := e.Do(t, "POST", path("c")+"/increment", big)
	r.MustError(t, http.StatusServiceUnavailable, shardcounter.EUNAVAILABLE)
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("503 for a full body budget without Retry-After")
	}
	if got := e.MustValue(t, "c"); got != 0 {
		t.Fatalf("value %d after a refused write, want 0", got)
	}
	for _, c := range held {
		c.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = e.Do(t, "POST", path("c")+"/increment", big)
		if r.Status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bodies are still refused after the held ones closed: %d %s", r.Status, r.Body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	metrics := string(e.Do(t, "GET", "/metrics", "").Body)
	if !strings.Contains(metrics, "shardcounter_http_body_budget_rejections_total 1") &&
		!strings.Contains(metrics, "shardcounter_http_body_budget_rejections_total 2") {
		t.Errorf("/metrics does not count the refused body:\n%s", grepLines(metrics, "body_"))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestContentEncoding checks that a compressed body is refused with 415
// rather than read as if it were plain JSON, and that identity is fine.
func TestContentEncoding(t *testing.T) {
	e := MustServe(t, EnvOptions{})
	r := e.Do(t, "POST", path("c")+"/increment", `{"by":2}`, "Content-Encoding", "gzip")
	r.MustError(t, http.StatusUnsupportedMediaType, shardcounter.EINVALID)
	e.Do(t, "POST", path("c")+"/increment", `{"by":2}`, "Content-Encoding", "identity").MustOK(t, http.StatusOK, nil)
	if got := e.MustValue(t, "c"); got != 2 {
		t.Fatalf("value %d, want 2: only the identity-encoded write applies", got)
	}
}

// TestAuthThrottle checks that failed authentications from one address
// are answered 401 for a burst of 100, then 429 resource_exhausted with
// Retry-After, that the right token still works meanwhile, and that
// /metrics counts them.
func TestAuthThrottle(t *testing.T) {
	// An allowance that comes back slowly, so that a slow test run still
	// makes its 100 failures within the burst.
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var logs syncBuffer
	guard := &authtoken.Guard{Interval: time.Hour, OnBurst: func(addr string, _ authtoken.Protocol, n int64) {
		logs.Write([]byte(fmt.Sprintf("failed authentications from %s: %d\n", addr, n)))
	}}
	e := MustServe(t, EnvOptions{Server: shttp.ServerOptions{AuthTokens: []string{"s3cret"}, AuthGuard: guard, Logger: log}})
	for i := range 100 {
		r := e.Do(t, "GET", "/v1/counters", "", "Authorization", "Bearer wrong"+strconv.Itoa(i))
		r.MustError(t, http.StatusUnauthorized, shardcounter.EUNAUTHENTICATED)
	}
	r := e.Do(t, "GET", "/v1/counters", "", "Authorization", "Bearer wrong")
	r.MustError(t, http.StatusTooManyRequests, shardcounter.EEXHAUSTED)
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("429 with Retry-After %q, want a whole number of seconds ≥ 1", r.Header.Get("Retry-After"))
	}
	e.Do(t, "GET", "/v1/counters", "", "Authorization", "Bearer s3cret").MustOK(t, http.StatusOK, nil)
	e.Client.Token = "wrong"
	if _, err := e.Client.ReadCounter(context.Background(), "a", ""); shardcounter.ErrorCode(err) != shardcounter.EEXHAUSTED {
		t.Fatalf("the Go client's error for a 429: %v, want code %s", err, shardcounter.EEXHAUSTED)
	}
	metrics := string(e.Do(t, "GET", "/metrics", "").Body)
	for _, want := range []string{`shardcounter_auth_failures_total{protocol="http"} 102`, `shardcounter_auth_throttled_total{protocol="http"} 2`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(metrics, "auth_"))
		}
	}
	if n := strings.Count(logs.String(), "failed authentications"); n != 1 {
		t.Errorf("the burst was logged %d times, want once:\n%s", n, e.Logs.String())
	}
}

// TestWatchEndsWithToken checks that a watch stream ends when the token
// it was opened with is removed (SetAuthTokens), and goes on when
// another token is.
func TestWatchEndsWithToken(t *testing.T) {
	e := MustServe(t, EnvOptions{
		Server: shttp.ServerOptions{AuthTokens: []string{"old", "other"}},
	})
	srv := e.Server
	e.Client.Token = "old"
	e.MustCreate(t, "c", 1)
	req, _ := http.NewRequest("GET", e.URL+path("c")+"/watch", nil)
	req.Header.Set("Authorization", "Bearer old")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatalf("no first line of the stream: %v", err)
	}
	srv.SetAuthTokens([]string{"old", "new"}) // another token changed: the stream goes on
	srv.SetAuthTokens([]string{"new"})
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, br)
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch stream goes on after its token was removed")
	}
}

// TestPageTokenEdited checks that a page token edited by hand is refused
// even when it is still well-formed base64 of a well-formed token: every
// single-byte change of a real token's decoded bytes (its CRC-32 catches
// them all).
func TestPageTokenEdited(t *testing.T) {
	tok := shttp.EncodePageToken("post/", "post/2")
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		for _, x := range []byte{1, 0x20, 0x80} {
			b := append([]byte(nil), raw...)
			b[i] ^= x
			edited := base64.RawURLEncoding.EncodeToString(b)
			if got, err := shttp.DecodePageToken(edited, "post/"); err == nil {
				t.Fatalf("token with byte %d xor %#x accepted as %q", i, x, got)
			}
		}
	}
	if got, err := shttp.DecodePageToken(tok, "post/"); err != nil || got != "post/2" {
		t.Fatalf("the token itself: %q, %v", got, err)
	}
}
