package http

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/shardcounter/shardcounter"
)

// MemberResponse is the body of the replies of
// /v1/counters/{id}/members/{member}: PUT says whether the member was
// added, DELETE whether it was removed (both are omitted when the server
// answers writes before they are committed, 202), GET that it is present.
type MemberResponse struct {
	Counter string `json:"counter"`
	Member  string `json:"member"`
	Added   *bool  `json:"added,omitempty"`
	Removed *bool  `json:"removed,omitempty"`
	Present *bool  `json:"present,omitempty"`
}

// MembersResponse is the body of GET /v1/counters/{id}/members.
type MembersResponse struct {
	Members       []string `json:"members"`
	NextPageToken string   `json:"next_page_token,omitempty"`
}

// memberOf returns the request's counter id and member, validated, after
// checking that the request has no query parameters.
func memberOf(r *http.Request) (string, string, error) {
	id, err := plainCounterID(r)
	if err != nil {
		return "", "", err
	}
	member := r.PathValue("member")
	return id, member, shardcounter.ValidateID("member", member)
}

// PUT /v1/counters/{id}/members/{member}
func (s *Server) handleAddMember(w http.ResponseWriter, r *http.Request) {
	s.handleMemberWrite(w, r, true)
}

// DELETE /v1/counters/{id}/members/{member}
func (s *Server) handleRemoveMember(w http.ResponseWriter, r *http.Request) {
	s.handleMemberWrite(w, r, false)
}

// PUT and DELETE /v1/counters/{id}/members/{member}
func (s *Server) handleMemberWrite(w http.ResponseWriter, r *http.Request, add bool) {
	id, member, err := memberOf(r)
	if err == nil {
		err = decodeObject(requestOf(r).body, &struct{}{}, true, "none: the member is in the path", "{}")
	}
	write := shardcounter.RemoveMember(id, member)
	if add {
		write = shardcounter.AddMember(id, member)
	}
	var res *shardcounter.WriteResult
	if err == nil {
		res, err = s.svc.WriteCounter(r.Context(), write)
	}
	if err == nil && res.Error != nil {
		err = res.Error
	}
	if err != nil {
		s.error(w, r, err)
		return
	}
	resp := MemberResponse{Counter: id, Member: member}
	if res.Changed != nil {
		if add {
			resp.Added = res.Changed
		} else {
			resp.Removed = res.Changed
		}
	}
	s.writeJSON(w, s.writeStatus(), resp)
}

// GET /v1/counters/{id}/members/{member}: 200 when present, 404 when not.
func (s *Server) handleIsMember(w http.ResponseWriter, r *http.Request) {
	id, member, err := memberOf(r)
	var present bool
	if err == nil {
		present, err = s.svc.IsMember(r.Context(), id, member)
	}
	if err == nil && !present {
		err = shardcounter.Errorf(shardcounter.ENOTFOUND, "%q is not a member of counter %q", member, id)
	}
	t := true
	s.reply(w, r, http.StatusOK, MemberResponse{Counter: id, Member: member, Present: &t}, err)
}

// GET /v1/counters/{id}/members?limit=N&page_token=T
func (s *Server) handleListMembers(w http.ResponseWriter, r *http.Request) {
	id, err := counterID(r)
	var opts shardcounter.ListOptions
	if err == nil {
		opts, err = memberListOptions(id, r)
	}
	var list *shardcounter.MemberList
	if err == nil {
		list, err = s.svc.ListMembers(r.Context(), id, opts)
	}
	if err != nil {
		s.error(w, r, err)
		return
	}
	resp := MembersResponse{Members: list.Members}
	if resp.Members == nil {
		resp.Members = []string{} // "members":[], never null
	}
	if list.Next != "" {
		resp.NextPageToken = encodeMemberToken(id, list.Next)
	}
	s.writeJSON(w, http.StatusOK, resp)
}

// memberListOptions validates the query of a member listing.
func memberListOptions(id string, r *http.Request) (shardcounter.ListOptions, error) {
	q, err := query(r, "limit", "page_token")
	if err != nil {
		return shardcounter.ListOptions{}, err
	}
	opts := shardcounter.ListOptions{Limit: shardcounter.DefaultListLimit}
	if q.Has("limit") {
		if opts.Limit, err = parseLimit(q.Get("limit")); err != nil {
			return opts, err
		}
	}
	if t := q.Get("page_token"); t != "" {
		if opts.After, err = decodeMemberToken(t, id); err != nil {
			return opts, err
		}
	}
	return opts, nil
}

// IsMember implements shardcounter.CounterService with
// GET /v1/counters/{id}/members/{member}. The API answers 404 both for a
// member that is absent and for a counter that does not exist; the client
// tells them apart by reading the counter.
func (c *Client) IsMember(ctx context.Context, id, member string) (bool, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return false, err
	}
	if err := shardcounter.ValidateID("member", member); err != nil {
		return false, err
	}
	err := c.do(ctx, http.MethodGet, memberPath(id, member), nil, nil, nil, false)
	if !errors.Is(err, shardcounter.ErrNotFound) {
		return err == nil, err
	}
	if _, err := c.ReadCounter(ctx, id, shardcounter.Cached); err != nil {
		return false, err
	}
	return false, nil
}

// ListMembers implements shardcounter.CounterService. opts.After and the
// returned Next are members; the client turns them into page tokens.
func (c *Client) ListMembers(ctx context.Context, id string, opts shardcounter.ListOptions) (*shardcounter.MemberList, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	if opts.Prefix != "" {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "members cannot be filtered by prefix: page through them with After")
	}
	q := url.Values{}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.After != "" {
		q.Set("page_token", encodeMemberToken(id, opts.After))
	}
	var resp MembersResponse
	if err := c.do(ctx, http.MethodGet, counterPath(id)+"/members", q, nil, &resp, false); err != nil {
		return nil, err
	}
	list := &shardcounter.MemberList{Members: resp.Members}
	if resp.NextPageToken != "" {
		next, err := decodeMemberToken(resp.NextPageToken, id)
		if err != nil {
			return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "server sent a page token this client cannot read: %s", shardcounter.ErrorMessage(err))
		}
		list.Next = next
	}
	return list, nil
}

// writeMember sends a member write without a request id through the
// member route, PUT to add, DELETE to remove.
func (c *Client) writeMember(ctx context.Context, w shardcounter.Write) (*shardcounter.WriteResult, error) {
	method := http.MethodDelete
	if *w.Present {
		method = http.MethodPut
	}
	var resp MemberResponse
	if err := c.do(ctx, method, memberPath(w.Counter, w.Member), nil, nil, &resp, true); err != nil {
		return nil, err
	}
	res := &shardcounter.WriteResult{Counter: w.Counter, Applied: true, Member: w.Member, Changed: resp.Added}
	if !*w.Present {
		res.Changed = resp.Removed
	}
	return res, nil
}

// memberPath is the API path of a member of a counter.
func memberPath(id, member string) string {
	return counterPath(id) + "/members/" + EscapeID(member)
}
