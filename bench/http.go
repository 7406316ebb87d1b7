package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	shttp "github.com/shardcounter/shardcounter/http"
)

// loadgen is the HTTP load generator of the http path and the http-bare
// peer: one request at a time per client, each a POST of {"by":1} to a
// counter's increment (or decrement) route, a PUT or DELETE of a member,
// a GET of the counter or a POST /v1/reads of a timeline's counters, over
// keep-alive connections. Both are driven by this same code, so their
// ratio is the cost of shardcounter's server, engine and store, not of
// the client.
type loadgen struct {
	base  string // server base URL, without a trailing slash
	token string
	hc    *http.Client
}

var incrementBody = []byte(`{"by":1}`)

func newLoadgen(base, token string, clients int) *loadgen {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// One connection per client, kept: the default of 2 idle connections
	// per host would make most requests open a new one.
	tr.MaxIdleConnsPerHost = clients
	tr.MaxIdleConns = clients
	return &loadgen{
		base:  strings.TrimRight(base, "/"),
		token: token,
		hc:    &http.Client{Transport: tr, Timeout: 30 * time.Second},
	}
}

// do sends one request and reads the whole reply, decoding it into out
// when out is not nil. A reply with the API's error body is that
// *shardcounter.Error (not_found, out_of_range...); any other status
// than 2xx is an error.
func (l *loadgen) do(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, l.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if l.token != "" {
		req.Header.Set("Authorization", "Bearer "+l.token)
	}
	resp, err := l.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e struct {
			Error *shardcounter.Error `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != nil && e.Error.Code != "" {
			return e.Error
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: reply %q: %w", method, path, data, err)
		}
	}
	return nil
}

func (l *loadgen) close() { l.hc.CloseIdleConnections() }

// rss reads the server's process_resident_memory_bytes from its
// /metrics, which needs no token. A server that does not export it has
// no figure: ok false.
func (l *loadgen) rss(ctx context.Context) (int64, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.base+"/metrics", nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := l.hc.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body) //nolint:errcheck // the status says it
		return 0, false, nil
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "process_resident_memory_bytes "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err != nil {
				return 0, false, fmt.Errorf("/metrics: process_resident_memory_bytes %q: %w", strings.TrimSpace(v), err)
			}
			return int64(f), true, nil
		}
	}
	return 0, false, nil
}

func (l *loadgen) process() string { return "server" }

// httpService is the http path: writes and reads through the load
// generator, creation and batches through the API's client. When the run
// started its own server it reads back and deletes through the store once
// the server and its engine have stopped; against a running server,
// through the API.
type httpService struct {
	lg     *loadgen
	client *shttp.Client
	spec   shardcounter.Spec
	store  shardcounter.CounterStore // nil against a running server
	stop   func(ctx context.Context) error
	eng    *engine.Engine // the server's engine, when the run started it
}

func (s *httpService) write(ctx context.Context, w shardcounter.Write) (bool, error) {
	path := "/v1/counters/" + shttp.EscapeID(w.Counter)
	if w.Member == "" {
		route := "/increment"
		if w.Delta < 0 {
			route = "/decrement"
		}
		return true, s.lg.do(ctx, http.MethodPost, path+route, incrementBody, nil)
	}
	var res struct{ Added, Removed *bool }
	method := http.MethodPut
	if !*w.Present {
		method = http.MethodDelete
	}
	if err := s.lg.do(ctx, method, path+"/members/"+shttp.EscapeID(w.Member), nil, &res); err != nil {
		return false, err
	}
	switch {
	case *w.Present && res.Added != nil:
		return *res.Added, nil
	case !*w.Present && res.Removed != nil:
		return *res.Removed, nil
	}
	return false, fmt.Errorf("%s %s: the reply says neither added nor removed", method, path)
}

func (s *httpService) read(ctx context.Context, id string, c shardcounter.Consistency) error {
	return s.lg.do(ctx, http.MethodGet, "/v1/counters/"+shttp.EscapeID(id)+"?consistency="+string(c), nil, nil)
}

// readsRequest is the body of POST /v1/reads.
type readsRequest struct {
	Counters    []string                 `json:"counters"`
	Consistency shardcounter.Consistency `json:"consistency"`
}

func (s *httpService) readMany(ctx context.Context, ids []string, c shardcounter.Consistency) error {
	body, err := json.Marshal(readsRequest{ids, c})
	if err != nil {
		return err
	}
	var res struct {
		Readings []json.RawMessage `json:"readings"`
	}
	if err := s.lg.do(ctx, http.MethodPost, "/v1/reads", body, &res); err != nil {
		return err
	}
	if len(res.Readings) != len(ids) {
		return fmt.Errorf("POST /v1/reads: %d readings for %d counters", len(res.Readings), len(ids))
	}
	return nil
}

func (s *httpService) writeBatch(ctx context.Context, ws []shardcounter.Write) (int64, error) {
	return writeBatchCreating(ctx, ws, s.client.WriteBatch, s.create)
}

func (s *httpService) create(ctx context.Context, id string) error {
	_, _, err := s.client.CreateCounter(ctx, id, shardcounter.CreateOptions{
		Shards: s.spec.Shards, Kind: s.spec.Kind, Min: s.spec.Min, Max: s.spec.Max, Window: s.spec.Window,
	})
	return err
}

func (s *httpService) sum(ctx context.Context, ids []string) (int64, error) {
	if s.store != nil {
		return naiveService{s.store, s.spec}.sum(ctx, ids)
	}
	rs, err := s.client.ReadCounters(ctx, ids, shardcounter.Strong)
	if err != nil {
		return 0, err
	}
	var total int64
	for i, r := range rs {
		if r.Err != nil {
			return 0, fmt.Errorf("%s: %w", ids[i], r.Err)
		}
		total += r.Reading.Value
	}
	return total, nil
}

func (s *httpService) window(ctx context.Context, id string) (int64, error) {
	if s.store != nil {
		return naiveService{s.store, s.spec}.window(ctx, id)
	}
	r, err := s.client.ReadWindow(ctx, id, time.Duration(s.spec.Window.Retention))
	if err != nil {
		return 0, err
	}
	return r.Value, nil
}

func (s *httpService) remove(ctx context.Context, id string) error {
	if s.store != nil {
		return s.store.DeleteCounter(ctx, id)
	}
	return s.client.DeleteCounter(ctx, id)
}

func (s *httpService) close(ctx context.Context) error {
	s.lg.close()
	if s.stop != nil {
		return s.stop(ctx)
	}
	return nil
}

// startHTTP returns the http path's service: against cfg.Server, or
// against a server it starts over cfg.Store. That server is the one
// `shardcounter serve` runs (http.Server over a durable engine) on a
// loopback port of this process; the http-bare peer is served the same
// way, so both share the machine with the load generator alike.
func startHTTP(ctx context.Context, cfg Config, spec shardcounter.Spec) (*httpService, error) {
	if cfg.Server != "" {
		c := shttp.NewClient(cfg.Server)
		c.Token = cfg.Token
		// A listing, not /readyz: it checks the token too, which would
		// otherwise turn every write of the run into an error.
		if _, err := c.ListCounters(ctx, shardcounter.ListOptions{Limit: 1}); err != nil {
			return nil, fmt.Errorf("bench: server %s: %w", cfg.Server, err)
		}
		return &httpService{lg: newLoadgen(cfg.Server, cfg.Token, cfg.Clients), client: c, spec: spec}, nil
	}
	eng, err := engine.New(cfg.Store, engineConfig(cfg, spec, 0))
	if err != nil {
		return nil, err
	}
	srv, url, err := serveLoopback(shttp.NewServer(eng, shttp.ServerOptions{Logger: slog.New(slog.DiscardHandler)}))
	if err != nil {
		eng.Close(ctx) //nolint:errcheck // nothing was written
		return nil, err
	}
	return &httpService{
		lg:     newLoadgen(url, "", cfg.Clients),
		client: shttp.NewClient(url),
		spec:   spec,
		store:  cfg.Store,
		eng:    eng,
		stop: func(ctx context.Context) error {
			err := srv.Shutdown(ctx)
			if cerr := eng.Close(ctx); err == nil {
				err = cerr
			}
			return err
		},
	}, nil
}

// serveLoopback serves h on a free port of 127.0.0.1 with the timeouts of
// `shardcounter serve`, and returns the server and its base URL.
func serveLoopback(h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("bench: listen on loopback: %w", err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(slog.DiscardHandler, slog.LevelWarn),
	}
	// Serve returns ErrServerClosed at Shutdown; any other failure shows
	// as the run's request errors.
	go srv.Serve(ln) //nolint:errcheck
	return srv, "http://" + ln.Addr().String(), nil
}

// bareHandler is the http-bare peer: the least an HTTP server can do per
// operation. A GET answers with the value; POST /v1/reads (a timeline's
// batch read) answers an empty list; any other request drains its body,
// adds 1 to one atomic counter (subtracts, for a decrement or a DELETE)
// and answers like the write routes. It ignores the counter in the path,
// so every counter is the same one.
type bareHandler struct{ n atomic.Int64 }

// BareHandler returns the http-bare peer's handler, for serving it in a
// process of its own (cmd/httpbare), where its CPU time is its own.
func BareHandler() http.Handler { return &bareHandler{} }

func (b *bareHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body) //nolint:errcheck // a short body is the client's problem
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet:
		fmt.Fprintf(w, `{"id":"bare","value":%d}`+"\n", b.n.Load())
	case r.URL.Path == "/v1/reads":
		io.WriteString(w, `{"readings":[]}`+"\n") //nolint:errcheck
	default:
		if r.Method == http.MethodDelete || strings.HasSuffix(r.URL.Path, "/decrement") {
			b.n.Add(-1)
		} else {
			b.n.Add(1)
		}
		io.WriteString(w, `{"counter":"bare","applied":true,"added":true,"removed":true}`+"\n") //nolint:errcheck
	}
}
