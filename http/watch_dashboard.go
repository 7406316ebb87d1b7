package http

import (
	"net/http"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/ui"
)

// This file serves what the dashboard needs beyond the API proper: its
// page (package ui) at /ui/, and the write engine's running totals as
// JSON at /v1/engine, which the page turns into batch sizes and commit
// times. /metrics has the same numbers as histograms, but in the
// Prometheus text format, without the token, and for Prometheus.

// dashboard serves the page and its assets (ClassPublic routes): the page
// holds no data, so it is served without the token, since a browser must
// load it to be asked for one. Everything it shows comes from /v1, which
// needs the token.
var dashboard = ui.Handler("/ui/")

// GET /ui: the page is at /ui/, whose assets are named relative to it.
func (s *Server) handleUIRedirect(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/ui/", http.StatusTemporaryRedirect)
}

// GET /ui/ and /ui/{asset}
func (s *Server) handleUI(w http.ResponseWriter, r *http.Request) { dashboard.ServeHTTP(w, r) }

// EngineStats is the body of GET /v1/engine: the write engine's totals
// since the server started. Rates, batch sizes and commit times are the
// differences of two of them over the time between their AsOf.
type EngineStats struct {
	WritesApplied   int64     `json:"writes_applied"`
	WritesDuplicate int64     `json:"writes_duplicate"`
	WritesFailed    int64     `json:"writes_failed"`
	WritesQueued    int64     `json:"writes_queued"`    // now, not a total
	Commits         int64     `json:"commits"`          // store.Apply calls
	StoreIncrements int64     `json:"store_increments"` // after folding writes to one counter
	CommitSeconds   float64   `json:"commit_seconds"`   // total time in commits
	AsOf            time.Time `json:"as_of"`
}

// GET /v1/engine
func (s *Server) handleEngine(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		s.error(w, r, err)
		return
	}
	e, ok := s.svc.(interface{ Stats() *engine.Stats })
	if !ok {
		s.error(w, r, shardcounter.Errorf(shardcounter.ENOTFOUND,
			"this server's service is not the write engine, so it has no engine statistics"))
		return
	}
	st := e.Stats()
	s.writeJSON(w, http.StatusOK, EngineStats{
		WritesApplied:   st.Writes.Load(),
		WritesDuplicate: st.Duplicates.Load(),
		WritesFailed:    st.Errors.Load(),
		WritesQueued:    st.Queued.Load(),
		Commits:         st.Flushes.Load(),
		StoreIncrements: st.Items.Load(),
		CommitSeconds:   time.Duration(st.FlushNanos.Load()).Seconds(),
		AsOf:            time.Now().UTC(),
	})
}
