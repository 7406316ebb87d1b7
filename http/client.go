package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
)

// Client is the Go client of the HTTP API. It implements
// shardcounter.CounterService, so code written against the engine runs
// against a remote server unchanged, and it returns the server's errors as
// *shardcounter.Error values with the server's code and message. It is
// safe for concurrent use; set its fields before the first call.
type Client struct {
	// URL is the server's base URL, e.g. http://127.0.0.1:8080.
	URL string

	// Token, when set, is sent as Authorization: Bearer Token, or, with
	// User, as the password of Basic credentials.
	Token string
	// User, when set, is the user of the server's --users-file whose
	// password Token is: the client sends Authorization: Basic. Without
	// it, Bearer names the user by its password.
	User string

	// HTTPClient sends the requests. Default: a client with a 30s timeout
	// that keeps up to 100 idle connections to the server.
	HTTPClient *http.Client
}

var _ shardcounter.CounterService = (*Client)(nil)

// NewClient returns a Client for the server at baseURL.
func NewClient(baseURL string) *Client {
	return &Client{URL: baseURL}
}

// defaultHTTPClient keeps up to 100 idle connections to a server, where
// http.DefaultTransport keeps 2: with many goroutines writing, the default
// would open and close a connection for most requests.
var defaultHTTPClient = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 100
	return &http.Client{Timeout: 30 * time.Second, Transport: t}
}()

// Ping reports whether the server and its store answer (GET /readyz).
func (c *Client) Ping(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/readyz", nil, nil, nil, false)
}

// Health reports whether the server process answers (GET /healthz).
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil, nil, false)
}

// do sends one request with in (if not nil) as its JSON body and decodes
// a 2xx reply into out (if not nil). write marks requests that change
// data, whose failures in transit leave the outcome unknown.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any, write bool) error {
	_, err := c.send(ctx, method, path, q, in, out, write)
	return err
}

// send is do that also returns the reply's status code.
func (c *Client) send(ctx context.Context, method, path string, q url.Values, in, out any, write bool) (int, error) {
	base := strings.TrimRight(c.URL, "/")
	u := base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("encoding %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return 0, shardcounter.Errorf(shardcounter.EINVALID, "server URL %q is not usable: %v", c.URL, err)
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		c.authorize(req)
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = defaultHTTPClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			// The caller gave up; say so rather than blame the server. A
			// write may have reached it, so, as for the server's replies,
			// an unknown outcome is outcome_unknown, never unavailable.
			code := shardcounter.EUNAVAILABLE
			if write {
				code = shardcounter.EOUTCOMEUNKNOWN
			}
			return 0, &shardcounter.Error{Code: code, OutcomeUnknown: write,
				Message: fmt.Sprintf("%s %s: gave up before the server replied (%v)", method, path, context.Cause(ctx))}
		}
		return 0, transportError(c.URL, err, write)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, responseError(resp, write)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16)) // so the connection is reused
		return resp.StatusCode, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		code := shardcounter.EINTERNAL
		if write {
			code = shardcounter.EOUTCOMEUNKNOWN
		}
		return resp.StatusCode, &shardcounter.Error{Code: code, OutcomeUnknown: write,
			Message: fmt.Sprintf("reply to %s %s cannot be decoded: %v", method, path, err)}
	}
	return resp.StatusCode, nil
}

// transportError classifies a failure to get any reply. A request that
// never left (no connection) was not applied: unavailable. Otherwise a
// write may have reached the server, so its outcome is unknown.
func transportError(server string, err error, write bool) error {
	var op *net.OpError
	neverSent := errors.As(err, &op) && op.Op == "dial"
	if !write || neverSent {
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE,
			"server %s cannot be reached (%v): check that it runs and that the server URL is right", server, unwrapURLError(err))
	}
	return shardcounter.OutcomeUnknownf("no reply from %s (%v)", server, unwrapURLError(err))
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// responseError turns a non-2xx reply into a *shardcounter.Error with the
// server's code and message. A reply without the API's error body (from a
// proxy, say) gets a code derived from its status.
//
// For a write, only the server's own error body can promise that nothing
// was applied (its 503 unavailable, its 4xx). A 5xx without that body
// comes from something in between, a proxy or load balancer, that may have
// forwarded the request before it failed (a 502 after the connection
// dropped, a 504 after its timeout): the write may have been applied. Such
// a reply is outcome_unknown; a 500 (a bug of the server) keeps its code
// internal but is flagged outcome unknown too.
func responseError(resp *http.Response, write bool) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var er ErrorResponse
	e := &shardcounter.Error{}
	apiBody := json.Unmarshal(b, &er) == nil && er.Error.Code != ""
	if apiBody {
		e.Code, e.Message = er.Error.Code, er.Error.Message
	} else {
		e.Code = FromErrorStatusCode(resp.StatusCode)
		msg := strings.TrimSpace(string(b))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		if msg == "" {
			msg = "no error body"
		}
		e.Message = fmt.Sprintf("server replied %s: %s", resp.Status, msg)
	}
	switch {
	case !write:
	case e.Code == shardcounter.EOUTCOMEUNKNOWN:
		e.OutcomeUnknown = true
	case e.Code == shardcounter.EINTERNAL || resp.StatusCode == http.StatusInternalServerError:
		e.Code, e.OutcomeUnknown = shardcounter.EINTERNAL, true
	case resp.StatusCode >= 500 && !apiBody:
		e.Message += shardcounter.OutcomeUnknownCure
		e.Code, e.OutcomeUnknown = shardcounter.EOUTCOMEUNKNOWN, true
	}
	return e
}

// authorize sets the request's credentials: Basic with User, else Bearer.
func (c *Client) authorize(req *http.Request) {
	if c.User != "" {
		req.SetBasicAuth(c.User, c.Token)
		return
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
}
