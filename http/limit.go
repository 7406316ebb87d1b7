package http

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/shardcounter/shardcounter"
)

// Rate limits (docs/LIMITS.md): PUT, GET and DELETE /v1/limits/{name},
// GET /v1/limits, POST /v1/limits/{name}/keys/{key}/take and /peek, and
// DELETE /v1/limits/{name}/keys/{key}. The routes are served when the
// service is also a shardcounter.LimitService (the engine is, and so is
// the Client); they are 404 otherwise.

// LimitsResponse is the body of GET /v1/limits.
type LimitsResponse struct {
	Limits []*shardcounter.Limit `json:"limits"`
}

// TakeRequest is the body of POST /v1/limits/{name}/keys/{key}/take. A
// Cost that is absent is 1; a take retried with its RequestID answers the
// decision first recorded and takes nothing more.
type TakeRequest struct {
	Cost      *int64 `json:"cost,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// PeekRequest is the body of POST /v1/limits/{name}/keys/{key}/peek: a
// peek records nothing, so it has no request id.
type PeekRequest struct {
	Cost *int64 `json:"cost,omitempty"`
}

const (
	limitFields   = `"kind", "limit", "period", "burst" and "bucket"`
	limitExample  = `{"kind":"fixed","limit":300,"period":"10s"}`
	takeFields    = `"cost" and "request_id"`
	takeExample   = `{"cost":1,"request_id":"abc"}`
	peekFields    = `"cost"`
	peekExample   = `{"cost":1}`
	limitKeysPart = "/keys/"
)

// servesLimits reports whether the server serves the /v1/limits routes:
// when its service is a shardcounter.LimitService.
func (s *Server) servesLimits() bool { return s.limits != nil }

// limitName returns the request's limit name, validated, refusing any
// query parameter.
func limitName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if err := shardcounter.ValidateLimitName(name); err != nil {
		return "", err
	}
	_, err := query(r)
	return name, err
}

// limitKey returns the request's limit name and key, validated.
func limitKey(r *http.Request) (string, string, error) {
	name, err := limitName(r)
	if err != nil {
		return "", "", err
	}
	key := r.PathValue("key")
	if err := shardcounter.ValidateName("limit key", key); err != nil {
		return "", "", err
	}
	return name, key, nil
}

// DecodeLimitPolicy decodes and validates the body of PUT
// /v1/limits/{name}: a policy, its defaults filled in.
func DecodeLimitPolicy(body []byte) (shardcounter.LimitPolicy, error) {
	var p shardcounter.LimitPolicy
	if err := decodeObject(body, &p, false, limitFields, limitExample); err != nil {
		return p, err
	}
	if err := shardcounter.ValidateLimitPolicy(p); err != nil {
		return p, err
	}
	return p.WithDefaults(), nil
}

// DecodeTake decodes and validates the body of a take (peek false) or a
// peek: the cost (1 when absent or the body is empty) and, for a take,
// the request id.
func DecodeTake(body []byte, peek bool) (cost int64, requestID string, err error) {
	if cost, ok := fastTake(body); ok {
		return cost, "", nil // at least 1: valid
	}
	return decodeTakeJSON(body, peek)
}

// decodeTakeJSON is DecodeTake's general path: any body, through
// encoding/json and the strict check of its keys.
func decodeTakeJSON(body []byte, peek bool) (cost int64, requestID string, err error) {
	var c *int64
	if peek {
		var req PeekRequest
		err = decodeObject(body, &req, true, peekFields, peekExample)
		c = req.Cost
	} else {
		var req TakeRequest
		err = decodeObject(body, &req, true, takeFields, takeExample)
		c, requestID = req.Cost, req.RequestID
	}
	if err != nil {
		return 0, "", err
	}
	cost = 1
	if c != nil {
		cost = *c
	}
	if err := shardcounter.ValidateTake(cost); err != nil {
		return 0, "", err
	}
	if requestID != "" {
		if err := shardcounter.ValidateID("request id", requestID); err != nil {
			return 0, "", err
		}
	}
	return cost, requestID, nil
}

// PUT /v1/limits/{name}
func (s *Server) handleCreateLimit(w http.ResponseWriter, r *http.Request) {
	name, body, err := s.bodyOf(r, limitName)
	var p shardcounter.LimitPolicy
	if err == nil {
		p, err = DecodeLimitPolicy(body)
	}
	var l *shardcounter.Limit
	created := false
	if err == nil {
		l, created, err = s.limits.CreateLimit(r.Context(), name, p)
	}
	status := http.StatusOK
	if err == nil && created {
		status = http.StatusCreated
		w.Header().Set("Location", limitPath(name))
	}
	s.reply(w, r, status, l, err)
}

// GET /v1/limits/{name}
func (s *Server) handleGetLimit(w http.ResponseWriter, r *http.Request) {
	name, err := limitName(r)
	var l *shardcounter.Limit
	if err == nil {
		l, err = s.limits.GetLimit(r.Context(), name)
	}
	s.reply(w, r, http.StatusOK, l, err)
}

// GET /v1/limits
func (s *Server) handleListLimits(w http.ResponseWriter, r *http.Request) {
	_, err := query(r)
	var list []*shardcounter.Limit
	if err == nil {
		list, err = s.limits.ListLimits(r.Context())
	}
	if list == nil {
		list = []*shardcounter.Limit{}
	}
	s.reply(w, r, http.StatusOK, LimitsResponse{Limits: list}, err)
}

// DELETE /v1/limits/{name}
func (s *Server) handleDeleteLimit(w http.ResponseWriter, r *http.Request) {
	name, err := limitName(r)
	if err == nil {
		err = s.limits.DeleteLimit(r.Context(), name)
	}
	s.reply(w, r, http.StatusNoContent, nil, err)
}

// POST /v1/limits/{name}/keys/{key}/take
func (s *Server) handleTake(w http.ResponseWriter, r *http.Request) { s.take(w, r, false) }

// POST /v1/limits/{name}/keys/{key}/peek
func (s *Server) handlePeek(w http.ResponseWriter, r *http.Request) { s.take(w, r, true) }

func (s *Server) take(w http.ResponseWriter, r *http.Request, peek bool) {
	name, key, err := limitKey(r)
	var cost int64
	var requestID string
	if err == nil {
		cost, requestID, err = DecodeTake(requestOf(r).body, peek)
	}
	var res *shardcounter.LimitResult
	if err == nil {
		if peek {
			res, err = s.limits.Peek(r.Context(), name, key, cost)
		} else {
			res, err = s.limits.Take(r.Context(), name, key, cost, requestID)
		}
	}
	if err == nil {
		p := res.Policy
		if p.Kind == "" {
			// A service that does not say the policy (a Client, when this
			// server is a proxy): the definition, as it reads it.
			var l *shardcounter.Limit
			if l, err = s.limits.GetLimit(r.Context(), name); err == nil {
				p = l.LimitPolicy
			}
		}
		if err == nil {
			s.setRateLimitHeaders(w.Header(), name, p, res)
			b := appendLimitResult(replyBuffers.Get().(*[]byte), res)
			w.Header()["Content-Type"] = jsonContentType
			w.WriteHeader(http.StatusOK)
			w.Write(*b) //nolint:errcheck // the client is gone: nothing to tell it
			replyBuffers.Put(b)
			return
		}
	}
	s.reply(w, r, http.StatusOK, res, err)
}

// DELETE /v1/limits/{name}/keys/{key}
func (s *Server) handleResetLimitKey(w http.ResponseWriter, r *http.Request) {
	name, key, err := limitKey(r)
	if err == nil {
		err = s.limits.ResetLimitKey(r.Context(), name, key)
	}
	s.reply(w, r, http.StatusNoContent, nil, err)
}

// The headers of the IETF httpapi working group's draft "RateLimit
// header fields for HTTP" (draft-ietf-httpapi-ratelimit-headers): each is
// a Structured Field List of one Item, a String naming the policy, with
// Integer parameters. RateLimit-Policy gives the quota (q) and the window
// in seconds (w); RateLimit, what remains (r) and the seconds until the
// quota is whole again (t). A proxy or an app copies them to its own 429.

// RateLimitPolicyHeader is the RateLimit-Policy field of limit name of
// policy p: "NAME";q=QUOTA;w=SECONDS. The window is the period of a fixed
// or sliding window, and for gcra the time an empty bucket takes to fill
// to its burst; seconds are rounded up.
func RateLimitPolicyHeader(name string, p shardcounter.LimitPolicy) string {
	p = p.WithDefaults()
	w := time.Duration(p.Period)
	if p.Kind == shardcounter.LimitGCRA && p.Limit > 0 {
		w = time.Duration(p.Burst) * (time.Duration(p.Period) / time.Duration(p.Limit))
	}
	return sfString(name) + ";q=" + strconv.FormatInt(p.Quota(), 10) + ";w=" + strconv.FormatInt(ceilDiv(int64(w), int64(time.Second)), 10)
}

// RateLimitHeader is the RateLimit field of a take's or a peek's answer
// under limit name: "NAME";r=REMAINING;t=SECONDS, t rounded up.
func RateLimitHeader(name string, res *shardcounter.LimitResult) string {
	var buf [96]byte // a name of up to about 60 bytes: one allocation, the string
	b := appendSFString(buf[:0], name)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, max(res.Remaining, 0), 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, ceilDiv(max(res.ResetAfterMS, 0), 1000), 10)
	return string(b)
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// sfString writes a limit's name as a Structured Field String (RFC 9651):
// printable ASCII, with '"' and '\' escaped. A String holds nothing else,
// so a name with other bytes is written URL-escaped, as in the route's
// path.
func sfString(name string) string {
	return string(appendSFString(make([]byte, 0, len(name)+2), name))
}

// appendSFString appends sfString(name) to b.
func appendSFString(b []byte, name string) []byte {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c > 0x7e {
			name = EscapeID(name)
			break
		}
	}
	b = append(b, '"')
	for i := 0; i < len(name); i++ {
		if c := name[i]; c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, name[i])
	}
	return append(b, '"')
}

var _ shardcounter.LimitService = (*Client)(nil)

func limitPath(name string) string { return "/v1/limits/" + EscapeID(name) }

func limitKeyPath(name, key string) string { return limitPath(name) + limitKeysPart + EscapeID(key) }

// CreateLimit implements shardcounter.LimitService.
func (c *Client) CreateLimit(ctx context.Context, name string, p shardcounter.LimitPolicy) (*shardcounter.Limit, bool, error) {
	if err := shardcounter.ValidateLimitName(name); err != nil {
		return nil, false, err
	}
	if err := shardcounter.ValidateLimitPolicy(p); err != nil {
		return nil, false, err
	}
	var l shardcounter.Limit
	status, err := c.send(ctx, http.MethodPut, limitPath(name), nil, p.WithDefaults(), &l, true)
	if err != nil {
		return nil, false, err
	}
	return &l, status == http.StatusCreated, nil
}

// GetLimit implements shardcounter.LimitService.
func (c *Client) GetLimit(ctx context.Context, name string) (*shardcounter.Limit, error) {
	if err := shardcounter.ValidateLimitName(name); err != nil {
		return nil, err
	}
	var l shardcounter.Limit
	if err := c.do(ctx, http.MethodGet, limitPath(name), nil, nil, &l, false); err != nil {
		return nil, err
	}
	return &l, nil
}

// ListLimits implements shardcounter.LimitService.
func (c *Client) ListLimits(ctx context.Context) ([]*shardcounter.Limit, error) {
	var out LimitsResponse
	if err := c.do(ctx, http.MethodGet, "/v1/limits", nil, nil, &out, false); err != nil {
		return nil, err
	}
	return out.Limits, nil
}

// DeleteLimit implements shardcounter.LimitService.
func (c *Client) DeleteLimit(ctx context.Context, name string) error {
	if err := shardcounter.ValidateLimitName(name); err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, limitPath(name), nil, nil, nil, true)
}

// Take implements shardcounter.LimitService. A take whose reply is lost
// has an unknown outcome (shardcounter.Error.OutcomeUnknown); retried with
// the same request id, it is charged once.
func (c *Client) Take(ctx context.Context, name, key string, cost int64, requestID string) (*shardcounter.LimitResult, error) {
	if err := checkTake(name, key, cost); err != nil {
		return nil, err
	}
	if requestID != "" {
		if err := shardcounter.ValidateID("request id", requestID); err != nil {
			return nil, err
		}
	}
	var res shardcounter.LimitResult
	if err := c.do(ctx, http.MethodPost, limitKeyPath(name, key)+"/take", nil, TakeRequest{Cost: &cost, RequestID: requestID}, &res, true); err != nil {
		return nil, err
	}
	return &res, nil
}

// Peek implements shardcounter.LimitService.
func (c *Client) Peek(ctx context.Context, name, key string, cost int64) (*shardcounter.LimitResult, error) {
	if err := checkTake(name, key, cost); err != nil {
		return nil, err
	}
	var res shardcounter.LimitResult
	if err := c.do(ctx, http.MethodPost, limitKeyPath(name, key)+"/peek", nil, PeekRequest{Cost: &cost}, &res, false); err != nil {
		return nil, err
	}
	return &res, nil
}

// ResetLimitKey implements shardcounter.LimitService.
func (c *Client) ResetLimitKey(ctx context.Context, name, key string) error {
	if err := checkTake(name, key, 1); err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, limitKeyPath(name, key), nil, nil, nil, true)
}

// checkTake checks what the client sends before it sends it, as the
// server would.
func checkTake(name, key string, cost int64) error {
	if err := shardcounter.ValidateLimitName(name); err != nil {
		return err
	}
	if err := shardcounter.ValidateName("limit key", key); err != nil {
		return err
	}
	return shardcounter.ValidateTake(cost)
}
