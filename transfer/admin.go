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
// tokens (shttp.Admin, in the HTTP server's route table). They stream for as long as they
// need: an export or a backup of a large store outlasts any request
// timeout.
const (
	// ExportPath streams the store's export (GET, ?prefix=P).
	ExportPath = "/admin/export"
	// ImportPath reads an export from the body into the store (POST,
	// ?replace=true) and answers an ImportResult.
	ImportPath = "/admin/import"
	// BackupPath streams an online copy of an embedded store (GET): the
	// bolt file, or a tar of a Pebble checkpoint (?rate=BYTES a second,
	// DefaultBackupRate without it, 0 for no pacing).
	// BackupKindHeader says which.
	BackupPath = "/admin/backup"
	// VerifyPath streams VerifyLines (GET, ?prefix=P): a line per drift,
	// then the summary.
	VerifyPath       = "/admin/verify"
	BackupKindHeader = "X-Shardcounter-Backup"
)

// ImportResult is the reply of ImportPath.
type ImportResult struct {
	Stats               Stats      `json:"stats"`
	Conflicts           []Conflict `json:"conflicts,omitempty"`            // the first 1000
	CollectionConflicts []string   `json:"collection_conflicts,omitempty"` // the first 1000
	RankingConflicts    []string   `json:"ranking_conflicts,omitempty"`    // every one (at most MaxRankings)
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

// Admin returns the handlers of the admin endpoints over store, the store
// a server serves (not the engine over it: an export reads the store
// itself, and an import writes it through the same Apply the engine
// uses). Cached reads of imported counters may lag the import by the
// engine's --max-staleness. An export of an embedded store reads an
// online copy of it (snapshot), so that it is one consistent snapshot
// while the server takes writes.
func Admin(store shardcounter.CounterStore, log *slog.Logger) shttp.Admin {
	var a shttp.Admin
	a.Export = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noDeadlines(w)
		q, err := shttp.CheckQuery(r, "prefix")
		if err != nil {
			adminError(w, err)
			return
		}
		prefix := q.Get("prefix")
		if prefix != "" {
			if err := shardcounter.ValidateID(shardcounter.CounterIDKind, prefix); err != nil {
				adminError(w, err)
				return
			}
		}
		src, release, err := snapshot(r.Context(), store)
		if err != nil {
			adminError(w, err)
			return
		}
		defer release()
		w.Header().Set("Content-Type", "application/x-ndjson")
		// An error half way leaves the stream without its end line,
		// which the client reads as cut short.
		if _, err := Export(r.Context(), src, w, ExportOptions{Prefix: prefix}); err != nil {
			log.Warn("admin export stopped", "error", err)
		}
	})
	a.Import = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noDeadlines(w)
		q, err := shttp.CheckQuery(r, "replace")
		if replace := q.Get("replace"); err == nil && replace != "" && replace != "true" && replace != "false" {
			err = shardcounter.Errorf(shardcounter.EINVALID, "replace is %q: give true or false", replace)
		}
		if err != nil {
			adminError(w, err)
			return
		}
		var res ImportResult
		st, err := Import(r.Context(), store, r.Body, ImportOptions{Replace: q.Get("replace") == "true",
			Conflict: func(id string, have, want shardcounter.Spec) {
				if len(res.Conflicts) < 1000 {
					res.Conflicts = append(res.Conflicts, Conflict{ID: id, Have: have, Want: want})
				}
			},
			CollectionConflict: func(name string) {
				if len(res.CollectionConflicts) < 1000 {
					res.CollectionConflicts = append(res.CollectionConflicts, name)
				}
			},
			RankingConflict: func(name string, _, _ shardcounter.RankingOptions) {
				res.RankingConflicts = append(res.RankingConflicts, name)
			}})
		if err != nil {
			adminError(w, shardcounter.Errorf(shardcounter.EINVALID, "%s", errorText(err)))
			return
		}
		res.Stats = st
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(res)
	})
	a.Verify = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noDeadlines(w)
		q, err := shttp.CheckQuery(r, "prefix")
		if err != nil {
			adminError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		n, drifts, err := Verify(r.Context(), store, VerifyOptions{Prefix: q.Get("prefix"), Drift: func(d Drift) {
			enc.Encode(VerifyLine{Drift: &d})
		}})
		end := VerifyLine{Verified: n, Drifts: len(drifts)}
		if err != nil {
			end.Error = errorText(err)
		}
		enc.Encode(end)
	})
	a.Backup = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noDeadlines(w)
		rate, err := backupRate(r)
		if err == nil {
			err = backup(r.Context(), store, w, rate)
		}
		if err != nil {
			adminError(w, err)
		}
	})
	return a
}

// snapshot returns a store that holds what store holds now and that no
// write changes, and the function that frees it: for bolt, a copy of the
// file by Tx.WriteTo; for Pebble, a checkpoint (hard links), opened as a
// store of its own, which holds every total in memory as the live store
// does while the export runs. Other stores are returned as they are
// (docs/EXPORT.md, "Consistency").
func snapshot(ctx context.Context, store shardcounter.CounterStore) (shardcounter.CounterStore, func(), error) {
	var dir string
	var open func(string) (shardcounter.CounterStore, error)
	var copyTo func(string) error
	if s, ok := shardcounter.As[*bolt.CounterStore](store); ok {
		dir = filepath.Dir(s.Path())
		copyTo = func(tmp string) error {
			f, err := os.Create(filepath.Join(tmp, "snapshot.db"))
			if err != nil {
				return err
			}
			if _, err := s.Backup(ctx, f, nil); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		}
		open = func(tmp string) (shardcounter.CounterStore, error) {
			return bolt.Open(ctx, filepath.Join(tmp, "snapshot.db"), bolt.Options{})
		}
	} else if s, ok := shardcounter.As[*pebble.CounterStore](store); ok {
		dir = filepath.Dir(filepath.Clean(s.Dir()))
		copyTo = func(tmp string) error { return s.Checkpoint(filepath.Join(tmp, "pebble")) }
		open = func(tmp string) (shardcounter.CounterStore, error) {
			return pebble.Open(ctx, filepath.Join(tmp, "pebble"), pebble.Options{})
		}
	} else {
		return store, func() {}, nil
	}
	tmp, err := os.MkdirTemp(dir, ".snapshot-")
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: %w", err)
	}
	snap, err := func() (shardcounter.CounterStore, error) {
		if err := copyTo(tmp); err != nil {
			return nil, err
		}
		return open(tmp)
	}()
	if err != nil {
		os.RemoveAll(tmp)
		return nil, nil, err
	}
	return snap, func() { snap.Close(); os.RemoveAll(tmp) }, nil
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

// backup writes the store's online copy to w, a Pebble checkpoint at rate
// bytes a second (0: as fast as it goes).
func backup(ctx context.Context, store shardcounter.CounterStore, w http.ResponseWriter, rate int64) error {
	if s, ok := shardcounter.As[*bolt.CounterStore](store); ok {
		w.Header().Set(BackupKindHeader, "bolt")
		w.Header().Set("Content-Type", "application/octet-stream")
		// Not paced: the copy holds a read transaction, and bolt's writes
		// wait for read transactions to end when the file grows.
		_, err := s.Backup(ctx, w, func(n int64) { w.Header().Set("Content-Length", strconv.FormatInt(n, 10)) })
		return err
	}
	if s, ok := shardcounter.As[*pebble.CounterStore](store); ok {
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
		return writeTar(paced(ctx, w, rate), dir)
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
