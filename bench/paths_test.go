package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bench"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/engine"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/internal/redistest"
)

// mustBolt opens a bolt store in the test's directory.
func mustBolt(tb testing.TB) shardcounter.CounterStore {
	tb.Helper()
	s, err := bolt.Open(context.Background(), filepath.Join(tb.TempDir(), "bench.db"), bolt.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// checkRuns fails unless every run acknowledged work, had no errors and
// was verified.
func checkRuns(t *testing.T, runs []bench.Run, want int) {
	t.Helper()
	if len(runs) != want {
		t.Fatalf("%d runs, want %d: %+v", len(runs), want, runs)
	}
	for _, r := range runs {
		if r.Ops == 0 || r.Errors != 0 || !r.Verified || r.Ops != r.Writes+r.Reads+r.Refused {
			t.Errorf("run %s = %+v, want operations, no errors, verified", r.Name, r)
		}
	}
}

// mustNoCounters fails if a benchmark left counters behind.
func mustNoCounters(t *testing.T, s shardcounter.CounterStore) {
	t.Helper()
	if cs, err := s.ListCounters(context.Background(), "bench/", "", 10); err != nil || len(cs) != 0 {
		t.Errorf("counters left behind: %v, %v", cs, err)
	}
}

func TestPathsHTTP(t *testing.T) {
	s := mustStore(t)
	runs, err := bench.Paths(context.Background(), bench.Config{
		Store: s, StoreName: "postgres", Clients: 8, Duration: 300 * time.Millisecond, Shards: []int{1, 4},
	}, bench.PathHTTP)
	if err != nil {
		t.Fatal(err)
	}
	checkRuns(t, runs, 2)
	if runs[1].Name != "postgres/http/shards=4" || runs[1].Path != "http" {
		t.Errorf("run = %+v, want postgres/http/shards=4", runs[1])
	}
	// Served in this process: the memory is the bench's, with the part
	// that maps files (at least the executable's code).
	if m := runs[0].Memory; m == nil || m.Process != "bench" || m.RSSBefore <= 0 || m.RSSAfter <= 0 ||
		m.RSSMaxFiles == nil || *m.RSSMaxFiles <= 0 || *m.RSSMaxFiles > m.RSSMax ||
		m.RSSMaxAnon == nil || *m.RSSMaxAnon <= 0 || *m.RSSMaxAnon+*m.RSSMaxFiles > m.RSSMax {
		t.Errorf("memory = %+v, want this process's RSS, its anonymous and its mapped files' parts", m)
	}
	mustNoCounters(t, s)
}

// TestPathsHTTPServer targets a running server, as --server does.
func TestPathsHTTPServer(t *testing.T) {
	s := mustBolt(t)
	eng, err := engine.New(s, engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(context.Background()) })
	srv := httptest.NewServer(shttp.NewServer(eng, shttp.ServerOptions{AuthTokens: []string{"sesame"}}))
	t.Cleanup(srv.Close)

	cfg := bench.Config{Server: srv.URL, Token: "sesame", StoreName: "server", Clients: 4, Duration: 200 * time.Millisecond, Shards: []int{2}}
	runs, err := bench.Paths(context.Background(), cfg, bench.PathHTTP)
	if err != nil {
		t.Fatal(err)
	}
	checkRuns(t, runs, 1)
	mustNoCounters(t, s)
	// The server's own memory, from its /metrics.
	if m := runs[0].Memory; m == nil || m.Process != "server" || m.RSSBefore <= 0 || m.RSSMax < m.RSSBefore || m.RSSMaxFiles != nil || m.RSSMaxAnon != nil {
		t.Errorf("memory = %+v, want the server's RSS from /metrics, which does not say what maps files", m)
	}

	cfg.Token = "wrong"
	if _, err := bench.Paths(context.Background(), cfg, bench.PathHTTP); err == nil {
		t.Error("a wrong token was accepted")
	}
}

// TestWorkloads runs many counters with a Zipf skew and a read/write mix
// with cached reads, on each path.
func TestWorkloads(t *testing.T) {
	s := mustStore(t)
	cfg := bench.Config{
		Store: s, StoreName: "postgres", Clients: 8, Duration: 400 * time.Millisecond, Shards: []int{2},
		Counters: 1000, Zipf: 1.1, ReadRatio: 0.5, ReadConsistency: shardcounter.Cached,
	}
	runs, err := bench.Paths(context.Background(), cfg, bench.PathNaive, bench.PathEngine, bench.PathHTTP)
	if err != nil {
		t.Fatal(err)
	}
	checkRuns(t, runs, 3)
	for _, r := range runs {
		if r.Reads == 0 || r.Writes == 0 || r.Counters != 1000 || r.Zipf != 1.1 || r.ReadRatio != 0.5 {
			t.Errorf("run %s = %+v, want reads and writes of 1000 counters", r.Name, r)
		}
		want := "cached"
		if r.Path == bench.PathNaive {
			want = "strong" // the store alone has no cache
		}
		if r.ReadConsistency != want {
			t.Errorf("run %s: read consistency %q, want %q", r.Name, r.ReadConsistency, want)
		}
	}
	mustNoCounters(t, s)

	for _, bad := range []bench.Config{
		{Store: s, Zipf: 0.5},
		{Store: s, ReadRatio: 1.5},
		{Store: s, ReadConsistency: "eventual"},
	} {
		if _, err := bench.Paths(context.Background(), bad, bench.PathNaive); err == nil {
			t.Errorf("Paths with %+v: no error", bad)
		}
	}
}

func TestPeers(t *testing.T) {
	always := redistest.MustStart(t, "appendonly yes", "appendfsync always")
	plain := redistest.MustStart(t)
	db := pgtest.MustDatabase(t)
	cfg := bench.Config{Clients: 4, Duration: 300 * time.Millisecond, Counters: 50, Zipf: 1.2, ReadRatio: 0.2}
	runs, err := bench.Peers(context.Background(), cfg, []bench.Peer{
		{Kind: bench.PeerRedisIncr, Target: "redis://" + always.Addr},
		{Kind: bench.PeerRedisIncr, Target: "redis://" + plain.Addr},
		{Kind: bench.PeerPostgresUpdate, Target: db},
		{Kind: bench.PeerHTTPBare},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkRuns(t, runs, 4)
	wantNames := []string{"peer/redis-incr/appendfsync=always", "peer/redis-incr/appendonly=no", "peer/postgres-update/synchronous_commit=on", "peer/http-bare"}
	for i, r := range runs {
		if r.Name != wantNames[i] || r.Path != bench.PathPeer || r.Shards != 0 || r.Reads == 0 {
			t.Errorf("run %d = %+v, want %s with reads", i, r, wantNames[i])
		}
	}
	if v := runs[0].Settings["version"]; v == "" {
		t.Errorf("redis settings %v lack the version", runs[0].Settings)
	}
	if v := runs[2].Settings["fsync"]; v == "" {
		t.Errorf("postgres settings %v lack fsync", runs[2].Settings)
	}
	// Peers clean up: no keys left on Redis.
	if n, err := plain.Do("DBSIZE"); err != nil || n != ":0" {
		t.Errorf("DBSIZE after the peer = %q, %v, want :0", n, err)
	}
	if _, err := bench.Peers(context.Background(), cfg, []bench.Peer{{Kind: "memcached-incr"}}); err == nil {
		t.Error("an unknown peer was accepted")
	}
}

func TestWriteRatios(t *testing.T) {
	runs := []bench.Run{
		{Name: "postgres/engine/shards=1", Path: "engine", Shards: 1, OpsPerSec: 2000},
		{Name: "peer/redis-incr/appendfsync=always", Path: "peer", OpsPerSec: 1000},
		{Name: "peer/http-bare", Path: "peer", OpsPerSec: 4000},
	}
	var buf bytes.Buffer
	if err := bench.WriteRatios(&buf, runs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	last := strings.Fields(lines[len(lines)-1])
	if got, want := strings.Join(last, " "), "postgres/engine/shards=1 2000 2.00× 0.50×"; got != want {
		t.Errorf("ratio line = %q, want %q\n%s", got, want, buf.String())
	}
	buf.Reset()
	if err := bench.WriteRatios(&buf, runs[:1]); err != nil || buf.Len() != 0 {
		t.Errorf("ratios without peers = %q, %v, want nothing", buf.String(), err)
	}
	buf.Reset()
	if err := bench.WriteMarkdown(&buf, runs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "| postgres/engine/shards=1 | 2,000 | 2.00× | 0.50× |") {
		t.Errorf("markdown lacks the ratio row:\n%s", buf.String())
	}
}

func TestWriteSVG(t *testing.T) {
	runs := []bench.Run{
		{Name: "postgres/naive/shards=1", Store: "postgres", Path: "naive", Shards: 1, OpsPerSec: 900},
		{Name: "postgres/naive/shards=64", Store: "postgres", Path: "naive", Shards: 64, OpsPerSec: 7000},
		{Name: "postgres/engine/shards=1", Store: "postgres", Path: "engine", Shards: 1, OpsPerSec: 15000},
		{Name: "postgres/engine/shards=64", Store: "postgres", Path: "engine", Shards: 64, OpsPerSec: 14000},
		{Name: "peer/redis-incr/appendfsync=always", Path: "peer", OpsPerSec: 20000},
	}
	var buf bytes.Buffer
	if err := bench.WriteSVG(&buf, "one hot counter", runs); err != nil {
		t.Fatal(err)
	}
	svg := mustSVG(t, buf.Bytes())
	for _, text := range []string{"one hot counter", "postgres naive", "postgres engine", "redis-incr/appendfsync=always: 20,000/s", "shards per counter", "throughput (operations/s)", "64"} {
		if !strings.Contains(svg, text) {
			t.Errorf("chart has no text %q", text)
		}
	}
	// A point per run and per series in the legend; one dashed line per
	// peer and its legend entry.
	if n := strings.Count(buf.String(), "<circle"); n != 4+2 {
		t.Errorf("chart has %d points, want 4 runs and 2 legend entries", n)
	}
	if n := strings.Count(buf.String(), "stroke-dasharray"); n != 2 {
		t.Errorf("chart has %d dashed lines, want the peer and its legend entry", n)
	}
	if err := bench.WriteSVG(io.Discard, "nothing", nil); err == nil {
		t.Error("a chart of no runs was drawn")
	}
}

// mustSVG checks that b is well-formed XML whose root is an svg element,
// and returns the text of its text elements.
func mustSVG(t *testing.T, b []byte) string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	var texts strings.Builder
	root := ""
	inText := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = e.Name.Local
			}
			inText = e.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts.Write(e)
				texts.WriteByte('\n')
			}
		case xml.EndElement:
			inText = false
		}
	}
	if root != "svg" {
		t.Fatalf("chart's root element is %q, want svg", root)
	}
	return texts.String()
}

func TestReportMachine(t *testing.T) {
	var buf bytes.Buffer
	if err := bench.NewReport(nil).WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Machine bench.Machine `json:"machine"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Machine.CPUs < 1 || got.Machine.OS == "" || got.Machine.MemoryBytes <= 0 {
		t.Errorf("machine = %+v, want CPUs, OS and memory", got.Machine)
	}
}
