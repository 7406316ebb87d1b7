package http

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/acl"
)

// WriteRequest is the body of POST /v1/counters/{id}/increment and
// .../decrement.
type WriteRequest struct {
	By        *int64 `json:"by,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// WritesRequest is the body of POST /v1/writes.
type WritesRequest struct {
	Writes []shardcounter.Write `json:"writes"`
}

// WritesResponse is the body of a successful POST /v1/writes.
type WritesResponse struct {
	Results []shardcounter.WriteResult `json:"results"`
}

// Field lists quoted in "unknown field" messages.
const (
	writeFields  = `"by" and "request_id"`
	writesFields = `"writes", whose items have "counter", "delta" (or "member" and "present"), "kind" and "request_id"`
)

// POST /v1/counters/{id}/increment
func (s *Server) handleIncrement(w http.ResponseWriter, r *http.Request) { s.handleWrite(w, r, false) }

// POST /v1/counters/{id}/decrement
func (s *Server) handleDecrement(w http.ResponseWriter, r *http.Request) { s.handleWrite(w, r, true) }

// POST /v1/counters/{id}/increment and .../decrement
func (s *Server) handleWrite(w http.ResponseWriter, r *http.Request, decrement bool) {
	id, body, err := s.bodyOf(r, plainCounterID)
	var delta int64
	var requestID string
	if err == nil {
		delta, requestID, err = decodeWrite(body, decrement)
	}
	var res *shardcounter.WriteResult
	if err == nil {
		res, err = s.svc.WriteCounter(r.Context(), shardcounter.Write{Counter: id, Delta: delta, RequestID: requestID})
	}
	if err == nil && res == nil {
		err = errors.New("WriteCounter returned neither a result nor an error")
	}
	if err == nil && res.Error != nil {
		err = res.Error
	}
	if err == nil {
		if b, ok := appendWriteResult(replyBuffers.Get().(*[]byte), res); ok {
			w.Header()["Content-Type"] = jsonContentType
			w.WriteHeader(s.writeStatus())
			w.Write(*b) //nolint:errcheck // the client is gone: nothing to tell it
			replyBuffers.Put(b)
			return
		}
	}
	s.reply(w, r, s.writeStatus(), res, err)
}

// replyBuffers hold the replies of appendWriteResult, so that a write's
// reply allocates nothing.
var replyBuffers = sync.Pool{New: func() any { return new([]byte) }}

// appendWriteResult writes into *b the reply nearly every increment gets,
// {"counter":ID,"applied":BOOL} and a newline, byte for byte what
// encoding/json writes for it (TestAppendWriteResult, FuzzAppendWriteResult),
// without its reflection. It says false, leaving the reply to writeJSON,
// for a result with any other field set or an id that JSON would escape.
func appendWriteResult(b *[]byte, res *shardcounter.WriteResult) (*[]byte, bool) {
	if res.Duplicate || res.Member != "" || res.Changed != nil || res.Value != nil || res.Error != nil {
		return b, false
	}
	for i := 0; i < len(res.Counter); i++ {
		if c := res.Counter[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return b, false
		}
	}
	out := append((*b)[:0], `{"counter":"`...)
	out = append(out, res.Counter...)
	out = append(out, `","applied":`...)
	out = strconv.AppendBool(out, res.Applied)
	*b = append(out, "}\n"...)
	return b, true
}

// writeStatus is the status of a successful write: 202 Accepted when the
// service answers writes before they are committed.
func (s *Server) writeStatus() int {
	if s.opts.AsyncWrites {
		return http.StatusAccepted
	}
	return http.StatusOK
}

// decodeWrite decodes the body of POST .../increment or .../decrement into
// a signed delta and a request id. An empty body means {"by":1}.
func decodeWrite(body []byte, decrement bool) (delta int64, requestID string, err error) {
	if by, ok := fastWrite(body); ok {
		if decrement {
			by = -by
		}
		return by, "", nil
	}
	return decodeWriteJSON(body, decrement)
}

// decodeWriteJSON is decodeWrite's general path: any body, through
// encoding/json and the strict check of its keys.
func decodeWriteJSON(body []byte, decrement bool) (delta int64, requestID string, err error) {
	var req WriteRequest
	if err := decodeObject(body, &req, true, writeFields, `{"by":5,"request_id":"abc"}`); err != nil {
		return 0, "", err
	}
	by := int64(1)
	if req.By != nil {
		by = *req.By
	}
	if by < 1 {
		op := "increment"
		if decrement {
			op = "decrement"
		}
		return 0, "", shardcounter.Errorf(shardcounter.EINVALID,
			"by is %d: give a whole number of at least 1 (the amount to %s by)", by, op)
	}
	if req.RequestID != "" {
		if err := shardcounter.ValidateID("request id", req.RequestID); err != nil {
			return 0, "", err
		}
	}
	if decrement {
		by = -by // by ≤ MaxInt64, so -by ≥ MinInt64+1 and cannot overflow
	}
	return by, req.RequestID, nil
}

// fastWrite reads the body nearly every increment sends, {"by":N},
// without encoding/json's reflection. Any other body (ok false) takes
// decodeWrite's general path, which reads this one alike (FuzzFastWrite).
func fastWrite(body []byte) (by int64, ok bool) { return fastInt(body, `{"by":`) }

// fastInt reads body when it is prefix, then N of 1 to 18 digits with no
// leading zero, then "}" and nothing else (no white space): the one
// number field a hot request's body holds, read without reflection.
func fastInt(body []byte, prefix string) (n int64, ok bool) {
	digits, ok := bytes.CutPrefix(body, []byte(prefix))
	if !ok {
		return 0, false
	}
	digits, ok = bytes.CutSuffix(digits, []byte("}"))
	if !ok || len(digits) == 0 || len(digits) > 18 || digits[0] == '0' {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// POST /v1/writes
func (s *Server) handleWrites(w http.ResponseWriter, r *http.Request) {
	_, err := query(r)
	var writes []shardcounter.Write
	if err == nil {
		writes, err = decodeWrites(requestOf(r).body, s.opts.MaxBatch)
	}
	if err != nil {
		s.error(w, r, err)
		return
	}
	if restricted(r) {
		ids := make([]string, len(writes))
		for i, wr := range writes {
			ids[i] = wr.Counter
		}
		if !s.permitKeys(w, r, "writeBatch", acl.AccessWrite, ids) {
			return
		}
	}
	results, err := s.svc.WriteBatch(r.Context(), writes)
	if err == nil && len(results) != len(writes) {
		err = fmt.Errorf("WriteBatch returned %d results for %d writes", len(results), len(writes))
	}
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, s.writeStatus(), WritesResponse{Results: results})
}

// decodeWrites decodes the body of POST /v1/writes and validates every
// item, so that one bad item fails the batch before anything is applied.
func decodeWrites(body []byte, maxBatch int) ([]shardcounter.Write, error) {
	var req WritesRequest
	if err := decodeObject(body, &req, false, writesFields, `{"writes":[{"counter":"likes","delta":1}]}`); err != nil {
		return nil, err
	}
	switch n := len(req.Writes); {
	case n == 0:
		return nil, shardcounter.Errorf(shardcounter.EINVALID,
			`"writes" is empty: give 1 to %d writes`, maxBatch)
	case n > maxBatch:
		return nil, shardcounter.Errorf(shardcounter.ETOOLARGE,
			"batch has %d writes: the limit is %d, split it into smaller batches", n, maxBatch)
	}
	for i, w := range req.Writes {
		if err := shardcounter.ValidateWrite(w); err != nil {
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "writes[%d]: %s", i, shardcounter.ErrorMessage(err))
		}
	}
	return req.Writes, nil
}

// WriteCounter implements shardcounter.CounterService with the increment
// or decrement route, or for a member write the member route (the batch
// route when it has a request id). A failure after the request may have
// reached the server is returned with OutcomeUnknown set: retry with the
// same request id to be sure the write counts once. The API does not
// return a counter's value after a write: Write.WantValue is ignored.
func (c *Client) WriteCounter(ctx context.Context, w shardcounter.Write) (*shardcounter.WriteResult, error) {
	if err := shardcounter.ValidateWrite(w); err != nil {
		return nil, err
	}
	if w.Member != "" && w.RequestID == "" && w.Kind == "" {
		return c.writeMember(ctx, w)
	}
	if w.Member != "" || w.Delta == math.MinInt64 || w.Kind != "" {
		// The member route takes no request id or kind, and -MinInt64
		// does not fit in "by": the batch route takes them as they are.
		results, err := c.WriteBatch(ctx, []shardcounter.Write{w})
		if err != nil {
			return nil, err
		}
		if results[0].Error != nil {
			return nil, results[0].Error
		}
		return &results[0], nil
	}
	action, by := "/increment", w.Delta
	if w.Delta < 0 {
		action, by = "/decrement", -w.Delta
	}
	var res shardcounter.WriteResult
	if err := c.do(ctx, http.MethodPost, counterPath(w.Counter)+action, nil,
		WriteRequest{By: &by, RequestID: w.RequestID}, &res, true); err != nil {
		return nil, err
	}
	return &res, nil
}

// WriteBatch implements shardcounter.CounterService with POST /v1/writes.
// An item that failed on its own has its Error set; see WriteCounter for
// errors whose outcome is unknown.
func (c *Client) WriteBatch(ctx context.Context, ws []shardcounter.Write) ([]shardcounter.WriteResult, error) {
	for i, w := range ws {
		if err := shardcounter.ValidateWrite(w); err != nil {
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "writes[%d]: %s", i, shardcounter.ErrorMessage(err))
		}
	}
	var resp WritesResponse
	if err := c.do(ctx, http.MethodPost, "/v1/writes", nil, WritesRequest{Writes: ws}, &resp, true); err != nil {
		return nil, err
	}
	if len(resp.Results) != len(ws) {
		return nil, shardcounter.OutcomeUnknownf("server returned %d results for %d writes", len(resp.Results), len(ws))
	}
	return resp.Results, nil
}
