package transfer

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/pebble"
)

// Admin endpoints, which serve mounts beside the API behind its bearer
// tokens (shttp.Server.RequireToken). They stream for as long as they
// need: an export or a backup of a large store outlasts any request
// timeout.
const (
	// ExportPath streams the store's export (GET, ?prefix=P).
	ExportPath = "/admin/export"
	// ImportPath reads an export from the body into the store (POST,
	// ?replace=true) and answers an ImportResult.
	ImportPath = "/admin/import"
	// BackupPath streams an online copy of an embedded store (GET): the
	// bolt file, or a tar of a Pebble checkpoint. BackupKindHeader says
	// which.
	BackupPath = "/admin/backup"
	// VerifyPath streams VerifyLines (GET, ?prefix=P): a line per drift,
	// then the summary.
	VerifyPath       = "/admin/verify"
	BackupKindHeader = "X-Shardcounter-Backup"
)

// ImportResult is the reply of ImportPath.
type ImportResult struct {
	Stats     Stats      `json:"stats"`
	Conflicts []Conflict `json:"conflicts,omitempty"` // the first 1000
}

// VerifyLine is one line of VerifyPath's reply: a drift, or the last
// line, which counts the counters verified and the drifts, and names the
// error that stopped the verification if one did.
type VerifyLine struct {
	Drift    *Drift `json:"drift,omitempty"`
	Verified int64  `json:"verified,omitempty"`
	Drifts   int    `json:"drifts,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Conflict is a counter an import left alone: it exists with other
// options.
type Conflict struct {
	ID   string            `json:"id"`
	Have shardcounter.Spec `json:"have"`
	Want shardcounter.Spec `json:"want"`
}

// Admin returns the handler of the admin endpoints over store, the store
// a server serves (not the engine over it: an export reads the store
// itself, and an import writes it through the same Apply the engine
// uses). Cached reads of imported counters may lag the import by the
// engine's --max-staleness.
func Admin(store shardcounter.CounterStore, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ExportPath, func(w http.ResponseWriter, r *http.Request) {
		noDeadlines(w)
		prefix := r.URL.Query().Get("prefix")
		if prefix != "" {
			if err := shardcounter.ValidateID(shardcounter.CounterIDKind, prefix); err != nil {
				adminError(w, err)
				return
			}
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		// An error half way leaves the stream without its end line,
		// which the client reads as cut short.
		if _, err := Export(r.Context(), store, w, ExportOptions{Prefix: prefix}); err != nil {
			log.Warn("admin export stopped", "error", err)
		}
	})
	mux.HandleFunc("POST "+ImportPath, func(w http.ResponseWriter, r *http.Request) {
		noDeadlines(w)
		var res ImportResult
		st, err := Import(r.Context(), store, r.Body, ImportOptions{Replace: r.URL.Query().Get("replace") == "true",
			Conflict: func(id string, have, want shardcounter.Spec) {
				if len(res.Conflicts) < 1000 {
					res.Conflicts = append(res.Conflicts, Conflict{ID: id, Have: have, Want: want})
				}
			}})
		if err != nil {
			adminError(w, shardcounter.Errorf(shardcounter.EINVALID, "%s", errorText(err)))
			return
		}
		res.Stats = st
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(res)
	})
	mux.HandleFunc("GET "+VerifyPath, func(w http.ResponseWriter, r *http.Request) {
		noDeadlines(w)
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		n, drifts, err := Verify(r.Context(), store, VerifyOptions{Prefix: r.URL.Query().Get("prefix"), Drift: func(d Drift) {
			enc.Encode(VerifyLine{Drift: &d})
		}})
		end := VerifyLine{Verified: n, Drifts: len(drifts)}
		if err != nil {
			end.Error = errorText(err)
		}
		enc.Encode(end)
	})
	mux.HandleFunc("GET "+BackupPath, func(w http.ResponseWriter, r *http.Request) {
		noDeadlines(w)
		if err := backup(r.Context(), store, w); err != nil {
			adminError(w, err)
		}
	})
	return mux
}

// noDeadlines lifts the server's read and write deadlines for a stream.
func noDeadlines(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Time{})
}

func adminError(w http.ResponseWriter, err error) {
	code := shardcounter.ErrorCode(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(shttp.ErrorStatusCode(code))
	json.NewEncoder(w).Encode(shttp.ErrorResponse{Error: shttp.ErrorBody{Code: code, Message: errorText(err)}})
}

// backup writes the store's online copy to w.
func backup(ctx context.Context, store shardcounter.CounterStore, w http.ResponseWriter) error {
	switch s := store.(type) {
	case *bolt.CounterStore:
		w.Header().Set(BackupKindHeader, "bolt")
		w.Header().Set("Content-Type", "application/octet-stream")
		_, err := s.Backup(ctx, w, func(n int64) { w.Header().Set("Content-Length", strconv.FormatInt(n, 10)) })
		return err
	case *pebble.CounterStore:
		// The checkpoint goes beside the store, on its file system, so
		// that its sstables are hard links rather than copies.
		tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(s.Dir())), ".backup-")
		if err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir := filepath.Join(tmp, "pebble")
		if err := s.Checkpoint(dir); err != nil {
			return err
		}
		w.Header().Set(BackupKindHeader, "pebble")
		w.Header().Set("Content-Type", "application/x-tar")
		return writeTar(w, dir)
	}
	return shardcounter.Errorf(shardcounter.EINVALID, "this server's store is not embedded: back PostgreSQL up with pg_dump or base backups, Redis with RDB or AOF (docs/OPERATIONS.md, \"Backups\"), or take a store-neutral copy with shardcounter export")
}

// writeTar writes the regular files under dir as a tar stream.
func writeTar(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: fi.Size(), ModTime: fi.ModTime(), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
