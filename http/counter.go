package http

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/shardcounter/shardcounter"
)

// CreateRequest is the body of PUT /v1/counters/{id}. Pointers tell an
// absent field from a zero one, so that {"shards":0} is refused rather
// than taken for "use the default".
type CreateRequest struct {
	Shards         *int                   `json:"shards,omitempty"`
	FollowersCount *int64                 `json:"followers_count,omitempty"`
	Visibility     string                 `json:"visibility,omitempty"`
	Kind           shardcounter.Kind      `json:"kind,omitempty"`
	Min            *int64                 `json:"min,omitempty"`
	Max            *int64                 `json:"max,omitempty"`
	Window         *shardcounter.Window   `json:"window,omitempty"`
	TTL            *shardcounter.Duration `json:"ttl,omitempty"`
}

// ReshardRequest is the body of PATCH /v1/counters/{id}.
type ReshardRequest struct {
	Shards *int `json:"shards,omitempty"`
}

// ListResponse is the body of GET /v1/counters.
type ListResponse struct {
	Counters      []*shardcounter.Counter `json:"counters"`
	NextPageToken string                  `json:"next_page_token,omitempty"`
}

// Field lists quoted in "unknown field" messages, so the message says what
// the caller may send instead.
const (
	createFields  = `"shards" (or "followers_count" and "visibility"), "kind", "min", "max", "window" and "ttl"`
	reshardFields = `"shards"`
)

// PUT /v1/counters/{id}
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	id, body, err := s.bodyOf(r, plainCounterID)
	var opts shardcounter.CreateOptions
	if err == nil {
		opts, err = decodeCreate(body)
	}
	var c *shardcounter.Counter
	created := false
	if err == nil {
		c, created, err = s.svc.CreateCounter(r.Context(), id, opts)
	}
	status := http.StatusOK // the counter existed with these options: a retry
	if err == nil && created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/counters/"+EscapeID(c.ID))
	}
	s.reply(w, r, status, withKind(c), err)
}

// decodeCreate decodes the body of PUT /v1/counters/{id}. An empty body
// means {}: the service's default shard count.
func decodeCreate(body []byte) (shardcounter.CreateOptions, error) {
	var req CreateRequest
	if err := decodeObject(body, &req, true, createFields, `{"shards":16}`); err != nil {
		return shardcounter.CreateOptions{}, err
	}
	var opts shardcounter.CreateOptions
	if req.Shards != nil {
		if req.FollowersCount != nil || req.Visibility != "" {
			return opts, shardcounter.Errorf(shardcounter.EINVALID,
				`body has both "shards" and "followers_count"/"visibility": give the shard count or the audience, not both`)
		}
		if err := shardcounter.ValidateShards(*req.Shards); err != nil {
			return opts, err
		}
		opts.Shards = *req.Shards
	}
	if req.FollowersCount != nil && *req.FollowersCount < 0 {
		return opts, shardcounter.Errorf(shardcounter.EINVALID,
			"followers_count is %d: give 0 or more", *req.FollowersCount)
	}
	switch req.Visibility {
	case "", "public", "protected":
	default:
		return opts, shardcounter.Errorf(shardcounter.EINVALID,
			`visibility is %q: give "public" or "protected"`, req.Visibility)
	}
	opts.FollowersCount = req.FollowersCount
	opts.Visibility = req.Visibility
	opts.Kind, opts.Min, opts.Max, opts.Window = req.Kind, req.Min, req.Max, req.Window
	if req.TTL != nil {
		if err := shardcounter.ValidateTTL(time.Duration(*req.TTL)); err != nil {
			return opts, err
		}
		opts.TTL = *req.TTL
	}
	// The rest of the spec as the service will check it, so that a bad
	// one is a 400 that never reaches it; the shard count is checked
	// above or chosen by the service.
	spec := shardcounter.Spec{Shards: shardcounter.MinShards, Kind: opts.Kind, Min: opts.Min, Max: opts.Max, Window: opts.Window}
	if err := shardcounter.ValidateSpec(spec); err != nil {
		return opts, err
	}
	return opts, nil
}

// withKind returns c with its kind spelled out: a store may record the
// default, sum, as "".
func withKind(c *shardcounter.Counter) *shardcounter.Counter {
	if c != nil && c.Kind == "" {
		c.Kind = shardcounter.KindSum
	}
	return c
}

// GET /v1/counters/{id}?consistency=strong|cached and ?last=DURATION
func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	id, err := counterID(r)
	var q url.Values
	if err == nil {
		q, err = query(r, "consistency", "last")
	}
	c := shardcounter.Consistency(q.Get("consistency"))
	if err == nil && c != "" && c != shardcounter.Strong && c != shardcounter.Cached {
		err = shardcounter.Errorf(shardcounter.EINVALID, "consistency is %q: give strong or cached", c)
	}
	var last shardcounter.Duration
	if err == nil && q.Has("last") {
		last, err = parseSpan("last", q.Get("last"))
		if err == nil && c == shardcounter.Cached {
			err = shardcounter.Errorf(shardcounter.EINVALID, "a read of the last span of time is strong: leave out consistency=cached")
		}
	}
	if err != nil {
		s.error(w, r, err)
		return
	}
	var reading *shardcounter.Reading
	switch {
	case last != 0:
		reading, err = s.svc.ReadWindow(r.Context(), id, time.Duration(last))
	case c == shardcounter.Cached:
		reading, err = s.svc.ReadCounter(r.Context(), id, c)
		if err == nil {
			s.metrics.ObserveCachedRead(time.Since(reading.AsOf))
		}
	default:
		reading, err = s.svc.ReadCounter(r.Context(), id, shardcounter.Strong)
	}
	s.reply(w, r, http.StatusOK, reading, err)
}

// parseSpan parses the query parameter name, a span of time such as 24h
// or 7d (shardcounter.ParseDuration).
func parseSpan(name, v string) (shardcounter.Duration, error) {
	d, err := shardcounter.ParseDuration(v)
	if err != nil {
		return 0, shardcounter.Errorf(shardcounter.EINVALID, "%s: %s", name, shardcounter.ErrorMessage(err))
	}
	return d, nil
}

// PATCH /v1/counters/{id}
func (s *Server) handleReshard(w http.ResponseWriter, r *http.Request) {
	id, body, err := s.bodyOf(r, plainCounterID)
	var shards int
	if err == nil {
		shards, err = decodeReshard(body)
	}
	var c *shardcounter.Counter
	if err == nil {
		c, err = s.svc.ReshardCounter(r.Context(), id, shards)
	}
	s.reply(w, r, http.StatusOK, withKind(c), err)
}

// decodeReshard decodes the body of PATCH /v1/counters/{id}, where the
// shard count is required.
func decodeReshard(body []byte) (int, error) {
	var req ReshardRequest
	if err := decodeObject(body, &req, false, reshardFields, `{"shards":32}`); err != nil {
		return 0, err
	}
	if req.Shards == nil {
		return 0, shardcounter.Errorf(shardcounter.EINVALID,
			`body has no "shards": send the new shard count, e.g. {"shards":32}`)
	}
	if err := shardcounter.ValidateShards(*req.Shards); err != nil {
		return 0, err
	}
	return *req.Shards, nil
}

// DELETE /v1/counters/{id}
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	id, err := plainCounterID(r)
	if err == nil {
		err = s.svc.DeleteCounter(r.Context(), id)
	}
	s.reply(w, r, http.StatusNoContent, nil, err)
}

// GET /v1/counters?prefix=P&limit=N&page_token=T
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	opts, err := listOptions(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	list, err := s.svc.ListCounters(r.Context(), opts)
	if err != nil {
		s.error(w, r, err)
		return
	}
	for _, c := range list.Counters {
		withKind(c)
	}
	resp := ListResponse{Counters: list.Counters}
	if resp.Counters == nil {
		resp.Counters = []*shardcounter.Counter{} // "counters":[], never null
	}
	if list.Next != "" {
		resp.NextPageToken = encodePageToken(opts.Prefix, list.Next)
	}
	s.writeJSON(w, http.StatusOK, resp)
}

// parseLimit parses a listing's limit parameter.
func parseLimit(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > shardcounter.MaxListLimit {
		return 0, shardcounter.Errorf(shardcounter.EINVALID,
			"limit is %q: give a whole number from 1 to %d", v, shardcounter.MaxListLimit)
	}
	return n, nil
}

// listOptions validates the query of a list request.
func listOptions(r *http.Request) (shardcounter.ListOptions, error) {
	q, err := query(r, "prefix", "limit", "page_token")
	if err != nil {
		return shardcounter.ListOptions{}, err
	}
	opts := shardcounter.ListOptions{Prefix: q.Get("prefix"), Limit: shardcounter.DefaultListLimit}
	if opts.Prefix != "" {
		if err := shardcounter.ValidateCounterID("prefix", opts.Prefix); err != nil {
			return opts, err
		}
	}
	if q.Has("limit") {
		if opts.Limit, err = parseLimit(q.Get("limit")); err != nil {
			return opts, err
		}
	}
	if t := q.Get("page_token"); t != "" {
		if opts.After, err = decodePageToken(t, opts.Prefix); err != nil {
			return opts, err
		}
	}
	return opts, nil
}

// counterID returns the request's counter id, validated.
func counterID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return "", err
	}
	return id, nil
}

// plainCounterID returns the request's counter id, validated, for the
// routes that take no query parameters.
func plainCounterID(r *http.Request) (string, error) {
	id, err := counterID(r)
	if err != nil {
		return "", err
	}
	_, err = query(r)
	return id, err
}

// EscapeID returns a counter id escaped as one path segment. Beyond
// url.PathEscape it escapes "." and "..", which HTTP path cleaning would
// otherwise resolve away.
func EscapeID(id string) string {
	switch id {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(id)
}

// CreateCounter implements shardcounter.CounterService. The server
// answers 201 for a new counter and 200 for an existing one with the same
// options.
func (c *Client) CreateCounter(ctx context.Context, id string, opts shardcounter.CreateOptions) (*shardcounter.Counter, bool, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, false, err
	}
	req := CreateRequest{FollowersCount: opts.FollowersCount, Visibility: opts.Visibility,
		Kind: opts.Kind, Min: opts.Min, Max: opts.Max, Window: opts.Window}
	if opts.Shards != 0 {
		req.Shards = &opts.Shards
	}
	if opts.TTL != 0 {
		req.TTL = &opts.TTL
	}
	var counter shardcounter.Counter
	status, err := c.send(ctx, http.MethodPut, counterPath(id), nil, req, &counter, false)
	if err != nil {
		return nil, false, err
	}
	return &counter, status == http.StatusCreated, nil
}

// ReadCounter implements shardcounter.CounterService.
func (c *Client) ReadCounter(ctx context.Context, id string, consistency shardcounter.Consistency) (*shardcounter.Reading, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	var q url.Values
	if consistency != "" {
		q = url.Values{"consistency": {string(consistency)}}
	}
	var reading shardcounter.Reading
	if err := c.do(ctx, http.MethodGet, counterPath(id), q, nil, &reading, false); err != nil {
		return nil, err
	}
	return &reading, nil
}

// ReadWindow implements shardcounter.CounterService with
// GET /v1/counters/{id}?last=DURATION.
func (c *Client) ReadWindow(ctx context.Context, id string, last time.Duration) (*shardcounter.Reading, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	if last <= 0 {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "last %v is not positive: give the span to read, such as 24h", last)
	}
	var reading shardcounter.Reading
	q := url.Values{"last": {shardcounter.Duration(last).String()}}
	if err := c.do(ctx, http.MethodGet, counterPath(id), q, nil, &reading, false); err != nil {
		return nil, err
	}
	return &reading, nil
}

// GetCounter implements shardcounter.CounterService. The API has no
// route of its own for a counter's metadata: the first counter of the
// listing with the id as its prefix is the counter itself when it exists,
// since no other id with that prefix sorts before it.
func (c *Client) GetCounter(ctx context.Context, id string) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	list, err := c.ListCounters(ctx, shardcounter.ListOptions{Prefix: id, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(list.Counters) == 0 || list.Counters[0].ID != id {
		return nil, shardcounter.CounterNotFound(id)
	}
	return list.Counters[0], nil
}

// ReshardCounter implements shardcounter.CounterService.
func (c *Client) ReshardCounter(ctx context.Context, id string, shards int) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	if err := shardcounter.ValidateShards(shards); err != nil {
		return nil, err
	}
	var counter shardcounter.Counter
	if err := c.do(ctx, http.MethodPatch, counterPath(id), nil, ReshardRequest{Shards: &shards}, &counter, false); err != nil {
		return nil, err
	}
	return &counter, nil
}

// DeleteCounter implements shardcounter.CounterService.
func (c *Client) DeleteCounter(ctx context.Context, id string) error {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, counterPath(id), nil, nil, nil, false)
}

// ListCounters implements shardcounter.CounterService. Page tokens stay
// inside the client: opts.After and the returned Next are counter ids, as
// for every CounterService.
func (c *Client) ListCounters(ctx context.Context, opts shardcounter.ListOptions) (*shardcounter.CounterList, error) {
	q := url.Values{}
	if opts.Prefix != "" {
		q.Set("prefix", opts.Prefix)
	}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.After != "" {
		q.Set("page_token", encodePageToken(opts.Prefix, opts.After))
	}
	var resp ListResponse
	if err := c.do(ctx, http.MethodGet, "/v1/counters", q, nil, &resp, false); err != nil {
		return nil, err
	}
	list := &shardcounter.CounterList{Counters: resp.Counters}
	if resp.NextPageToken != "" {
		next, err := decodePageToken(resp.NextPageToken, opts.Prefix)
		if err != nil {
			return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "server sent a page token this client cannot read: %s", shardcounter.ErrorMessage(err))
		}
		list.Next = next
	}
	return list, nil
}

// counterPath is the API path of a counter.
func counterPath(id string) string {
	return "/v1/counters/" + EscapeID(id)
}
