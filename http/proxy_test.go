package http_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// Ways the reply of a request that the server handled in full is lost
// between the server and a reverse proxy.
const (
	deliver = iota // the reply goes through
	drop           // the connection closes instead: the proxy answers 502
	stall          // no reply before the proxy's timeout: it answers 504
)

// proxied is a real server over the real engine behind a real reverse
// proxy (httputil.ReverseProxy), as nginx or a load balancer would sit in
// front of it, with a switch that loses the server's replies after the
// server has handled the request.
type proxied struct {
	*Env
	Proxy  *shttp.Client
	lose   atomic.Int32
	served atomic.Int32 // requests the server handled in full
}

func mustServeProxied(t *testing.T) *proxied {
	t.Helper()
	p := &proxied{}
	p.Env = MustServe(t, EnvOptions{Front: func(api http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mode := p.lose.Load()
			if mode == deliver {
				api.ServeHTTP(w, r)
				return
			}
			api.ServeHTTP(httptest.NewRecorder(), r) // handled, reply lost
			p.served.Add(1)
			switch mode {
			case drop:
				conn, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				conn.Close()
			case stall:
				<-r.Context().Done() // the proxy gives up and closes
			}
		})
	}})
	backend, err := url.Parse(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(backend) },
		Transport: &http.Transport{ResponseHeaderTimeout: 200 * time.Millisecond},
		// As nginx does: 504 when the upstream does not answer in time,
		// 502 when it fails otherwise; plain text, not the API's body.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				http.Error(w, "504 Gateway Time-out", http.StatusGatewayTimeout)
				return
			}
			http.Error(w, "502 Bad Gateway", http.StatusBadGateway)
		},
	}
	ts := httptest.NewServer(proxy)
	t.Cleanup(ts.Close)
	p.Proxy = shttp.NewClient(ts.URL)
	return p
}

// TestClientBehindProxy checks that a write whose reply a proxy replaced
// with a 502 or 504 is reported as outcome_unknown, not
// as unavailable: the server had applied it.
func TestClientBehindProxy(t *testing.T) {
	ctx := context.Background()
	for name, mode := range map[string]int32{"502": drop, "504": stall} {
		t.Run(name, func(t *testing.T) {
			p := mustServeProxied(t)
			p.MustCreate(t, "c", 2)

			p.lose.Store(mode)
			w := shardcounter.Write{Counter: "c", Delta: 5, RequestID: "req-1"}
			_, err := p.Proxy.WriteCounter(ctx, w)
			if !shardcounter.IsOutcomeUnknown(err) || shardcounter.ErrorCode(err) != shardcounter.EOUTCOMEUNKNOWN {
				t.Fatalf("WriteCounter through a %s: %#v, want outcome_unknown", name, err)
			}
			_, err = p.Proxy.WriteBatch(ctx, []shardcounter.Write{{Counter: "c", Delta: 1, RequestID: "req-2"}})
			if !shardcounter.IsOutcomeUnknown(err) || shardcounter.ErrorCode(err) != shardcounter.EOUTCOMEUNKNOWN {
				t.Fatalf("WriteBatch through a %s: %#v, want outcome_unknown", name, err)
			}
			// A read has no outcome to be unsure of: unavailable, retry.
			_, err = p.Proxy.ReadCounter(ctx, "c", "")
			if !errors.Is(err, shardcounter.ErrUnavailable) {
				t.Fatalf("ReadCounter through a %s: %v, want unavailable", name, err)
			}
			if got := p.served.Load(); got != 3 {
				t.Fatalf("the server handled %d requests, want 3", got)
			}
			// Both writes were applied: "unavailable" would have been a lie.
			p.lose.Store(deliver)
			if got := p.MustValue(t, "c"); got != 6 {
				t.Fatalf("value %d, want 6: both writes applied", got)
			}
			// The cure the error names: retry with the same request id.
			res, err := p.Proxy.WriteCounter(ctx, w)
			if err != nil || !res.Duplicate {
				t.Fatalf("retry: %+v, %v; want a duplicate", res, err)
			}
		})
	}
}

// TestClientProxyErrors checks the client's reading of replies that do
// not carry the API's error body, and of 500s.
func TestClientProxyErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		status      int
		body        string
		readCode    string
		writeCode   string
		writeUnsure bool
	}{
		{http.StatusBadGateway, "bad gateway", shardcounter.EUNAVAILABLE, shardcounter.EOUTCOMEUNKNOWN, true},
		{http.StatusGatewayTimeout, "", shardcounter.EUNAVAILABLE, shardcounter.EOUTCOMEUNKNOWN, true},
		{http.StatusServiceUnavailable, "<html>no healthy upstream</html>", shardcounter.EUNAVAILABLE, shardcounter.EOUTCOMEUNKNOWN, true},
		{http.StatusInternalServerError, "oops", shardcounter.EINTERNAL, shardcounter.EINTERNAL, true},
		// A 500 is outcome unknown whatever its body says.
		{http.StatusInternalServerError, `{"error":{"code":"unavailable","message":"x"}}`, shardcounter.EUNAVAILABLE, shardcounter.EINTERNAL, true},
		// The API's own 503 promises that nothing was applied.
		{http.StatusServiceUnavailable, `{"error":{"code":"unavailable","message":"store down"}}`, shardcounter.EUNAVAILABLE, shardcounter.EUNAVAILABLE, false},
		{http.StatusNotFound, "not found", shardcounter.ENOTFOUND, shardcounter.ENOTFOUND, false},
	} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(c.status)
			w.Write([]byte(c.body))
		}))
		client := shttp.NewClient(ts.URL)
		_, rerr := client.ReadCounter(ctx, "x", "")
		_, werr := client.WriteCounter(ctx, shardcounter.Write{Counter: "x", Delta: 1})
		ts.Close()
		if got := shardcounter.ErrorCode(rerr); got != c.readCode || shardcounter.IsOutcomeUnknown(rerr) {
			t.Errorf("%d %q: read error %#v, want code %s", c.status, c.body, rerr, c.readCode)
		}
		if got := shardcounter.ErrorCode(werr); got != c.writeCode || shardcounter.IsOutcomeUnknown(werr) != c.writeUnsure {
			t.Errorf("%d %q: write error %#v, want code %s, outcome unknown %v", c.status, c.body, werr, c.writeCode, c.writeUnsure)
		}
	}
}
