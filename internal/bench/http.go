package bench

import (
	"bytes"
	"context"
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
// counter's increment route or a GET of the counter, over keep-alive
// connections. Both are driven by this same code, so their ratio is the
// cost of shardcounter's server, engine and store, not of the client.
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

// do sends one request and reads the whole reply. A 404 is
// shardcounter.ErrNotFound; any other status than 200 is an error.
func (l *loadgen) do(ctx context.Context, method, path string, body []byte) error {
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
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return shardcounter.ErrNotFound
	case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted: // 202: an async server queued the write
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return err
}

func (l *loadgen) close() { l.hc.CloseIdleConnections() }

// httpService is the http path: writes and reads through the load
// generator, creation through the API's client. When the run started its
// own server it reads back and deletes through the store once the server
// and its engine have stopped; against a running server, through the
// API.
type httpService struct {
	lg     *loadgen
	client *shttp.Client
	store  shardcounter.CounterStore // nil against a running server
	stop   func(ctx context.Context) error
}

func (s *httpService) write(ctx context.Context, id string) error {
	return s.lg.do(ctx, http.MethodPost, "/v1/counters/"+shttp.EscapeID(id)+"/increment", incrementBody)
}

func (s *httpService) read(ctx context.Context, id string, c shardcounter.Consistency) error {
	return s.lg.do(ctx, http.MethodGet, "/v1/counters/"+shttp.EscapeID(id)+"?consistency="+string(c), nil)
}

func (s *httpService) create(ctx context.Context, id string, shards int) error {
	_, _, err := s.client.CreateCounter(ctx, id, shardcounter.CreateOptions{Shards: shards})
	return err
}

func (s *httpService) value(ctx context.Context, id string) (int64, error) {
	if s.store != nil {
		return naiveService{s.store}.value(ctx, id)
	}
	r, err := s.client.ReadCounter(ctx, id, shardcounter.Strong)
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
func startHTTP(ctx context.Context, cfg Config) (*httpService, error) {
	if cfg.Server != "" {
		c := shttp.NewClient(cfg.Server)
		c.Token = cfg.Token
		// A listing, not /readyz: it checks the token too, which would
		// otherwise turn every write of the run into an error.
		if _, err := c.ListCounters(ctx, shardcounter.ListOptions{Limit: 1}); err != nil {
			return nil, fmt.Errorf("bench: server %s: %w", cfg.Server, err)
		}
		return &httpService{lg: newLoadgen(cfg.Server, cfg.Token, cfg.Clients), client: c}, nil
	}
	eng, err := engine.New(cfg.Store, engine.Config{NoAutoCreate: true})
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
		store:  cfg.Store,
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
// increment. A POST drains the body, adds 1 to one atomic counter and
// answers like the increment route; a GET answers with the value. It
// ignores the path, so every counter is the same one.
type bareHandler struct{ n atomic.Int64 }

func (b *bareHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body) //nolint:errcheck // a short body is the client's problem
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodPost {
		b.n.Add(1)
		io.WriteString(w, `{"counter":"bare","applied":true}`+"\n") //nolint:errcheck
		return
	}
	fmt.Fprintf(w, `{"id":"bare","value":%d}`+"\n", b.n.Load())
}
