package http

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/acl"
)

// Rankings (docs/RANKINGS.md): PUT, GET and DELETE /v1/rankings/{name},
// GET /v1/rankings. The routes are served when the service is also a
// shardcounter.RankingService (the engine is, and so is the Client); they
// are 404 otherwise.

// DefaultTopK is the k of GET /v1/rankings/{name} without one: a page of
// "most liked" shows about ten.
const DefaultTopK = 10

// RankingsResponse is the body of GET /v1/rankings.
type RankingsResponse struct {
	Rankings []*shardcounter.Ranking `json:"rankings"`
}

const (
	rankingFields  = `"prefix", "last", "size" and "max_staleness"`
	rankingExample = `{"prefix":"post:","size":1000}`
)

// servesRankings reports whether the server serves the /v1/rankings
// routes: when its service is a shardcounter.RankingService.
func (s *Server) servesRankings() bool { return s.rankings != nil }

// rankingName returns the request's ranking name, validated.
func rankingName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if err := shardcounter.ValidateName("ranking name", name); err != nil {
		return "", err
	}
	return name, nil
}

func plainRankingName(r *http.Request) (string, error) {
	name, err := rankingName(r)
	if err != nil {
		return "", err
	}
	_, err = query(r)
	return name, err
}

// DecodeRankingOptions decodes and validates the body of PUT
// /v1/rankings/{name}.
func DecodeRankingOptions(name string, body []byte) (shardcounter.RankingOptions, error) {
	var o shardcounter.RankingOptions
	if err := decodeObject(body, &o, true, rankingFields, rankingExample); err != nil {
		return o, err
	}
	return o, shardcounter.ValidateRanking(name, o)
}

// PUT /v1/rankings/{name}
func (s *Server) handleCreateRanking(w http.ResponseWriter, r *http.Request) {
	rs := s.rankings
	name, body, err := s.bodyOf(r, plainRankingName)
	var opts shardcounter.RankingOptions
	if err == nil {
		opts, err = DecodeRankingOptions(name, body)
		if err == nil && restricted(r) && !s.permitPrefix(w, r, "createRanking", acl.AccessRead, opts.Prefix) {
			return
		}
	}
	var def *shardcounter.Ranking
	created := false
	if err == nil {
		def, created, err = rs.CreateRanking(r.Context(), name, opts)
	}
	status := http.StatusOK
	if err == nil && created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/rankings/"+EscapeID(name))
	}
	s.reply(w, r, status, def, err)
}

// ParseTopK reads the k of a top read: 1 to MaxRankingSize, or 0 for the
// whole ranking; "" is DefaultTopK.
func ParseTopK(v string) (int, error) {
	if v == "" {
		return DefaultTopK, nil
	}
	k, err := strconv.Atoi(v)
	if err != nil {
		return 0, shardcounter.Errorf(shardcounter.EINVALID, "k %q is not a whole number: give 1 to %d, or 0 for the whole ranking", v, shardcounter.MaxRankingSize)
	}
	return k, shardcounter.CheckTopK(k)
}

// GET /v1/rankings/{name}?k=N
func (s *Server) handleTop(w http.ResponseWriter, r *http.Request) {
	rs := s.rankings
	name, err := rankingName(r)
	var q url.Values
	if err == nil {
		q, err = query(r, "k")
	}
	k := 0
	if err == nil {
		k, err = ParseTopK(q.Get("k"))
	}
	var top *shardcounter.TopList
	if err == nil {
		top, err = rs.Top(r.Context(), name, k)
	}
	// The entries are counters of the ranking's prefix: the user needs a
	// pattern P* covering it, as a listing of the prefix does, beside the
	// name that serveRoute checked.
	if err == nil && restricted(r) && !s.permitPrefix(w, r, "readRanking", acl.AccessRead, top.Prefix) {
		return
	}
	s.reply(w, r, http.StatusOK, top, err)
}

// GET /v1/rankings
func (s *Server) handleListRankings(w http.ResponseWriter, r *http.Request) {
	rs := s.rankings
	_, err := query(r)
	var list []*shardcounter.Ranking
	if err == nil {
		list, err = rs.ListRankings(r.Context())
	}
	if list == nil {
		list = []*shardcounter.Ranking{}
	}
	s.reply(w, r, http.StatusOK, RankingsResponse{Rankings: list}, err)
}

// DELETE /v1/rankings/{name}
func (s *Server) handleDeleteRanking(w http.ResponseWriter, r *http.Request) {
	rs := s.rankings
	name, err := plainRankingName(r)
	if err == nil {
		err = rs.DeleteRanking(r.Context(), name)
	}
	s.reply(w, r, http.StatusNoContent, nil, err)
}

var _ shardcounter.RankingService = (*Client)(nil)

func rankingPath(name string) string { return "/v1/rankings/" + EscapeID(name) }

// CreateRanking implements shardcounter.RankingService.
func (c *Client) CreateRanking(ctx context.Context, name string, opts shardcounter.RankingOptions) (*shardcounter.Ranking, bool, error) {
	if err := shardcounter.ValidateRanking(name, opts); err != nil {
		return nil, false, err
	}
	var def shardcounter.Ranking
	status, err := c.send(ctx, http.MethodPut, rankingPath(name), nil, opts, &def, false)
	if err != nil {
		return nil, false, err
	}
	return &def, status == http.StatusCreated, nil
}

// GetRanking implements shardcounter.RankingService: the definition of a
// top read of one entry.
func (c *Client) GetRanking(ctx context.Context, name string) (*shardcounter.Ranking, error) {
	top, err := c.Top(ctx, name, 1)
	if err != nil {
		return nil, err
	}
	return &top.Ranking, nil
}

// ListRankings implements shardcounter.RankingService.
func (c *Client) ListRankings(ctx context.Context) ([]*shardcounter.Ranking, error) {
	var out RankingsResponse
	if err := c.do(ctx, http.MethodGet, "/v1/rankings", nil, nil, &out, false); err != nil {
		return nil, err
	}
	return out.Rankings, nil
}

// DeleteRanking implements shardcounter.RankingService.
func (c *Client) DeleteRanking(ctx context.Context, name string) error {
	if err := shardcounter.ValidateName("ranking name", name); err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, rankingPath(name), nil, nil, nil, false)
}

// Top implements shardcounter.RankingService.
func (c *Client) Top(ctx context.Context, name string, k int) (*shardcounter.TopList, error) {
	if err := shardcounter.ValidateName("ranking name", name); err != nil {
		return nil, err
	}
	if err := shardcounter.CheckTopK(k); err != nil {
		return nil, err
	}
	var top shardcounter.TopList
	if err := c.do(ctx, http.MethodGet, rankingPath(name), url.Values{"k": {strconv.Itoa(k)}}, nil, &top, false); err != nil {
		return nil, err
	}
	return &top, nil
}
