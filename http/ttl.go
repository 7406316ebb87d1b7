package http

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/shardcounter/shardcounter"
)

// The routes of a name's deadline: GET reads it, PUT sets it, DELETE
// removes it (Redis's TTL, EXPIRE and PERSIST).

// TTLRequest is the body of PUT /v1/counters/{id}/ttl: the deadline as a
// time to live from now, or as a time.
type TTLRequest struct {
	TTL       *shardcounter.Duration `json:"ttl,omitempty"`
	ExpiresAt *time.Time             `json:"expires_at,omitempty"`
}

// TTLResponse is the body of PUT and DELETE /v1/counters/{id}/ttl: the
// name's state after the call, and whether the call changed it.
type TTLResponse struct {
	shardcounter.TTL
	Changed bool `json:"changed"`
}

const ttlFields = `"ttl" or "expires_at"`

// decodeTTL decodes the body of PUT /v1/counters/{id}/ttl into the
// deadline it asks for, taking now for a ttl's start. A deadline not
// after now is allowed: it deletes the name, as EXPIRE does.
func decodeTTL(body []byte, now time.Time) (time.Time, error) {
	var req TTLRequest
	if err := decodeObject(body, &req, false, ttlFields, `{"ttl":"30s"}`); err != nil {
		return time.Time{}, err
	}
	switch {
	case (req.TTL == nil) == (req.ExpiresAt == nil):
		return time.Time{}, shardcounter.Errorf(shardcounter.EINVALID, `give either "ttl" (such as "30s") or "expires_at" (RFC 3339), not both or neither`)
	case req.TTL != nil:
		if err := shardcounter.ValidateTTL(time.Duration(*req.TTL)); err != nil {
			return time.Time{}, err
		}
		return now.Add(time.Duration(*req.TTL)), nil
	}
	if req.ExpiresAt.After(now.Add(shardcounter.MaxTTL)) {
		return time.Time{}, shardcounter.Errorf(shardcounter.EINVALID, "expires_at %s is more than 100 years away: give a nearer time", req.ExpiresAt.Format(time.RFC3339))
	}
	return *req.ExpiresAt, nil
}

// expirer returns the service's deadlines, or an error saying it keeps
// none.
func (s *Server) expirer() (shardcounter.Expirer, error) {
	x, ok := s.svc.(shardcounter.Expirer)
	if !ok {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "this server's service keeps no deadlines")
	}
	return x, nil
}

// nameID returns the request's name: a counter id or a hash's name.
func nameID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if err := shardcounter.ValidateName("name", id); err != nil {
		return "", err
	}
	_, err := query(r)
	return id, err
}

// GET /v1/counters/{id}/ttl: 404 when the name holds nothing.
func (s *Server) handleGetTTL(w http.ResponseWriter, r *http.Request) {
	name, err := nameID(r)
	var x shardcounter.Expirer
	if err == nil {
		x, err = s.expirer()
	}
	var ttl *shardcounter.TTL
	if err == nil {
		ttl, err = x.CounterTTL(r.Context(), name)
	}
	if err == nil && !ttl.Exists {
		err = shardcounter.CounterNotFound(name)
	}
	s.reply(w, r, http.StatusOK, ttl, err)
}

// PUT /v1/counters/{id}/ttl: 404, changing nothing, when the name holds
// nothing.
func (s *Server) handleSetTTL(w http.ResponseWriter, r *http.Request) {
	s.changeTTL(w, r, func(ctx context.Context, x shardcounter.Expirer, name string) (bool, error) {
		at, err := decodeTTL(requestOf(r).body, time.Now())
		if err != nil {
			return false, err
		}
		ok, err := x.ExpireCounter(ctx, name, at)
		if err == nil && !ok {
			err = shardcounter.CounterNotFound(name)
		}
		return ok, err
	})
}

// DELETE /v1/counters/{id}/ttl: changed false when the name had no
// deadline; 404 when it holds nothing.
func (s *Server) handlePersist(w http.ResponseWriter, r *http.Request) {
	s.changeTTL(w, r, func(ctx context.Context, x shardcounter.Expirer, name string) (bool, error) {
		return x.PersistCounter(ctx, name)
	})
}

// changeTTL runs change on the request's name and replies the name's
// state after it.
func (s *Server) changeTTL(w http.ResponseWriter, r *http.Request, change func(context.Context, shardcounter.Expirer, string) (bool, error)) {
	name, err := nameID(r)
	var x shardcounter.Expirer
	if err == nil {
		x, err = s.expirer()
	}
	var resp TTLResponse
	if err == nil {
		resp.Changed, err = change(r.Context(), x, name)
	}
	var ttl *shardcounter.TTL
	if err == nil {
		ttl, err = x.CounterTTL(r.Context(), name)
	}
	if err == nil && !ttl.Exists && r.Method == http.MethodDelete {
		err = shardcounter.CounterNotFound(name)
	}
	if err != nil {
		s.error(w, r, err)
		return
	}
	resp.TTL = *ttl
	s.writeJSON(w, http.StatusOK, resp)
}

var _ shardcounter.Expirer = (*Client)(nil)

// ExpireCounter implements shardcounter.Expirer with PUT
// /v1/counters/{name}/ttl.
func (c *Client) ExpireCounter(ctx context.Context, name string, at time.Time) (bool, error) {
	if err := shardcounter.ValidateName("name", name); err != nil {
		return false, err
	}
	var resp TTLResponse
	err := c.do(ctx, http.MethodPut, counterPath(name)+"/ttl", nil, TTLRequest{ExpiresAt: &at}, &resp, false)
	if errors.Is(err, shardcounter.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// PersistCounter implements shardcounter.Expirer with DELETE
// /v1/counters/{name}/ttl.
func (c *Client) PersistCounter(ctx context.Context, name string) (bool, error) {
	if err := shardcounter.ValidateName("name", name); err != nil {
		return false, err
	}
	var resp TTLResponse
	err := c.do(ctx, http.MethodDelete, counterPath(name)+"/ttl", nil, nil, &resp, false)
	if errors.Is(err, shardcounter.ErrNotFound) {
		return false, nil
	}
	return resp.Changed, err
}

// CounterTTL implements shardcounter.Expirer with GET
// /v1/counters/{name}/ttl.
func (c *Client) CounterTTL(ctx context.Context, name string) (*shardcounter.TTL, error) {
	if err := shardcounter.ValidateName("name", name); err != nil {
		return nil, err
	}
	var ttl shardcounter.TTL
	err := c.do(ctx, http.MethodGet, counterPath(name)+"/ttl", nil, nil, &ttl, false)
	if errors.Is(err, shardcounter.ErrNotFound) {
		return &shardcounter.TTL{Name: name, RemainingMS: -2}, nil
	}
	if err != nil {
		return nil, err
	}
	return &ttl, nil
}
