// Package ui is the dashboard that `shardcounter serve` answers at /ui/: a
// page of HTML, CSS and JavaScript embedded in the binary, so that it works
// from the binary alone, with nothing fetched from anywhere else.
//
// The page holds no data. Everything it shows it reads from the HTTP API
// (/v1), with the bearer token when the server has one, so the page
// itself is served without a token: a browser must load it to be asked
// for the token. See docs/DASHBOARD.md.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// file is one asset, read once at start.
type file struct {
	body        []byte
	contentType string
	etag        string
}

// files are the assets by name ("index.html", "app.js", ...).
var files = func() map[string]file {
	m := make(map[string]file)
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		m[strings.TrimPrefix(p, "static/")] = file{
			body:        b,
			contentType: contentTypes[path.Ext(p)],
			etag:        `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`,
		}
		return nil
	})
	if err != nil {
		panic("ui: reading the embedded assets: " + err.Error())
	}
	return m
}()

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
}

// contentSecurityPolicy lets the page load its own assets and call its own
// server, and nothing else: no inline script, no other origin, no frames.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the dashboard's assets under prefix ("/ui/"): the page
// at prefix itself, its assets by name, 404 for anything else. It answers
// GET and HEAD, with an ETag so that a browser revalidates cheaply, and
// with a Content-Security-Policy that confines the page to its server.
func Handler(prefix string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, prefix)
		if !ok {
			http.NotFound(w, r)
			return
		}
		if name == "" {
			name = "index.html"
		}
		f, ok := files[name]
		if !ok || name != path.Clean(name) {
			http.Error(w, "404 page not found: the dashboard is at "+prefix, http.StatusNotFound)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "405 method not allowed: use GET", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.contentType)
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache") // revalidate: a new binary may bring new assets
		h.Set("ETag", f.etag)
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.body))
	})
}
