package http

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/acl"
)

// ReadsRequest is the body of POST /v1/reads.
type ReadsRequest struct {
	Counters    []string                 `json:"counters"`
	Consistency shardcounter.Consistency `json:"consistency,omitempty"`
}

// ReadsResponse is the body of a successful POST /v1/reads: one item per
// id asked for, in order.
type ReadsResponse struct {
	Readings []ReadItem `json:"readings"`
}

// ReadItem is one counter of a batch read: its reading, or, for a counter
// that could not be read (not_found), its id and error. The outer ID
// stands for the reading's own in JSON, so the item has one "id" either
// way.
type ReadItem struct {
	ID string `json:"id"`
	*shardcounter.Reading
	Error *ErrorBody `json:"error,omitempty"`
}

const readsFields = `"counters" and "consistency"`

// POST /v1/reads
func (s *Server) handleReads(w http.ResponseWriter, r *http.Request) {
	_, err := query(r)
	var req ReadsRequest
	if err == nil {
		req, err = decodeReads(requestOf(r).body)
		if err == nil && restricted(r) && !s.permitKeys(w, r, "readBatch", acl.AccessRead, req.Counters) {
			return
		}
	}
	var results []shardcounter.ReadResult
	if err == nil {
		results, err = s.svc.ReadCounters(r.Context(), req.Counters, req.Consistency)
	}
	if err == nil && len(results) != len(req.Counters) {
		err = fmt.Errorf("ReadCounters returned %d results for %d counters", len(results), len(req.Counters))
	}
	if err != nil {
		s.error(w, r, err)
		return
	}
	resp := ReadsResponse{Readings: make([]ReadItem, len(results))}
	for i, res := range results {
		item := ReadItem{ID: req.Counters[i], Reading: res.Reading}
		switch {
		case res.Err != nil:
			item.Reading = nil
			item.Error = &ErrorBody{Code: shardcounter.ErrorCode(res.Err), Message: shardcounter.ErrorMessage(res.Err)}
			if item.Error.Code == shardcounter.EINTERNAL {
				s.opts.Logger.Error("internal error reading one counter of a batch", "request_id", requestOf(r).id, "counter", req.Counters[i], "error", res.Err)
			}
		case res.Reading == nil:
			s.error(w, r, fmt.Errorf("ReadCounters returned neither a reading nor an error for %q", req.Counters[i]))
			return
		}
		resp.Readings[i] = item
	}
	s.writeJSON(w, http.StatusOK, resp)
}

// decodeReads decodes the body of POST /v1/reads: 1 to MaxReadBatch
// valid ids and a consistency.
func decodeReads(body []byte) (ReadsRequest, error) {
	var req ReadsRequest
	if err := decodeObject(body, &req, false, readsFields, `{"counters":["likes","views"],"consistency":"cached"}`); err != nil {
		return req, err
	}
	return req, checkReads(&req)
}

// checkReads checks a batch read, setting the default consistency.
func checkReads(req *ReadsRequest) error {
	if len(req.Counters) == 0 {
		return shardcounter.Errorf(shardcounter.EINVALID, `"counters" is empty: give 1 to %d counter ids`, shardcounter.MaxReadBatch)
	}
	if err := shardcounter.CheckReadBatch(len(req.Counters)); err != nil {
		return err
	}
	for i, id := range req.Counters {
		if err := shardcounter.ValidateID("counter id", id); err != nil {
			return shardcounter.Errorf(shardcounter.EINVALID, "counters[%d]: %s", i, shardcounter.ErrorMessage(err))
		}
	}
	switch req.Consistency {
	case "":
		req.Consistency = shardcounter.Strong
	case shardcounter.Strong, shardcounter.Cached:
	default:
		return shardcounter.Errorf(shardcounter.EINVALID, "consistency is %q: give strong or cached", req.Consistency)
	}
	return nil
}

// AllRetained is the span a series without last reads: longer than any
// window's retention, so every bucket the counter keeps.
const AllRetained = shardcounter.Duration(100 * 365 * 24 * time.Hour)

// seriesQuery parses the query of GET .../series: last, a span of time
// (default: all the counter retains), and bucket, the width of the
// buckets (default: the counter's own).
func seriesQuery(q url.Values) (last, bucket shardcounter.Duration, err error) {
	last = AllRetained
	if q.Has("last") {
		if last, err = parseSpan("last", q.Get("last")); err != nil {
			return 0, 0, err
		}
	}
	if q.Has("bucket") {
		if bucket, err = parseSpan("bucket", q.Get("bucket")); err != nil {
			return 0, 0, err
		}
	}
	return last, bucket, nil
}

// GET /v1/counters/{id}/series?last=DURATION&bucket=DURATION
func (s *Server) handleSeries(w http.ResponseWriter, r *http.Request) {
	id, err := counterID(r)
	var q url.Values
	if err == nil {
		q, err = query(r, "last", "bucket")
	}
	var last, bucket shardcounter.Duration
	if err == nil {
		last, bucket, err = seriesQuery(q)
	}
	var series *shardcounter.Series
	if err == nil {
		series, err = s.svc.ReadSeries(r.Context(), id, time.Duration(last), time.Duration(bucket))
	}
	if err == nil && series.Buckets == nil {
		series.Buckets = []shardcounter.Bucket{} // "buckets":[], never null
	}
	s.reply(w, r, http.StatusOK, series, err)
}

// GET /v1/counters/{id}/shards
func (s *Server) handleShards(w http.ResponseWriter, r *http.Request) {
	id, err := plainCounterID(r)
	var p *shardcounter.Placement
	if err == nil {
		p, err = s.svc.Placement(r.Context(), id)
	}
	s.reply(w, r, http.StatusOK, p, err)
}

// ReadCounters implements shardcounter.CounterService with POST
// /v1/reads. A counter that could not be read has its error in its
// result, as a *shardcounter.Error.
func (c *Client) ReadCounters(ctx context.Context, ids []string, consistency shardcounter.Consistency) ([]shardcounter.ReadResult, error) {
	req := ReadsRequest{Counters: ids, Consistency: consistency}
	if err := checkReads(&req); err != nil {
		return nil, err
	}
	var resp ReadsResponse
	if err := c.do(ctx, http.MethodPost, "/v1/reads", nil, req, &resp, false); err != nil {
		return nil, err
	}
	if len(resp.Readings) != len(ids) {
		return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "server returned %d readings for %d counters", len(resp.Readings), len(ids))
	}
	results := make([]shardcounter.ReadResult, len(ids))
	for i, item := range resp.Readings {
		switch {
		case item.Error != nil:
			results[i].Err = &shardcounter.Error{Code: item.Error.Code, Message: item.Error.Message}
		case item.Reading != nil:
			item.Reading.ID = item.ID
			results[i].Reading = item.Reading
		default:
			return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "server returned neither a reading nor an error for %q", ids[i])
		}
	}
	return results, nil
}

// ReadSeries implements shardcounter.CounterService with
// GET /v1/counters/{id}/series.
func (c *Client) ReadSeries(ctx context.Context, id string, last, bucket time.Duration) (*shardcounter.Series, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	if last <= 0 || bucket < 0 {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "last %v and bucket %v: give a positive span, and a bucket of 0 (the counter's own) or more", last, bucket)
	}
	q := url.Values{"last": {shardcounter.Duration(last).String()}}
	if bucket != 0 {
		q.Set("bucket", shardcounter.Duration(bucket).String())
	}
	var series shardcounter.Series
	if err := c.do(ctx, http.MethodGet, counterPath(id)+"/series", q, nil, &series, false); err != nil {
		return nil, err
	}
	return &series, nil
}

// Placement implements shardcounter.CounterService with
// GET /v1/counters/{id}/shards.
func (c *Client) Placement(ctx context.Context, id string) (*shardcounter.Placement, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	var p shardcounter.Placement
	if err := c.do(ctx, http.MethodGet, counterPath(id)+"/shards", nil, nil, &p, false); err != nil {
		return nil, err
	}
	return &p, nil
}
