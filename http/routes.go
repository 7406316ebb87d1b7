package http

import (
	"net/http"

	"github.com/shardcounter/shardcounter/acl"
)

// This file is the route table: every route the server answers, the API's
// and the admin endpoints', the operations routes and the dashboard's, with
// the facts the server, its checks and its description are made from:
// the server's mux is wired from it (NewServer), the OpenAPI document
// (openapi.json) must describe exactly its routes (openapi_test.go), and
// the permission checks read its categories and keys. A route is added
// here or nowhere.

// Route is one operation of the HTTP API: a method on a path, its handler,
// and what it needs and touches. Routes returns the table.
type Route struct {
	// Method is the HTTP method: GET, PUT, POST, PATCH or DELETE. HEAD is
	// served wherever GET is.
	Method string
	// Pattern is the path as a net/http pattern, without the method:
	// "/v1/counters/{id}". It is also the OpenAPI path and the route label
	// of the request metrics.
	Pattern string
	// Operation is the OpenAPI operationId, unique in the table: the name
	// a generated client gives the call, and the audit log the operation.
	Operation string
	// Summary is the OpenAPI summary: what the route does, in a line.
	Summary string
	// Class says what the server does before the handler: the token, the
	// body, a concurrency slot, a deadline.
	Class Class
	// Categories are the permission categories a user needs for the
	// route: all of them, as a Redis command in @keyspace and @write
	// needs both. None for a ClassPublic route.
	Categories Category
	// Keys say where the route finds the keys it touches.
	Keys []Key

	handle func(*Server, http.ResponseWriter, *http.Request)
	served func(*Server) bool // nil: always; else whether this server serves the route
}

// NeedsToken reports whether the route needs one of the server's tokens
// (when it has any): every route but the public ones.
func (rt Route) NeedsToken() bool { return rt.Class != ClassPublic }

// Class is what the server does with a request before its route's handler
// runs.
type Class uint8

const (
	// ClassAPI is a /v1 request: it needs the token, its body is read in
	// full (MaxBodyBytes, BodyTimeout, MaxBodyTotal) before it takes one of
	// the MaxConcurrent slots, and it runs under RequestTimeout.
	ClassAPI Class = iota
	// ClassStream is a /v1 stream (watch): the token and the body as for
	// ClassAPI, but neither a slot nor a deadline; WatchOptions bound it.
	ClassStream
	// ClassAdmin is an admin endpoint: the token, and nothing else, since
	// it streams a body or a reply for as long as the store is large.
	ClassAdmin
	// ClassPublic is an operations or dashboard route: no token, no body,
	// no slot, so that it answers while the API is overloaded.
	ClassPublic
)

// Category is a set of the permission categories of SPEC's "Users and
// permissions", as Redis's ACL categories are: a route is in each
// category whose bit it has (package acl).
type Category = acl.Category

// The categories (package acl has their docs).
const (
	CatRead     = acl.Read
	CatWrite    = acl.Write
	CatKeyspace = acl.Keyspace
	CatAdmin    = acl.Admin
)

// Key says where a route finds keys it touches: a parameter or a body
// field that names a counter, a prefix of counters, a collection or a
// ranking.
type Key struct {
	// In is where the key is: "path", "query", "body" or "store" (the
	// route touches every key of the store).
	In string
	// Name is the path or query parameter, or the body field as a JSON
	// path: "counters[]" (every item of the array), "writes[].counter"
	// (a field of every item), "lines[].id" (the counter lines of an
	// export read from the body).
	Name string
	// Kind is what the key names.
	Kind KeyKind
	// Optional is set when the parameter or field may be absent: a list
	// without a prefix lists every counter.
	Optional bool
}

// KeyKind is what a Key names.
type KeyKind uint8

const (
	// KeyCounter is a counter id (or a hash's name): one key.
	KeyCounter KeyKind = iota
	// KeyPrefix is a prefix of counter ids: every key that starts with it
	// ("" or absent: every key).
	KeyPrefix
	// KeyCollection is a collection's name: the collection and its
	// documents.
	KeyCollection
	// KeyRanking is a ranking's name: the counters it ranks are those of
	// its definition's prefix.
	KeyRanking
	// KeyLimit is a rate limit's name: its definition and every key of
	// it. A limit's keys live in the limit's own space, as a collection's
	// documents do in the collection's, so the name is what a user's
	// patterns are checked against.
	KeyLimit
)

// Where keys are.
const (
	InPath  = "path"
	InQuery = "query"
	InBody  = "body"
	InStore = "store"
)

// Routes returns the route table, in the order of docs/API.md. The slice
// is the caller's.
func Routes() []Route {
	id := []Key{{In: InPath, Name: "id", Kind: KeyCounter}}
	collection := []Key{{In: InPath, Name: "name", Kind: KeyCollection}}
	ranking := []Key{{In: InPath, Name: "name", Kind: KeyRanking}}
	rankings := (*Server).servesRankings
	limit := []Key{{In: InPath, Name: "name", Kind: KeyLimit}}
	limits := (*Server).servesLimits
	collections := (*Server).servesCollections
	export := func(a Admin) http.Handler { return a.Export }
	imp := func(a Admin) http.Handler { return a.Import }
	verify := func(a Admin) http.Handler { return a.Verify }
	backup := func(a Admin) http.Handler { return a.Backup }
	return []Route{
		// Counters (counter.go, write.go, read.go, ttl.go, reset.go,
		// watch.go, member.go)
		{Method: http.MethodGet, Pattern: "/v1/counters", Operation: "listCounters", Summary: "List counters in byte order of id",
			Categories: CatRead, Keys: []Key{{In: InQuery, Name: "prefix", Kind: KeyPrefix, Optional: true}}, handle: (*Server).handleList},
		{Method: http.MethodPut, Pattern: "/v1/counters/{id}", Operation: "createCounter", Summary: "Create a counter",
			Categories: CatKeyspace | CatWrite, Keys: id, handle: (*Server).handleCreate},
		{Method: http.MethodGet, Pattern: "/v1/counters/{id}", Operation: "readCounter", Summary: "Read a counter's value, strong, cached or over its last span of time",
			Categories: CatRead, Keys: id, handle: (*Server).handleGet},
		{Method: http.MethodPatch, Pattern: "/v1/counters/{id}", Operation: "reshardCounter", Summary: "Change a counter's shard count",
			Categories: CatKeyspace | CatWrite, Keys: id, handle: (*Server).handleReshard},
		{Method: http.MethodDelete, Pattern: "/v1/counters/{id}", Operation: "deleteCounter", Summary: "Delete a counter",
			Categories: CatKeyspace | CatWrite, Keys: id, handle: (*Server).handleDelete},
		{Method: http.MethodPost, Pattern: "/v1/counters/{id}/increment", Operation: "incrementCounter", Summary: "Add to a counter",
			Categories: CatWrite, Keys: id, handle: (*Server).handleIncrement},
		{Method: http.MethodPost, Pattern: "/v1/counters/{id}/decrement", Operation: "decrementCounter", Summary: "Subtract from a counter",
			Categories: CatWrite, Keys: id, handle: (*Server).handleDecrement},
		{Method: http.MethodGet, Pattern: "/v1/counters/{id}/series", Operation: "readSeries", Summary: "Read a windowed counter's time buckets",
			Categories: CatRead, Keys: id, handle: (*Server).handleSeries},
		{Method: http.MethodGet, Pattern: "/v1/counters/{id}/shards", Operation: "readShards", Summary: "Read where a counter's shards live and what each holds",
			Categories: CatRead, Keys: id, handle: (*Server).handleShards},
		{Method: http.MethodGet, Pattern: "/v1/counters/{id}/ttl", Operation: "getTTL", Summary: "Read a name's deadline",
			Categories: CatKeyspace | CatRead, Keys: id, handle: (*Server).handleGetTTL},
		{Method: http.MethodPut, Pattern: "/v1/counters/{id}/ttl", Operation: "setTTL", Summary: "Set a name's deadline",
			Categories: CatKeyspace | CatWrite, Keys: id, handle: (*Server).handleSetTTL},
		{Method: http.MethodDelete, Pattern: "/v1/counters/{id}/ttl", Operation: "persistCounter", Summary: "Remove a name's deadline",
			Categories: CatKeyspace | CatWrite, Keys: id, handle: (*Server).handlePersist},
		{Method: http.MethodPost, Pattern: "/v1/counters/{id}/reset", Operation: "resetCounter", Summary: "Set a counter's value, or delete it, and read what it held",
			Categories: CatKeyspace | CatWrite, Keys: id, handle: (*Server).handleReset},
		{Method: http.MethodGet, Pattern: "/v1/counters/{id}/watch", Operation: "watchCounter", Summary: "Follow a counter's value as server-sent events",
			Class: ClassStream, Categories: CatRead, Keys: id, handle: (*Server).handleWatch},
		{Method: http.MethodGet, Pattern: "/v1/counters/{id}/members", Operation: "listMembers", Summary: "List a distinct counter's members",
			Categories: CatRead, Keys: id, handle: (*Server).handleListMembers},
		{Method: http.MethodGet, Pattern: "/v1/counters/{id}/members/{member}", Operation: "isMember", Summary: "Check that a member is in a distinct counter",
			Categories: CatRead, Keys: id, handle: (*Server).handleIsMember},
		{Method: http.MethodPut, Pattern: "/v1/counters/{id}/members/{member}", Operation: "addMember", Summary: "Add a member to a distinct or approx counter",
			Categories: CatWrite, Keys: id, handle: (*Server).handleAddMember},
		{Method: http.MethodDelete, Pattern: "/v1/counters/{id}/members/{member}", Operation: "removeMember", Summary: "Remove a member from a distinct counter",
			Categories: CatWrite, Keys: id, handle: (*Server).handleRemoveMember},
		{Method: http.MethodPost, Pattern: "/v1/writes", Operation: "writeBatch", Summary: "Write to many counters, all validated before any is applied",
			Categories: CatWrite, Keys: []Key{{In: InBody, Name: "writes[].counter", Kind: KeyCounter}}, handle: (*Server).handleWrites},
		{Method: http.MethodPost, Pattern: "/v1/reads", Operation: "readBatch", Summary: "Read many counters, from one snapshot where the store has one",
			Categories: CatRead, Keys: []Key{{In: InBody, Name: "counters[]", Kind: KeyCounter}}, handle: (*Server).handleReads},

		// Rankings (ranking.go), when the service has them.
		{Method: http.MethodGet, Pattern: "/v1/rankings", Operation: "listRankings", Summary: "List the rankings' definitions",
			Categories: CatRead, handle: (*Server).handleListRankings, served: rankings},
		{Method: http.MethodPut, Pattern: "/v1/rankings/{name}", Operation: "createRanking", Summary: "Define a ranking",
			Categories: CatAdmin, Keys: append(ranking[:1:1], Key{In: InBody, Name: "prefix", Kind: KeyPrefix, Optional: true}),
			handle: (*Server).handleCreateRanking, served: rankings},
		{Method: http.MethodGet, Pattern: "/v1/rankings/{name}", Operation: "readRanking", Summary: "Read a ranking's top entries",
			Categories: CatRead, Keys: ranking, handle: (*Server).handleTop, served: rankings},
		{Method: http.MethodDelete, Pattern: "/v1/rankings/{name}", Operation: "deleteRanking", Summary: "Delete a ranking's definition",
			Categories: CatAdmin, Keys: ranking, handle: (*Server).handleDeleteRanking, served: rankings},

		// Rate limits (limit.go), when the service has them.
		{Method: http.MethodGet, Pattern: "/v1/limits", Operation: "listLimits", Summary: "List the rate limits' definitions",
			Categories: CatRead, handle: (*Server).handleListLimits, served: limits},
		{Method: http.MethodPut, Pattern: "/v1/limits/{name}", Operation: "createLimit", Summary: "Define a rate limit",
			Categories: CatAdmin, Keys: limit, handle: (*Server).handleCreateLimit, served: limits},
		{Method: http.MethodGet, Pattern: "/v1/limits/{name}", Operation: "getLimit", Summary: "Read a rate limit's definition",
			Categories: CatRead, Keys: limit, handle: (*Server).handleGetLimit, served: limits},
		{Method: http.MethodDelete, Pattern: "/v1/limits/{name}", Operation: "deleteLimit", Summary: "Delete a rate limit and its keys' state",
			Categories: CatAdmin, Keys: limit, handle: (*Server).handleDeleteLimit, served: limits},
		{Method: http.MethodPost, Pattern: "/v1/limits/{name}/keys/{key}/take", Operation: "takeLimit", Summary: "Take a cost from a key of a rate limit, or be refused",
			Categories: CatWrite, Keys: limit, handle: (*Server).handleTake, served: limits},
		{Method: http.MethodPost, Pattern: "/v1/limits/{name}/keys/{key}/peek", Operation: "peekLimit", Summary: "Answer what a take would, taking nothing",
			Categories: CatRead, Keys: limit, handle: (*Server).handlePeek, served: limits},
		{Method: http.MethodDelete, Pattern: "/v1/limits/{name}/keys/{key}", Operation: "resetLimitKey", Summary: "Empty a key of a rate limit: its whole quota is available",
			Categories: CatKeyspace | CatWrite, Keys: limit, handle: (*Server).handleResetLimitKey, served: limits},

		// Collections (collection.go), when the server has them.
		{Method: http.MethodPut, Pattern: "/v1/collections/{name}", Operation: "createCollection", Summary: "Create a time-ordered collection",
			Categories: CatKeyspace | CatWrite, Keys: collection, handle: (*Server).handleCreateCollection, served: collections},
		{Method: http.MethodGet, Pattern: "/v1/collections/{name}", Operation: "getCollection", Summary: "Read a collection's definition",
			Categories: CatRead, Keys: collection, handle: (*Server).handleGetCollection, served: collections},
		{Method: http.MethodPatch, Pattern: "/v1/collections/{name}", Operation: "reshardCollection", Summary: "Grow a collection's shard count",
			Categories: CatKeyspace | CatWrite, Keys: collection, handle: (*Server).handleReshardCollection, served: collections},
		{Method: http.MethodDelete, Pattern: "/v1/collections/{name}", Operation: "deleteCollection", Summary: "Delete a collection and its documents",
			Categories: CatKeyspace | CatWrite, Keys: collection, handle: (*Server).handleDeleteCollection, served: collections},
		{Method: http.MethodPost, Pattern: "/v1/collections/{name}/documents", Operation: "putDocuments", Summary: "Add documents to a collection",
			Categories: CatWrite, Keys: collection, handle: (*Server).handlePutDocuments, served: collections},
		{Method: http.MethodGet, Pattern: "/v1/collections/{name}/documents/{doc}", Operation: "getDocument", Summary: "Read a document",
			Categories: CatRead, Keys: collection, handle: (*Server).handleGetDocument, served: collections},
		{Method: http.MethodDelete, Pattern: "/v1/collections/{name}/documents/{doc}", Operation: "deleteDocument", Summary: "Delete a document",
			Categories: CatKeyspace | CatWrite, Keys: collection, handle: (*Server).handleDeleteDocument, served: collections},
		{Method: http.MethodPost, Pattern: "/v1/collections/{name}/query", Operation: "queryDocuments", Summary: "Query a collection's documents in time order",
			Categories: CatRead, Keys: collection, handle: (*Server).handleQuery, served: collections},

		// The dashboard (watch_dashboard.go).
		{Method: http.MethodGet, Pattern: "/v1/engine", Operation: "engineStats", Summary: "Read the write engine's running totals",
			Categories: CatRead, handle: (*Server).handleEngine},
		{Method: http.MethodGet, Pattern: "/ui", Operation: "dashboardRedirect", Summary: "Redirects to the dashboard's page, /ui/",
			Class: ClassPublic, handle: (*Server).handleUIRedirect},
		{Method: http.MethodGet, Pattern: "/ui/{$}", Operation: "dashboard", Summary: "The dashboard's page",
			Class: ClassPublic, handle: (*Server).handleUI},
		{Method: http.MethodGet, Pattern: "/ui/{asset}", Operation: "dashboardAsset", Summary: "One of the dashboard's scripts and style sheets",
			Class: ClassPublic, handle: (*Server).handleUI},

		// Operations (ops.go).
		{Method: http.MethodGet, Pattern: "/healthz", Operation: "healthz", Summary: "Whether the process runs",
			Class: ClassPublic, handle: (*Server).handleHealthz},
		{Method: http.MethodGet, Pattern: "/readyz", Operation: "readyz", Summary: "Whether the store answers",
			Class: ClassPublic, handle: (*Server).handleReadyz},
		{Method: http.MethodGet, Pattern: "/metrics", Operation: "metrics", Summary: "The server's metrics, in the Prometheus text format",
			Class: ClassPublic, handle: (*Server).handleMetrics},
		{Method: http.MethodGet, Pattern: "/openapi.json", Operation: "openapi", Summary: "This API's OpenAPI description",
			Class: ClassPublic, handle: (*Server).handleOpenAPI},

		// Admin (admin.go; the handlers are package transfer's).
		{Method: http.MethodGet, Pattern: "/admin/export", Operation: "exportStore", Summary: "Stream the store's export",
			Class: ClassAdmin, Categories: CatAdmin, Keys: []Key{{In: InQuery, Name: "prefix", Kind: KeyPrefix, Optional: true}},
			handle: admin(export), served: servesAdmin(export)},
		{Method: http.MethodPost, Pattern: "/admin/import", Operation: "importStore", Summary: "Read an export into the store",
			Class: ClassAdmin, Categories: CatAdmin | CatWrite, Keys: []Key{{In: InStore, Kind: KeyPrefix}}, // the lines may name any key
			handle: admin(imp), served: servesAdmin(imp)},
		{Method: http.MethodGet, Pattern: "/admin/verify", Operation: "verifyStore", Summary: "Recount the store's counters and report drifts",
			Class: ClassAdmin, Categories: CatAdmin, Keys: []Key{{In: InQuery, Name: "prefix", Kind: KeyPrefix, Optional: true}},
			handle: admin(verify), served: servesAdmin(verify)},
		{Method: http.MethodGet, Pattern: "/admin/backup", Operation: "backupStore", Summary: "Stream an online copy of an embedded store",
			Class: ClassAdmin, Categories: CatAdmin, Keys: []Key{{In: InStore, Kind: KeyPrefix}},
			handle: admin(backup), served: servesAdmin(backup)},
	}
}

// wire registers the routes this server serves on its mux, one handler a
// pattern that dispatches on the method. The mux's patterns carry no
// method, so that a wrong method gets the API's 405 and error body rather
// than the mux's plain text.
func (s *Server) wire(routes []Route) {
	var patterns []string
	byPattern := make(map[string][]*Route)
	for i := range routes {
		rt := &routes[i]
		if rt.served != nil && !rt.served(s) {
			continue
		}
		if _, ok := byPattern[rt.Pattern]; !ok {
			patterns = append(patterns, rt.Pattern)
		}
		byPattern[rt.Pattern] = append(byPattern[rt.Pattern], rt)
	}
	for _, p := range patterns {
		rts := byPattern[p]
		for _, rt := range rts[1:] {
			if rt.Class != rts[0].Class {
				panic("http: the routes of " + p + " differ in class: the token is checked before the method")
			}
		}
		handlers := make(map[string]http.HandlerFunc, len(rts))
		for _, rt := range rts {
			handlers[rt.Method] = s.serveRoute(rt)
		}
		h := s.methods(handlers)
		if rts[0].NeedsToken() {
			h = s.requireToken(h)
		}
		s.mux.Handle(p, h)
	}
	s.mux.Handle("/", http.HandlerFunc(s.handleNotFound))
}
