package ui_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter/ui"
)

func get(t *testing.T, h http.Handler, method, path string, headers ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Result()
}

func TestHandler(t *testing.T) {
	h := ui.Handler("/ui/")
	for path, ctype := range map[string]string{
		"/ui/":           "text/html; charset=utf-8",
		"/ui/index.html": "text/html; charset=utf-8",
		"/ui/app.js":     "text/javascript; charset=utf-8",
		"/ui/style.css":  "text/css; charset=utf-8",
	} {
		t.Run(strings.TrimPrefix(path, "/ui/")+"OK", func(t *testing.T) {
			resp := get(t, h, http.MethodGet, path)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != ctype || len(body) == 0 {
				t.Fatalf("status %d Content-Type %q, %d bytes; want 200 %s", resp.StatusCode, resp.Header.Get("Content-Type"), len(body), ctype)
			}
			csp := resp.Header.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, want) {
					t.Fatalf("Content-Security-Policy %q lacks %q", csp, want)
				}
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Fatal("no X-Content-Type-Options: nosniff")
			}
			etag := resp.Header.Get("ETag")
			if etag == "" {
				t.Fatal("no ETag")
			}
			if again := get(t, h, http.MethodGet, path, "If-None-Match", etag); again.StatusCode != http.StatusNotModified {
				t.Fatalf("If-None-Match its ETag: status %d, want 304", again.StatusCode)
			}
		})
	}
	t.Run("NotFound", func(t *testing.T) {
		for _, path := range []string{"/ui/nope.js", "/ui/static/app.js", "/ui/app.js/", "/other"} {
			if resp := get(t, h, http.MethodGet, path); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("%s: status %d, want 404", path, resp.StatusCode)
			}
		}
	})
	t.Run("Method", func(t *testing.T) {
		resp := get(t, h, http.MethodPost, "/ui/")
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Fatalf("POST: status %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
		}
	})
}

// TestSelfContained: the page loads nothing from another origin. The only
// absolute URL in the assets is SVG's namespace name, which is never
// fetched.
func TestSelfContained(t *testing.T) {
	h := ui.Handler("/ui/")
	url := regexp.MustCompile(`(?i)\b(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	for _, name := range []string{"", "app.js", "style.css"} {
		body, _ := io.ReadAll(get(t, h, http.MethodGet, "/ui/"+name).Body)
		for _, m := range url.FindAllString(string(body), -1) {
			if m != "http://www.w3.org" {
				t.Errorf("/ui/%s refers to %s: the dashboard must work from the binary alone", name, m)
			}
		}
		if name == "" {
			for _, want := range []string{`<script src="app.js" defer>`, `<link rel="stylesheet" href="style.css">`} {
				if !strings.Contains(string(body), want) {
					t.Errorf("index.html lacks %s", want)
				}
			}
		}
	}
}
