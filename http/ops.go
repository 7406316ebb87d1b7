package http

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
)

// routeOps adds the operations routes, which need no token and take no
// concurrency slot, and the API's own 404 for every other path.
func (s *Server) routeOps() {
	s.mux.Handle("/healthz", s.methods(map[string]http.HandlerFunc{
		http.MethodGet: s.handleHealthz,
	}))
	s.mux.Handle("/readyz", s.methods(map[string]http.HandlerFunc{
		http.MethodGet: s.handleReadyz,
	}))
	s.mux.Handle("/metrics", s.methods(map[string]http.HandlerFunc{
		http.MethodGet: s.metrics.Handler().ServeHTTP,
	}))
	s.mux.Handle("/", http.HandlerFunc(s.handleNotFound))
}

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

func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	msg := fmt.Sprintf("no API route %s: see docs/API.md for the routes", r.URL.EscapedPath())
	if strings.HasPrefix(r.URL.EscapedPath(), "/v1/counters/") {
		msg = fmt.Sprintf("no API route %s: a counter id must be one URL-escaped path segment (escape '/' as %%2F)", r.URL.EscapedPath())
	}
	s.error(w, r, shardcounter.Errorf(shardcounter.ENOTFOUND, "%s", msg))
}
