package http

import (
	"context"
	"net/http"

	"github.com/shardcounter/shardcounter"
)

const resetFields = `"value", "delete", "expires_at" and "keep_ttl"`

// decodeReset decodes the body of POST /v1/counters/{id}/reset; an empty
// body is {"value":0}.
func decodeReset(body []byte) (shardcounter.Reset, error) {
	var r shardcounter.Reset
	if err := decodeObject(body, &r, true, resetFields, `{"value":0}`); err != nil {
		return r, err
	}
	return r, shardcounter.ValidateReset(r)
}

// POST /v1/counters/{id}/reset: Redis's SET of an integer, GETSET and
// GETDEL.
func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	id, body, err := s.bodyOf(r, plainCounterID)
	var req shardcounter.Reset
	if err == nil {
		req, err = decodeReset(body)
	}
	var res *shardcounter.ResetResult
	if err == nil {
		rs, ok := s.svc.(shardcounter.Resetter)
		if !ok {
			err = shardcounter.Errorf(shardcounter.EINVALID, "this server's service cannot reset counters")
		} else {
			res, err = rs.ResetCounter(r.Context(), id, req)
		}
	}
	s.reply(w, r, http.StatusOK, res, err)
}

var _ shardcounter.Resetter = (*Client)(nil)

// ResetCounter implements shardcounter.Resetter with POST
// /v1/counters/{id}/reset. A reset is not retried by the client: a reply
// lost after the reset applied would make a retry reset again.
func (c *Client) ResetCounter(ctx context.Context, id string, r shardcounter.Reset) (*shardcounter.ResetResult, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	if err := shardcounter.ValidateReset(r); err != nil {
		return nil, err
	}
	var res shardcounter.ResetResult
	if err := c.do(ctx, http.MethodPost, counterPath(id)+"/reset", nil, r, &res, true); err != nil {
		return nil, err
	}
	return &res, nil
}
