package http

import "net/http"

// RequireToken wraps h, a handler served beside the API (the admin
// endpoints of serve: export, import, backup), with the API's bearer
// token check and its throttling of failed attempts: a request without
// one of the server's tokens gets 401 (or 429) and never reaches h. Such
// a handler streams for as long as it needs, so it is not under the
// API's body limit and request timeout.
func (s *Server) RequireToken(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			s.unauthorized(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}
