package http

import "net/http"

// Admin are the handlers of the admin endpoints that serve mounts beside the
// API (package transfer makes them: transfer.Admin), in
// ServerOptions.Admin. The route table serves them under /admin/ behind
// the API's bearer tokens and their throttling of failed attempts; they
// stream for as long as they need, so they are not under the API's body
// limit, concurrency bound or request timeout (ClassAdmin). A nil handler's
// route is not served: 404.
type Admin struct {
	Export http.Handler // GET /admin/export?prefix=P
	Import http.Handler // POST /admin/import?replace=true
	Verify http.Handler // GET /admin/verify?prefix=P
	Backup http.Handler // GET /admin/backup?rate=BYTES
}

// admin returns the table's handler of the admin endpoint that pick
// chooses.
func admin(pick func(Admin) http.Handler) func(*Server, http.ResponseWriter, *http.Request) {
	return func(s *Server, w http.ResponseWriter, r *http.Request) { pick(s.opts.Admin).ServeHTTP(w, r) }
}

// servesAdmin reports whether a server has the admin endpoint that pick
// chooses.
func servesAdmin(pick func(Admin) http.Handler) func(*Server) bool {
	return func(s *Server) bool { return pick(s.opts.Admin) != nil }
}
