package http

import (
	_ "embed"
	"net/http"
	"strconv"
)

// openAPI is the OpenAPI 3 description of every route of the table
// (routes.go), served at GET /openapi.json. openapi_test.go checks that it
// describes exactly the table's routes, and every test of this package
// validates its requests and replies against it (internal/openapitest).
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3 description of the HTTP API, as served at
// GET /openapi.json. The slice is the caller's.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

// GET /openapi.json
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h.Set("Content-Length", strconv.Itoa(len(openAPI)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(openAPI)
	}
}
