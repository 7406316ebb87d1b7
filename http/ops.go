package http

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
)

// The operations routes need no token and take no concurrency slot
// (ClassPublic), so that they answer while the API is overloaded.

// GET /healthz: the process runs.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// GET /readyz: the store answers.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if s.opts.Ping != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.opts.Ping(ctx); err != nil {
			s.opts.Logger.Warn("store not ready", "request_id", requestOf(r).id, "error", err)
			s.error(w, r, shardcounter.Errorf(shardcounter.EUNAVAILABLE,
				"the store does not answer: %s; check that it runs and is reachable from the server", shardcounter.ErrorMessage(err)))
			return
		}
	}
	s.writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// GET /metrics
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	s.metricsHandler.ServeHTTP(w, r)
}

// handleNotFound answers every path that is no route: 404, after the token
// in the paths where every route needs it (tokenSpace). /v1/counters/
// is a counter route with an empty id: 400.
func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	if tokenSpace(r.URL.Path) && s.authenticate(r) == nil {
		s.unauthorized(w, r)
		return
	}
	if r.URL.Path == "/v1/counters/" {
		s.error(w, r, shardcounter.ValidateID("counter id", ""))
		return
	}
	msg := fmt.Sprintf("no API route %s: see docs/API.md for the routes", r.URL.EscapedPath())
	if strings.HasPrefix(r.URL.EscapedPath(), "/v1/counters/") {
		msg = fmt.Sprintf("no API route %s: a counter id must be one URL-escaped path segment (escape '/' as %%2F)", r.URL.EscapedPath())
	}
	s.error(w, r, shardcounter.Errorf(shardcounter.ENOTFOUND, "%s", msg))
}
