// Package http serves the shardcounter HTTP API (SPEC.md, docs/API.md) and
// holds the Go client of that API.
//
// # Server
//
// Server is an http.Handler over any shardcounter.CounterService, usually
// the engine. It validates every request completely before it calls the
// service, so a request that gets an error changes nothing: a body with an
// unknown field, trailing data, a bad id or amount, or a batch with one bad
// item is refused with 400 before any write is attempted.
//
// Every failure is answered with the body
//
//	{"error":{"code":"invalid_argument","message":"..."}}
//
// where code is a shardcounter error code and the HTTP status follows from
// the code alone (ErrorStatusCode), so there is one mapping to keep in step
// with SPEC.md.
//
// # Client
//
// Client implements shardcounter.CounterService over the API and turns
// error bodies back into *shardcounter.Error values with the same code and
// message, so code written against the engine runs unchanged against a
// remote server. The CLI uses it.
//
// # Files
//
// One file per concern, as wtf's http package has one per resource: the
// Server and its options (server.go); the route table, every route with
// its class (token, body, slot, deadline), permission categories and keys,
// from which the mux is wired (routes.go); what every request goes through
// before its handler, request ids, the token, the concurrency bound and
// the request log (middleware.go); query strings, bodies and strict JSON
// (request.go); the one mapping from error codes to statuses and the
// replies (error.go); then one file per resource with its routes, its
// handlers, its request decoders and the client's methods for it
// (counter.go, write.go, collection.go, ops.go). client.go holds the
// client's transport.
//
// # Adding a route
//
// A route is an entry of Routes (routes.go) and an operation of
// openapi.json, the OpenAPI 3 description served at /openapi.json: the
// tests fail when the two differ (openapi_test.go), and every test's
// traffic is checked against the description (internal/openapitest).
//
// # Page tokens
//
// List pages are linked by opaque page tokens. A token is URL-safe base64
// of a version byte, the prefix the listing was asked for and the last id
// returned; the server refuses a token that is malformed or that was issued
// for another prefix. Clients must treat tokens as opaque.
package http
