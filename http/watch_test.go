package http_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/engine"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/metrics"
)

// countingStore is a real store that counts the strong reads it answers,
// so that a test can see what watchers cost the store.
type countingStore struct {
	shardcounter.CounterStore
	reads atomic.Int64
}

func (s *countingStore) ReadCounter(ctx context.Context, id string) (*shardcounter.Reading, error) {
	s.reads.Add(1)
	return s.CounterStore.ReadCounter(ctx, id)
}

// watchEnv is a server over the engine over a bolt store whose reads are
// counted.
type watchEnv struct {
	URL     string
	Server  *shttp.Server
	HTTP    *httptest.Server
	Client  *shttp.Client
	Store   *countingStore
	Metrics *metrics.Metrics
}

// mustServeWatch starts a watchEnv, stopped at the end of the test. config,
// when set, changes the http.Server before it starts.
func mustServeWatch(tb testing.TB, opts shttp.ServerOptions, config func(*http.Server)) *watchEnv {
	tb.Helper()
	b, err := bolt.Open(context.Background(), filepath.Join(tb.TempDir(), "shardcounter.db"), bolt.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	store := &countingStore{CounterStore: b}
	eng, err := engine.New(store, engine.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.New()
	}
	srv := shttp.NewServer(eng, opts)
	ts := httptest.NewUnstartedServer(Checked(tb, srv))
	if config != nil {
		config(ts.Config)
	}
	ts.Start()
	tb.Cleanup(func() {
		srv.EndWatches()
		ts.Close()
		if err := eng.Close(context.Background()); err != nil {
			tb.Error(err)
		}
		b.Close()
	})
	c := shttp.NewClient(ts.URL)
	if len(opts.AuthTokens) > 0 {
		c.Token = opts.AuthTokens[0]
	}
	return &watchEnv{URL: ts.URL, Server: srv, HTTP: ts, Client: c, Store: store, Metrics: opts.Metrics}
}

func (e *watchEnv) create(tb testing.TB, id string) {
	tb.Helper()
	if _, _, err := e.Client.CreateCounter(context.Background(), id, shardcounter.CreateOptions{Shards: 4}); err != nil {
		tb.Fatal(err)
	}
}

func (e *watchEnv) add(tb testing.TB, id string, delta int64) {
	tb.Helper()
	if _, err := e.Client.WriteCounter(context.Background(), shardcounter.Write{Counter: id, Delta: delta}); err != nil {
		tb.Error(err) // Error, not Fatal: also called from writer goroutines
	}
}

// stream is a raw watch stream read line by line, as a browser would.
type stream struct {
	resp  *http.Response
	lines chan string // closed when the stream ends
}

// openStream sends a watch request and returns the stream, or the reply
// when it is not a stream. Headers come in name, value pairs.
func (e *watchEnv) openStream(tb testing.TB, ctx context.Context, pathAndQuery string, headers ...string) (*stream, *http.Response) {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+pathAndQuery, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if e.Client.Token != "" {
		req.Header.Set("Authorization", "Bearer "+e.Client.Token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp
	}
	s := &stream{resp: resp, lines: make(chan string, 64)}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	tb.Cleanup(func() { resp.Body.Close() })
	return s, resp
}

// next returns the next event's fields ("id: 3", "data: {...}"), skipping
// comments unless keepComments; ok is false when the stream ended.
func (s *stream) next(keepComments bool) (fields []string, ok bool) {
	for line := range s.lines {
		switch {
		case line == "" && len(fields) > 0:
			return fields, true
		case line == "":
		case strings.HasPrefix(line, ":") && !keepComments:
		default:
			fields = append(fields, line)
			if strings.HasPrefix(line, ":") {
				return fields, true
			}
		}
	}
	return fields, false
}

// nextData returns the data of the next event that has some.
func (s *stream) nextData(tb testing.TB) (id, data string) {
	tb.Helper()
	for {
		fields, ok := s.next(false)
		if !ok {
			tb.Fatalf("stream ended; last fields %q", fields)
		}
		for _, f := range fields {
			if v, ok := strings.CutPrefix(f, "id: "); ok {
				id = v
			}
			if v, ok := strings.CutPrefix(f, "data: "); ok {
				data = v
			}
		}
		if data != "" {
			return id, data
		}
	}
}

// TestWatch checks a watch stream over HTTP: its events, Last-Event-ID,
// its errors, and the end of a deleted counter's stream. The subtests share
// one server and its counter "likes".
func TestWatch(t *testing.T) {
	e := mustServeWatch(t, shttp.ServerOptions{}, nil)
	e.create(t, "likes")
	e.add(t, "likes", 5)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	t.Run("Stream", func(t *testing.T) { testWatchStream(t, ctx, e) })
	t.Run("LastEventID", func(t *testing.T) { testWatchLastEventID(t, ctx) })
	t.Run("Errors", func(t *testing.T) { testWatchErrors(t, ctx, e) })
	t.Run("Deleted", func(t *testing.T) { testWatchDeleted(t, ctx, e) })
}

// testWatchStream reads a stream of "likes" (at 5) from its headers and
// retry field through each change; a write that changes nothing net sends
// nothing.
func testWatchStream(t *testing.T, ctx context.Context, e *watchEnv) {
	s, resp := e.openStream(t, ctx, path("likes")+"/watch?interval=100ms")
	if s == nil {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control %q", cc)
	}
	fields, _ := s.next(false)
	if len(fields) != 1 || !strings.HasPrefix(fields[0], "retry: ") {
		t.Fatalf("first event %q, want a retry field", fields)
	}
	id, data := s.nextData(t)
	if id != "5" || !strings.Contains(data, `"value":5`) || !strings.Contains(data, `"consistency":"strong"`) {
		t.Fatalf("first event id %q data %s, want the reading of 5", id, data)
	}
	e.add(t, "likes", 2)
	if id, data = s.nextData(t); id != "7" || !strings.Contains(data, `"value":7`) {
		t.Fatalf("after +2: id %q data %s, want 7", id, data)
	}
	// A write that changes nothing net (+1 −1 in one interval, or
	// nothing at all) sends nothing: the next event is the next value.
	e.add(t, "likes", 3)
	if id, _ = s.nextData(t); id != "10" {
		t.Fatalf("after +3: id %q, want 10", id)
	}
}

// testWatchLastEventID checks that a client which already has the value
// (its Last-Event-ID) is sent no event until the value changes, and that one
// with another value is sent the current one at once. It has a server of its
// own, with a short heartbeat.
func testWatchLastEventID(t *testing.T, ctx context.Context) {
	e := mustServeWatch(t, shttp.ServerOptions{Watch: shttp.WatchOptions{Heartbeat: 50 * time.Millisecond}}, nil)
	e.create(t, "c")
	e.add(t, "c", 3)
	// The client has 3, which is the value: the stream starts with no
	// event, only heartbeats, until the value changes.
	s, resp := e.openStream(t, ctx, path("c")+"/watch?interval=100ms", "Last-Event-ID", "3")
	if s == nil {
		t.Fatalf("status %d", resp.StatusCode)
	}
	s.next(false) // retry
	fields, _ := s.next(true)
	if len(fields) != 1 || fields[0] != ": keep-alive" {
		t.Fatalf("with Last-Event-ID 3 at value 3, first event %q, want a heartbeat", fields)
	}
	e.add(t, "c", 1)
	if id, _ := s.nextData(t); id != "4" {
		t.Fatalf("id %q, want 4", id)
	}
	// A client that has another value gets the current one at once.
	s2, _ := e.openStream(t, ctx, path("c")+"/watch", "Last-Event-ID", "3")
	if id, _ := s2.nextData(t); id != "4" {
		t.Fatalf("with Last-Event-ID 3 at value 4: id %q, want 4", id)
	}
}

// testWatchErrors checks that a watch that cannot start is an error
// response, not a stream: a missing counter, a bad interval or Last-Event-ID,
// an unknown parameter, a method other than GET.
func testWatchErrors(t *testing.T, ctx context.Context, e *watchEnv) {
	for _, tc := range []struct {
		name, path, lastID string
		status             int
		code               string
	}{
		{"NotFound", path("nope") + "/watch", "", 404, shardcounter.ENOTFOUND},
		{"IntervalTooShort", path("likes") + "/watch?interval=99ms", "", 400, shardcounter.EINVALID},
		{"IntervalTooLong", path("likes") + "/watch?interval=2h", "", 400, shardcounter.EINVALID},
		{"IntervalNoUnit", path("likes") + "/watch?interval=1", "", 400, shardcounter.EINVALID},
		{"IntervalNegative", path("likes") + "/watch?interval=-1s", "", 400, shardcounter.EINVALID},
		{"IntervalTwice", path("likes") + "/watch?interval=1s&interval=2s", "", 400, shardcounter.EINVALID},
		{"UnknownParameter", path("likes") + "/watch?intervall=1s", "", 400, shardcounter.EINVALID},
		{"LastEventIDNotAValue", path("likes") + "/watch", "abc", 400, shardcounter.EINVALID},
		{"LastEventIDPlus", path("likes") + "/watch", "+5", 400, shardcounter.EINVALID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h []string
			if tc.lastID != "" {
				h = []string{"Last-Event-ID", tc.lastID}
			}
			s, resp := e.openStream(t, ctx, tc.path, h...)
			if s != nil {
				t.Fatalf("got a stream, want %d", tc.status)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), `"code":"`+tc.code+`"`) {
				t.Fatalf("status %d body %s, want %d %s", resp.StatusCode, body, tc.status, tc.code)
			}
		})
	}
	t.Run("Method", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, e.URL+path("likes")+"/watch", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET" {
			t.Fatalf("POST: status %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
		}
	})
}

// testWatchDeleted checks that deleting a watched counter ends its stream
// with an error event saying not_found.
func testWatchDeleted(t *testing.T, ctx context.Context, e *watchEnv) {
	e.create(t, "doomed")
	s, _ := e.openStream(t, ctx, path("doomed")+"/watch?interval=100ms")
	s.nextData(t)
	if err := e.Client.DeleteCounter(ctx, "doomed"); err != nil {
		t.Fatal(err)
	}
	fields, _ := s.next(false)
	if len(fields) != 2 || fields[0] != "event: error" || !strings.Contains(fields[1], `"code":"not_found"`) {
		t.Fatalf("after delete: %q, want an error event with not_found", fields)
	}
	if fields, ok := s.next(true); ok {
		t.Fatalf("after the not_found event: %q, want the stream to end", fields)
	}
}

func TestWatchAuth(t *testing.T) {
	e := mustServeWatch(t, shttp.ServerOptions{AuthTokens: []string{"sesame"}}, nil)
	e.create(t, "c")
	ctx := context.Background()
	e.Client.Token = ""
	if s, resp := e.openStream(t, ctx, path("c")+"/watch"); s != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: status %d, want 401", resp.StatusCode)
	}
	e.Client.Token = "sesame"
	s, resp := e.openStream(t, ctx, path("c")+"/watch")
	if s == nil {
		t.Fatalf("with the token: status %d", resp.StatusCode)
	}
	s.nextData(t)
}

// TestWatchSharesReads: many watchers of one counter cost the store one
// read per interval, not one each.
func TestWatchSharesReads(t *testing.T) {
	const watchers, interval = 50, 100 * time.Millisecond
	e := mustServeWatch(t, shttp.ServerOptions{}, nil)
	e.create(t, "hot")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var streams []*stream
	for range watchers {
		s, resp := e.openStream(t, ctx, path("hot")+"/watch?interval="+interval.String())
		if s == nil {
			t.Fatalf("status %d", resp.StatusCode)
		}
		s.nextData(t)
		streams = append(streams, s)
	}

	before, start := e.Store.reads.Load(), time.Now()
	const writes = 5
	for i := 1; i <= writes; i++ {
		e.add(t, "hot", 1)
		for j, s := range streams {
			// Every watcher sees each value: the writes are further apart
			// than an interval, since each waits for every watcher.
			if id, _ := s.nextData(t); id != fmt.Sprint(i) {
				t.Fatalf("watcher %d: id %s, want %d", j, id, i)
			}
		}
	}
	reads, elapsed := e.Store.reads.Load()-before, time.Since(start)
	// At most one read per interval, plus one for the partial intervals at
	// either end. Unshared, the 5 changes alone would have taken 250.
	if limit := int64(elapsed/interval) + 2; reads > limit {
		t.Fatalf("%d watchers: %d store reads in %v, want at most %d (one per %v)", watchers, reads, elapsed, limit, interval)
	}
	if reads < writes {
		t.Fatalf("%d store reads saw %d changes", reads, writes)
	}
	t.Logf("%d watchers, %d changes: %d store reads in %v", watchers, writes, reads, elapsed)
}

// blockingWriter is a ResponseWriter whose client never reads: every
// Write blocks until release is closed.
type blockingWriter struct {
	h       http.Header
	entered chan struct{} // closed at the first Write
	once    sync.Once
	release chan struct{}
}

func (w *blockingWriter) Header() http.Header { return w.h }
func (w *blockingWriter) WriteHeader(int)     {}
func (w *blockingWriter) Flush()              {}
func (w *blockingWriter) Write(b []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.release
	return 0, errors.New("client gone")
}

// TestWatchStalledWatcher: a watcher whose client takes nothing holds up
// no one; it is dropped once its buffer is full.
func TestWatchStalledWatcher(t *testing.T) {
	const buffer = 2
	e := mustServeWatch(t, shttp.ServerOptions{Watch: shttp.WatchOptions{Buffer: buffer}}, nil)
	e.create(t, "c")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	stalled := &blockingWriter{h: http.Header{}, entered: make(chan struct{}), release: make(chan struct{})}
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, path("c")+"/watch?interval=100ms", nil)
	served := make(chan struct{})
	go func() {
		defer close(served)
		e.Server.ServeHTTP(stalled, req)
	}()
	<-stalled.entered // the stalled watcher's handler is stuck in its first write

	s, _ := e.openStream(t, ctx, path("c")+"/watch?interval=100ms")
	s.nextData(t)
	// The stalled watcher's buffer fills after `buffer` changes; the next
	// drops it. The healthy watcher sees every change meanwhile.
	for i := 1; i <= buffer+3; i++ {
		e.add(t, "c", 1)
		if id, _ := s.nextData(t); id != fmt.Sprint(i) {
			t.Fatalf("healthy watcher: id %s, want %d", id, i)
		}
	}
	exp := scrape(t, e)
	if got := metricValue(t, exp, "shardcounter_watch_dropped_total"); got != 1 {
		t.Fatalf("watch_dropped_total %v, want 1", got)
	}
	close(stalled.release)
	<-served // its handler ends once its write fails, as at a write deadline
}

// TestWatchGoneClients: watchers whose clients leave free everything:
// their goroutines, their feed, their slot.
func TestWatchGoneClients(t *testing.T) {
	e := mustServeWatch(t, shttp.ServerOptions{}, nil)
	e.create(t, "a")
	e.create(t, "b")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := *e.Client
	client.HTTPClient = &http.Client{Transport: tr}

	watch := func(ctx context.Context, id string, got chan<- int64) {
		for r, err := range client.Watch(ctx, id, 100*time.Millisecond) {
			if err != nil {
				t.Error(err)
				return
			}
			got <- r.Value
		}
	}
	// A first watch that ends, so that what stays (the transport's and the
	// server's idle machinery) is in the baseline.
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan int64, 1)
	go watch(ctx, "a", got)
	<-got
	cancel()
	waitFor(t, "the first watch to end", func() bool { return metricValue(t, scrape(t, e), "shardcounter_watch_streams") == 0 })
	before := runtime.NumGoroutine()

	ctx, cancel = context.WithCancel(context.Background())
	var wg sync.WaitGroup
	got = make(chan int64, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			watch(ctx, []string{"a", "b"}[i%2], got)
		}()
	}
	for range 40 {
		<-got
	}
	exp := scrape(t, e)
	if s, c := metricValue(t, exp, "shardcounter_watch_streams"), metricValue(t, exp, "shardcounter_watch_counters"); s != 40 || c != 2 {
		t.Fatalf("with 40 watchers of 2 counters: watch_streams %v, watch_counters %v", s, c)
	}
	cancel()
	wg.Wait()
	waitFor(t, "the streams and feeds to end", func() bool {
		exp := scrape(t, e)
		return metricValue(t, exp, "shardcounter_watch_streams") == 0 && metricValue(t, exp, "shardcounter_watch_counters") == 0
	})
	waitFor(t, fmt.Sprintf("the goroutines to drop back to %d", before), func() bool { return runtime.NumGoroutine() <= before })
}

// TestWatchOutlivesDeadlines: a stream outlives the server's read and
// write timeouts, the request timeout and the concurrency bound, which
// are for short requests.
func TestWatchOutlivesDeadlines(t *testing.T) {
	const short = 500 * time.Millisecond
	e := mustServeWatch(t, shttp.ServerOptions{
		RequestTimeout: short,
		MaxConcurrent:  1,
		Watch:          shttp.WatchOptions{Heartbeat: 50 * time.Millisecond},
	}, func(s *http.Server) {
		s.ReadTimeout, s.WriteTimeout = short, short
	})
	// Made on the store, not through the server, whose short deadlines
	// are the test's subject: a loaded machine may take them up creating.
	if _, err := e.Store.CreateCounter(context.Background(), "c", shardcounter.Spec{Shards: 4}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s1, _ := e.openStream(t, ctx, path("c")+"/watch?interval=100ms")
	s2, _ := e.openStream(t, ctx, path("c")+"/watch?interval=100ms")
	if s1 == nil || s2 == nil {
		t.Fatal("two watches with MaxConcurrent 1: want two streams")
	}
	s1.nextData(t)
	s2.nextData(t)
	// Heartbeats over several times every deadline.
	for range 5 * short / (50 * time.Millisecond) {
		if _, ok := s1.next(true); !ok {
			t.Fatal("stream 1 ended")
		}
	}
	e.add(t, "c", 1) // a short request still gets its slot
	for _, s := range []*stream{s1, s2} {
		if id, _ := s.nextData(t); id != "1" {
			t.Fatalf("id %s, want 1", id)
		}
	}
}

func TestWatchLimits(t *testing.T) {
	e := mustServeWatch(t, shttp.ServerOptions{Watch: shttp.WatchOptions{MaxWatchers: 1}}, nil)
	e.create(t, "c")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, _ := e.openStream(t, ctx, path("c")+"/watch")
	s.nextData(t)
	if s2, resp := e.openStream(t, ctx, path("c")+"/watch"); s2 != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("second watch over MaxWatchers 1: status %d, want 503 with Retry-After", resp.StatusCode)
	}

	t.Run("EndWatches", func(t *testing.T) {
		e.Server.EndWatches()
		if fields, ok := s.next(true); ok {
			t.Fatalf("after EndWatches: %q, want the stream to end", fields)
		}
		s2, resp := e.openStream(t, ctx, path("c")+"/watch")
		if s2 != nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("watch after EndWatches: status %d, want 503", resp.StatusCode)
		}
	})
}

// TestWatchClient: the Go client yields the first reading and each change,
// reconnects after a dropped connection without repeating what it had,
// and ends with not_found when the counter is deleted.
func TestWatchClient(t *testing.T) {
	e := mustServeWatch(t, shttp.ServerOptions{}, nil)
	e.create(t, "c")
	e.add(t, "c", 2)
	// A proxy in front of the server cuts the first watch connection
	// after its first event, and remembers each watch's Last-Event-ID.
	var mu sync.Mutex
	var lastIDs []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/watch") {
			mu.Lock()
			lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
			first := len(lastIDs) == 1
			mu.Unlock()
			if first {
				ctx, cancel := context.WithCancel(r.Context())
				defer cancel()
				r = r.WithContext(ctx)
				w = &cutAfterData{ResponseWriter: w, cancel: cancel}
			}
		}
		e.Server.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	c := shttp.NewClient(proxy.URL)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type item struct {
		v   int64
		err error
	}
	items := make(chan item)
	go func() {
		defer close(items)
		for r, err := range c.Watch(ctx, "c", 100*time.Millisecond) {
			it := item{err: err}
			if r != nil {
				it.v = r.Value
			}
			items <- it
		}
	}()
	if it := <-items; it.err != nil || it.v != 2 {
		t.Fatalf("first: %+v, want 2", it)
	}
	if it := <-items; shardcounter.ErrorCode(it.err) != shardcounter.EUNAVAILABLE {
		t.Fatalf("after the cut: %+v, want a passing unavailable error", it)
	}
	e.add(t, "c", 1)
	if it := <-items; it.err != nil || it.v != 3 {
		t.Fatalf("after reconnecting: %+v, want 3 (and not 2 again)", it)
	}
	mu.Lock()
	if len(lastIDs) != 2 || lastIDs[0] != "" || lastIDs[1] != "2" {
		t.Fatalf("Last-Event-IDs %q, want none and then 2", lastIDs)
	}
	mu.Unlock()
	if err := e.Client.DeleteCounter(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if it := <-items; !errors.Is(it.err, shardcounter.ErrNotFound) {
		t.Fatalf("after delete: %+v, want not_found", it)
	}
	if it, ok := <-items; ok {
		t.Fatalf("after not_found: %+v, want the end", it)
	}

	t.Run("Errors", func(t *testing.T) {
		for name, tc := range map[string]struct {
			client   *shttp.Client
			id       string
			interval time.Duration
			code     string
		}{
			"NotFound":    {c, "nope", 0, shardcounter.ENOTFOUND},
			"BadID":       {c, "", 0, shardcounter.EINVALID},
			"BadInterval": {c, "c", time.Millisecond, shardcounter.EINVALID},
			"NoToken":     {shttp.NewClient(mustServeWatch(t, shttp.ServerOptions{AuthTokens: []string{"t"}}, nil).URL), "c", 0, shardcounter.EUNAUTHENTICATED},
		} {
			t.Run(name, func(t *testing.T) {
				n := 0
				for r, err := range tc.client.Watch(ctx, tc.id, tc.interval) {
					n++
					if r != nil || shardcounter.ErrorCode(err) != tc.code {
						t.Fatalf("got %v, %v; want a %s error", r, err, tc.code)
					}
				}
				if n != 1 {
					t.Fatalf("%d items, want the error alone", n)
				}
			})
		}
	})
}

// cutAfterData cancels its request once a data line has been written.
type cutAfterData struct {
	http.ResponseWriter
	cancel func()
}

func (w *cutAfterData) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	if strings.Contains(string(b), "data: ") {
		w.cancel()
	}
	return n, err
}

func (w *cutAfterData) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// scrape returns the server's /metrics exposition.
func scrape(tb testing.TB, e *watchEnv) string {
	tb.Helper()
	return string(do(tb, http.MethodGet, e.URL+"/metrics", "").Body)
}

// waitFor polls cond until it holds, failing the test if it does not
// within a generous while: a condition that never holds is the failure,
// not a slow machine.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWatchMixedIntervals: a counter's watchers share one reader at the
// shortest interval among them; each is sent at most one event per its own
// interval, and the latest value once its interval has passed; when the
// fast watcher leaves, the reader slows down.
func TestWatchMixedIntervals(t *testing.T) {
	e := mustServeWatch(t, shttp.ServerOptions{}, nil)
	e.create(t, "c")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slow, _ := e.openStream(t, ctx, path("c")+"/watch?interval=1s")
	slow.nextData(t)
	fastCtx, leave := context.WithCancel(ctx)
	fast, _ := e.openStream(t, fastCtx, path("c")+"/watch?interval=100ms")
	fast.nextData(t)

	// Writes for a while, each seen by the fast watcher.
	start, reads0 := time.Now(), e.Store.reads.Load()
	const writes = 12
	for i := 1; i <= writes; i++ {
		e.add(t, "c", 1)
		if id, _ := fast.nextData(t); id != fmt.Sprint(i) {
			t.Fatalf("fast watcher: id %s, want %d", id, i)
		}
	}
	elapsed := time.Since(start)
	if reads, limit := e.Store.reads.Load()-reads0, int64(elapsed/(100*time.Millisecond))+2; reads > limit {
		t.Fatalf("two watchers: %d reads in %v, want at most %d (one per 100ms)", reads, elapsed, limit)
	}
	// The slow watcher had at most one event a second, and ends with the
	// last value.
	var ids []string
	for {
		id, _ := slow.nextData(t)
		ids = append(ids, id)
		if id == fmt.Sprint(writes) {
			break
		}
	}
	if limit := int(time.Since(start)/time.Second) + 1; len(ids) > limit {
		t.Fatalf("slow watcher got %d events (%v) in %v, want at most %d: one a second", len(ids), ids, time.Since(start), limit)
	}

	// Without the fast watcher the reader goes back to one read a second.
	leave()
	waitFor(t, "the fast watcher to leave", func() bool { return metricValue(t, scrape(t, e), "shardcounter_watch_streams") == 1 })
	time.Sleep(200 * time.Millisecond) // the read the fast interval had scheduled
	start, reads0 = time.Now(), e.Store.reads.Load()
	e.add(t, "c", 1)
	if id, _ := slow.nextData(t); id != fmt.Sprint(writes+1) {
		t.Fatalf("slow watcher: id %s, want %d", id, writes+1)
	}
	time.Sleep(time.Second)
	if reads, limit := e.Store.reads.Load()-reads0, int64(time.Since(start)/time.Second)+2; reads > limit {
		t.Fatalf("one slow watcher: %d reads in %v, want at most %d (one a second)", reads, time.Since(start), limit)
	}
}
