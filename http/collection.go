package http

import (
	"context"
	"net/http"
	"net/url"

	"github.com/shardcounter/shardcounter"
)

// CreateCollectionRequest is the body of PUT /v1/collections/{name}. A
// pointer tells an absent shard count (the default, 1) from {"shards":0},
// which is refused.
type CreateCollectionRequest struct {
	Shards         *int     `json:"shards,omitempty"`
	TimestampField string   `json:"timestamp_field,omitempty"`
	Indexes        []string `json:"indexes,omitempty"`
	ShardKey       string   `json:"shard_key,omitempty"`
}

// PutDocumentsRequest is the body of POST /v1/collections/{name}/documents:
// either one document ({"id":"S","data":{...}}, id optional) or a batch
// ({"documents":[...]}).
type PutDocumentsRequest struct {
	ID        string                       `json:"id,omitempty"`
	Data      map[string]any               `json:"data,omitempty"`
	Documents []shardcounter.DocumentInput `json:"documents,omitempty"`
}

// PutDocumentsResponse is the body of a successful POST
// /v1/collections/{name}/documents: where each document went, in order.
type PutDocumentsResponse struct {
	Documents []shardcounter.DocumentRef `json:"documents"`
}

const (
	createCollectionFields = `"shards", "timestamp_field", "indexes" and "shard_key"`
	documentsFields        = `"id" and "data" for one document, or "documents" for a batch`
	queryFields            = `"where", "after", "before", "order", "limit" and "page_token"`
)

// decodeCreateCollection decodes the body of PUT /v1/collections/{name}.
// An empty body means {}: one shard, the default timestamp field, no
// indexes.
func decodeCreateCollection(body []byte) (shardcounter.CollectionOptions, error) {
	var req CreateCollectionRequest
	if err := decodeObject(body, &req, true, createCollectionFields, `{"shards":3,"indexes":["exchange"]}`); err != nil {
		return shardcounter.CollectionOptions{}, err
	}
	opts := shardcounter.CollectionOptions{TimestampField: req.TimestampField, Indexes: req.Indexes, ShardKey: shardcounter.ShardKey(req.ShardKey)}
	if req.Shards != nil {
		if err := shardcounter.ValidateShards(*req.Shards); err != nil {
			return opts, err
		}
		opts.Shards = *req.Shards
	}
	c := &shardcounter.Collection{Name: "_", Shards: opts.Shards, TimestampField: opts.TimestampField, Indexes: opts.Indexes, ShardKey: opts.ShardKey}
	return opts, shardcounter.ValidateCollection(c)
}

// decodeDocuments decodes the body of POST .../documents into the
// documents to write.
func decodeDocuments(body []byte) ([]shardcounter.DocumentInput, error) {
	var req PutDocumentsRequest
	if err := decodeObject(body, &req, false, documentsFields, `{"data":{"timestamp":"2019-01-01T13:45:23.010Z"}}`); err != nil {
		return nil, err
	}
	if req.Documents == nil {
		return []shardcounter.DocumentInput{{ID: req.ID, Data: req.Data}}, nil
	}
	switch n := len(req.Documents); {
	case req.ID != "" || req.Data != nil:
		return nil, shardcounter.Errorf(shardcounter.EINVALID, `body has both "documents" and "id"/"data": send one document or a batch, not both`)
	case n == 0:
		return nil, shardcounter.Errorf(shardcounter.EINVALID, `"documents" is empty: give 1 to %d documents`, shardcounter.MaxDocumentBatch)
	case n > shardcounter.MaxDocumentBatch:
		return nil, shardcounter.Errorf(shardcounter.ETOOLARGE, "batch has %d documents: the limit is %d, split it", n, shardcounter.MaxDocumentBatch)
	}
	return req.Documents, nil
}

// decodeQuery decodes the body of POST .../query. An empty body is {}: the
// newest 20 documents.
func decodeQuery(body []byte) (shardcounter.Query, error) {
	var q shardcounter.Query
	if err := decodeObject(body, &q, true, queryFields, `{"where":[{"field":"exchange","op":"==","value":"EXCHG1"}],"limit":5}`); err != nil {
		return q, err
	}
	return q, shardcounter.ValidateQueryShape(q)
}

// servesCollections reports whether the server serves the
// /v1/collections routes: when it has ServerOptions.Collections.
func (s *Server) servesCollections() bool { return s.opts.Collections != nil }

// collectionName returns the request's collection name, validated, after
// checking that the request has no query parameters.
func collectionName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if err := shardcounter.ValidateID("collection name", name); err != nil {
		return "", err
	}
	_, err := query(r)
	return name, err
}

// PUT /v1/collections/{name}
func (s *Server) handleCreateCollection(w http.ResponseWriter, r *http.Request) {
	name, body, err := s.bodyOf(r, collectionName)
	var opts shardcounter.CollectionOptions
	if err == nil {
		opts, err = decodeCreateCollection(body)
	}
	var c *shardcounter.Collection
	if err == nil {
		c, err = s.opts.Collections.CreateCollection(r.Context(), name, opts)
	}
	if err == nil {
		w.Header().Set("Location", collectionPath(c.Name))
	}
	s.reply(w, r, http.StatusCreated, c, err)
}

// GET /v1/collections/{name}
func (s *Server) handleGetCollection(w http.ResponseWriter, r *http.Request) {
	name, err := collectionName(r)
	var c *shardcounter.Collection
	if err == nil {
		c, err = s.opts.Collections.GetCollection(r.Context(), name)
	}
	s.reply(w, r, http.StatusOK, c, err)
}

// PATCH /v1/collections/{name}
func (s *Server) handleReshardCollection(w http.ResponseWriter, r *http.Request) {
	name, body, err := s.bodyOf(r, collectionName)
	var shards int
	if err == nil {
		shards, err = decodeReshard(body)
	}
	var c *shardcounter.Collection
	if err == nil {
		c, err = s.opts.Collections.ReshardCollection(r.Context(), name, shards)
	}
	s.reply(w, r, http.StatusOK, c, err)
}

// DELETE /v1/collections/{name}
func (s *Server) handleDeleteCollection(w http.ResponseWriter, r *http.Request) {
	name, err := collectionName(r)
	if err == nil {
		err = s.opts.Collections.DeleteCollection(r.Context(), name)
	}
	s.reply(w, r, http.StatusNoContent, nil, err)
}

// POST /v1/collections/{name}/documents
func (s *Server) handlePutDocuments(w http.ResponseWriter, r *http.Request) {
	name, body, err := s.bodyOf(r, collectionName)
	var docs []shardcounter.DocumentInput
	if err == nil {
		docs, err = decodeDocuments(body)
		s.doneWithBody(r)
	}
	var refs []shardcounter.DocumentRef
	if err == nil {
		refs, err = s.opts.Collections.PutDocuments(r.Context(), name, docs)
	}
	s.reply(w, r, http.StatusCreated, PutDocumentsResponse{Documents: refs}, err)
}

// documentID returns the request's document id, validated.
func documentID(r *http.Request) (string, string, error) {
	name, err := collectionName(r)
	if err != nil {
		return "", "", err
	}
	id := r.PathValue("doc")
	return name, id, shardcounter.ValidateID("document id", id)
}

// GET /v1/collections/{name}/documents/{doc}
func (s *Server) handleGetDocument(w http.ResponseWriter, r *http.Request) {
	name, id, err := documentID(r)
	var d *shardcounter.Document
	if err == nil {
		d, err = s.opts.Collections.GetDocument(r.Context(), name, id)
	}
	s.reply(w, r, http.StatusOK, d, err)
}

// DELETE /v1/collections/{name}/documents/{doc}
func (s *Server) handleDeleteDocument(w http.ResponseWriter, r *http.Request) {
	name, id, err := documentID(r)
	if err == nil {
		err = s.opts.Collections.DeleteDocument(r.Context(), name, id)
	}
	s.reply(w, r, http.StatusNoContent, nil, err)
}

// POST /v1/collections/{name}/query
func (s *Server) handleQuery(w http.ResponseWriter, r *http.Request) {
	name, body, err := s.bodyOf(r, collectionName)
	var q shardcounter.Query
	if err == nil {
		q, err = decodeQuery(body)
	}
	var res *shardcounter.QueryResult
	if err == nil {
		res, err = s.opts.Collections.QueryDocuments(r.Context(), name, q)
	}
	if err == nil && res.Documents == nil {
		res.Documents = []*shardcounter.Document{} // "documents":[], never null
	}
	s.reply(w, r, http.StatusOK, res, err)
}

var _ shardcounter.CollectionService = (*Client)(nil)

// collectionPath is the API path of a collection.
func collectionPath(name string) string { return "/v1/collections/" + EscapeID(name) }

// CreateCollection implements shardcounter.CollectionService.
func (c *Client) CreateCollection(ctx context.Context, name string, opts shardcounter.CollectionOptions) (*shardcounter.Collection, error) {
	if err := shardcounter.ValidateID("collection name", name); err != nil {
		return nil, err
	}
	req := CreateCollectionRequest{TimestampField: opts.TimestampField, Indexes: opts.Indexes, ShardKey: string(opts.ShardKey)}
	if opts.Shards != 0 {
		req.Shards = &opts.Shards
	}
	var coll shardcounter.Collection
	if err := c.do(ctx, http.MethodPut, collectionPath(name), nil, req, &coll, false); err != nil {
		return nil, err
	}
	return &coll, nil
}

// GetCollection implements shardcounter.CollectionService.
func (c *Client) GetCollection(ctx context.Context, name string) (*shardcounter.Collection, error) {
	if err := shardcounter.ValidateID("collection name", name); err != nil {
		return nil, err
	}
	var coll shardcounter.Collection
	if err := c.do(ctx, http.MethodGet, collectionPath(name), nil, nil, &coll, false); err != nil {
		return nil, err
	}
	return &coll, nil
}

// ReshardCollection implements shardcounter.CollectionService.
func (c *Client) ReshardCollection(ctx context.Context, name string, shards int) (*shardcounter.Collection, error) {
	if err := shardcounter.ValidateID("collection name", name); err != nil {
		return nil, err
	}
	if err := shardcounter.ValidateShards(shards); err != nil {
		return nil, err
	}
	var coll shardcounter.Collection
	if err := c.do(ctx, http.MethodPatch, collectionPath(name), nil, ReshardRequest{Shards: &shards}, &coll, false); err != nil {
		return nil, err
	}
	return &coll, nil
}

// DeleteCollection implements shardcounter.CollectionService.
func (c *Client) DeleteCollection(ctx context.Context, name string) error {
	if err := shardcounter.ValidateID("collection name", name); err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, collectionPath(name), nil, nil, nil, false)
}

// PutDocuments implements shardcounter.CollectionService, always with the
// batch form of the body. Rewriting a document with its id is harmless, so
// a write whose outcome is unknown may simply be sent again with the same
// ids.
func (c *Client) PutDocuments(ctx context.Context, name string, docs []shardcounter.DocumentInput) ([]shardcounter.DocumentRef, error) {
	if err := shardcounter.ValidateID("collection name", name); err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "no documents given: give one, or up to %d", shardcounter.MaxDocumentBatch)
	}
	var resp PutDocumentsResponse
	if err := c.do(ctx, http.MethodPost, collectionPath(name)+"/documents", nil, PutDocumentsRequest{Documents: docs}, &resp, true); err != nil {
		return nil, err
	}
	if len(resp.Documents) != len(docs) {
		return nil, shardcounter.OutcomeUnknownf("server returned %d document refs for %d documents", len(resp.Documents), len(docs))
	}
	return resp.Documents, nil
}

// GetDocument implements shardcounter.CollectionService.
func (c *Client) GetDocument(ctx context.Context, name, id string) (*shardcounter.Document, error) {
	if err := shardcounter.ValidateID("collection name", name); err != nil {
		return nil, err
	}
	if err := shardcounter.ValidateID("document id", id); err != nil {
		return nil, err
	}
	var d shardcounter.Document
	if err := c.do(ctx, http.MethodGet, collectionPath(name)+"/documents/"+EscapeID(id), nil, nil, &d, false); err != nil {
		return nil, err
	}
	return &d, nil
}

// DeleteDocument implements shardcounter.CollectionService.
func (c *Client) DeleteDocument(ctx context.Context, name, id string) error {
	if err := shardcounter.ValidateID("collection name", name); err != nil {
		return err
	}
	if err := shardcounter.ValidateID("document id", id); err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, collectionPath(name)+"/documents/"+EscapeID(id), nil, nil, nil, false)
}

// QueryDocuments implements shardcounter.CollectionService. Page tokens
// pass through unchanged: the server alone reads them.
func (c *Client) QueryDocuments(ctx context.Context, name string, q shardcounter.Query) (*shardcounter.QueryResult, error) {
	if err := shardcounter.ValidateID("collection name", name); err != nil {
		return nil, err
	}
	var res shardcounter.QueryResult
	if err := c.do(ctx, http.MethodPost, collectionPath(name)+"/query", url.Values(nil), q, &res, false); err != nil {
		return nil, err
	}
	return &res, nil
}
