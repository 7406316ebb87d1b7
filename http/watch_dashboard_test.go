package http_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	shttp "github.com/shardcounter/shardcounter/http"
)

// TestDashboardRoutes: the page loads without the token (it holds no
// data); the engine's numbers, like all of /v1, need it.
func TestDashboardRoutes(t *testing.T) {
	e := mustServeWatch(t, shttp.ServerOptions{AuthTokens: []string{"sesame"}}, nil)
	e.create(t, "c")
	e.add(t, "c", 3)
	e.add(t, "c", 4)

	do := func(path, token string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, e.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultTransport.RoundTrip(req) // no redirects followed
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := do("/ui/", ""); resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("/ui/ without a token: status %d %q, want the page", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp := do("/ui", ""); resp.StatusCode/100 != 3 || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("/ui: status %d Location %q, want a redirect to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := do("/v1/engine", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/v1/engine without a token: status %d, want 401", resp.StatusCode)
	}
	if resp := do("/v1/engine?verbose=1", "sesame"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("/v1/engine?verbose=1: status %d, want 400", resp.StatusCode)
	}
	resp := do("/v1/engine", "sesame")
	var st shttp.EngineStats
	dec := json.NewDecoder(resp.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/v1/engine: status %d, %v", resp.StatusCode, err)
	}
	if st.WritesApplied != 2 || st.Commits < 1 || st.Commits > 2 || st.StoreIncrements < 1 || st.CommitSeconds <= 0 || st.AsOf.IsZero() {
		t.Fatalf("/v1/engine after two writes: %+v", st)
	}
}
