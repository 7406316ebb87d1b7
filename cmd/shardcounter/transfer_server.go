package main

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/pebble"
	"github.com/shardcounter/shardcounter/transfer"
)

// admin sends one request to a server's admin endpoint and returns its
// 2xx reply; any other status is the error its body names.
func (c *storeFlags) admin(ctx context.Context, method, path string, q url.Values, body io.Reader) (*http.Response, error) {
	cl, err := c.client.client()
	if err != nil {
		return nil, err
	}
	u := strings.TrimSuffix(cl.URL, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if cl.Token != "" {
		req.Header.Set("Authorization", "Bearer "+cl.Token)
	}
	// No timeout: a stream lasts as long as the store is large.
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the server at %s: %v", cl.URL, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	var e shttp.ErrorResponse
	if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e) == nil && e.Error.Message != "" {
		return nil, fmt.Errorf("server: %s", e.Error.Message)
	}
	return nil, fmt.Errorf("server answered %s on %s: is it a shardcounter server of this version?", resp.Status, path)
}

// exportServer copies a server's export to w, reading it as it goes so
// that a stream cut short is an error rather than a short file.
func (c *exportCommand) exportServer(ctx context.Context, w io.Writer, p *transfer.Progress) (transfer.Stats, error) {
	var st transfer.Stats
	q := url.Values{}
	if c.prefix != "" {
		q.Set("prefix", c.prefix)
	}
	resp, err := c.admin(ctx, http.MethodGet, transfer.ExportPath, q, nil)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	dec, err := transfer.NewDecoder(io.TeeReader(resp.Body, w))
	if err != nil {
		return st, err
	}
	for {
		rec, err := dec.Next()
		if err == io.EOF {
			return st, nil
		}
		if err != nil {
			return st, err
		}
		switch {
		case rec.Counter != nil:
			st.Counters++
			st.Buckets += int64(len(rec.Counter.Buckets))
			if rec.Counter.ExpiresAt != nil {
				st.Deadlines++
			}
			p.Add(1)
		case rec.Members != nil:
			st.Members += int64(len(rec.Members.Members))
		case rec.Ranking != nil:
			st.Rankings++
		case rec.Collection != nil:
			st.Collections++
		case rec.Document != nil:
			st.Documents++
		}
	}
}

// importServer sends an export to a server's import endpoint.
func (c *importCommand) importServer(ctx context.Context, r io.Reader) (transfer.Stats, error) {
	q := url.Values{}
	if c.replace {
		q.Set("replace", "true")
	}
	resp, err := c.admin(ctx, http.MethodPost, transfer.ImportPath, q, r)
	if err != nil {
		return transfer.Stats{}, err
	}
	defer resp.Body.Close()
	var res transfer.ImportResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return transfer.Stats{}, fmt.Errorf("reading the server's reply: %v", err)
	}
	for _, k := range res.Conflicts {
		c.conflict(k.ID, k.Have, k.Want)
	}
	for _, name := range res.RankingConflicts {
		fmt.Fprintf(c.m.Stderr, "shardcounter import: ranking %s exists with other options: left as it is; --replace makes it again\n", name)
	}
	for _, name := range res.CollectionConflicts {
		fmt.Fprintf(c.m.Stderr, "shardcounter import: collection %s exists with other options: left as it is; --replace makes it again\n", name)
	}
	return res.Stats, nil
}

// backupCommand is `shardcounter backup`.
type backupCommand struct {
	storeFlags
	out string
}

func newBackupCommand(m *Main) command { return &backupCommand{storeFlags: storeFlags{m: m}} }

func (c *backupCommand) flags(fs *flag.FlagSet) {
	fs.BoolVar(&c.quiet, "quiet", false, "print no summary line")
	c.client.m = c.m
	c.client.registerServer(fs)
	fs.StringVar(&c.out, "out", "", "write the backup to `PATH`, which must not exist: a file for a bolt store, a directory for Pebble")
}

func (c *backupCommand) example() string {
	return `  shardcounter backup --server http://127.0.0.1:8080 --token-file token --out ./backup-pebble
  shardcounter serve --store pebble:./backup-pebble      # restore: serve the backup
The server goes on serving while it copies a consistent snapshot (Pebble
checkpoint, bbolt Tx.WriteTo). PostgreSQL and Redis are backed up with their
own tools (docs/OPERATIONS.md, "Backups").`
}

func (c *backupCommand) run(ctx context.Context, args []string) error {
	if len(args) != 0 {
		return usagef("backup takes no arguments, got %q", args)
	}
	if c.out == "" {
		return usagef("give --out PATH: where to write the backup")
	}
	if _, err := os.Lstat(c.out); err == nil {
		return usagef("--out %s exists: give a new path, so that no backup overwrites another", c.out)
	}
	resp, err := c.admin(ctx, http.MethodGet, transfer.BackupPath, nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	p := c.progress("bytes")
	body := &countReader{r: resp.Body, p: p}
	if resp.ContentLength > 0 {
		p.SetFraction(func() float64 { return float64(body.n.Load()) / float64(resp.ContentLength) })
	}
	kind := resp.Header.Get(transfer.BackupKindHeader)
	switch kind {
	case "bolt":
		err = writeBackupFile(c.out, body)
	case "pebble":
		err = untar(c.out, body)
	default:
		err = fmt.Errorf("the server sent a backup of kind %q, which this shardcounter cannot write: use one of the server's version", kind)
	}
	if err != nil {
		os.RemoveAll(c.out + ".partial")
		p.Done("stopped after", "")
		return fmt.Errorf("backup: %v (nothing was written to %s)", err, c.out)
	}
	p.Done("backed up", kind+" store to "+c.out+"; serve it with --store "+kind+":"+c.out)
	return nil
}

// checkBackup opens the backup as the store it is, so that a copy that is
// not one is an error now rather than at restore time.
func checkBackup(ctx context.Context, kind, path string) error {
	var s shardcounter.CounterStore
	var err error
	if kind == "bolt" {
		s, err = bolt.Open(ctx, path, bolt.Options{})
	} else {
		s, err = pebble.Open(ctx, path, pebble.Options{})
	}
	if err != nil {
		return err
	}
	return s.Close()
}

// countReader counts the bytes read through it, in n and in p (if set).
type countReader struct {
	r io.Reader
	p *transfer.Progress
	n atomic.Int64
}

func (c *countReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.Add(int64(n))
	c.n.Add(int64(n))
	return n, err
}

// writeBackupFile writes r to path through path.partial, renamed once whole
// and checked.
func writeBackupFile(path string, r io.Reader) error {
	tmp := path + ".partial"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = checkBackup(context.Background(), "bolt", tmp)
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// untar extracts a tar of regular files into dir through dir.partial,
// renamed once whole and checked.
func untar(dir string, r io.Reader) error {
	tmp := dir + ".partial"
	if err := os.MkdirAll(tmp, 0o750); err != nil {
		return err
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name := filepath.FromSlash(h.Name)
		if h.Typeflag != tar.TypeReg || !filepath.IsLocal(name) {
			return errors.New("the backup holds an entry that is not a file inside it: " + h.Name)
		}
		if err := extract(filepath.Join(tmp, name), tr); err != nil {
			return err
		}
	}
	if err := checkBackup(context.Background(), "pebble", tmp); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

func extract(path string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// verifyServer runs verify on a server's store and reports its drifts.
func (c *verifyCommand) verifyServer(ctx context.Context, p *transfer.Progress, report func(transfer.Drift)) (int, error) {
	q := url.Values{}
	if c.prefix != "" {
		q.Set("prefix", c.prefix)
	}
	resp, err := c.admin(ctx, http.MethodGet, transfer.VerifyPath, q, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var l transfer.VerifyLine
		if err := dec.Decode(&l); err != nil {
			return 0, fmt.Errorf("the server's reply was cut short (%v): run verify again", err)
		}
		if l.Drift != nil {
			report(*l.Drift)
			continue
		}
		p.Add(l.Verified)
		if l.Error != "" {
			return l.Drifts, errors.New(l.Error)
		}
		return l.Drifts, nil
	}
}
