package hostile_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/internal/redistest"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// slowBody sends the headers of a POST with a body of size bytes and the
// first part bytes of it, and leaves the connection open.
func (s *server) slowBody(tb testing.TB, size, part int) net.Conn {
	tb.Helper()
	nc, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close() })
	head := fmt.Sprintf("POST /v1/counters/c/increment HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n{", token, size)
	if _, err := nc.Write([]byte(head + strings.Repeat(" ", part-1))); err != nil {
		tb.Fatal(err)
	}
	return nc
}

// Test5BodiesInFlight: --max-body bounded one request, but 1,000
// concurrent 1 MiB bodies took a process past 1 GiB. --max-body-total
// bounds the bytes of bodies held at once: past it a request is refused
// with 503 and Retry-After before its body is read, and once the bodies
// are gone requests are served again; every request of a burst is
// answered 200, 413 or 503.
func Test5BodiesInFlight(t *testing.T) {
	s := start(t, "--max-body-total", "3145728") // three bodies of the 1 MiB --max-body
	var held []net.Conn
	for range 3 {
		held = append(held, s.slowBody(t, 1<<20, 600<<10))
	}
	// The held bodies take their bytes as they arrive: wait until all
	// three hold theirs, or a fourth sent meanwhile could take the room
	// one of them still needs (and that one, not the fourth, is refused).
	const held3 = "shardcounter_http_body_bytes_in_flight 3.145728e+06"
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(s.do(t, "GET", "/metrics", "").Body, held3) {
		if time.Now().After(deadline) {
			t.Fatalf("the three held bodies never held 3 MiB:\n%s", grep(s.do(t, "GET", "/metrics", "").Body, "body_"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	body := `{"by":1}` + strings.Repeat(" ", (1<<20)-8)
	r := s.do(t, "POST", "/v1/counters/c/increment", body)
	if r.Status != 503 {
		t.Fatalf("with three 1 MiB bodies held, a fourth was answered %d: %s", r.Status, r.Body)
	}
	if r.Header.Get("Retry-After") == "" || !strings.Contains(r.Body, "--max-body-total") {
		t.Fatalf("503 without Retry-After or the flag's name: %v %s", r.Header, r.Body)
	}
	metrics := s.do(t, "GET", "/metrics", "").must(t, 200).Body
	if !strings.Contains(metrics, held3) {
		t.Errorf("/metrics does not show the 3 MiB held:\n%s", grep(metrics, "body_"))
	}
	for _, nc := range held {
		nc.Close()
	}
	deadline = time.Now().Add(20 * time.Second)
	for s.do(t, "POST", "/v1/counters/c/increment", body).Status != 200 {
		if time.Now().After(deadline) {
			t.Fatal("bodies are still refused after the held ones closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A burst of 40 concurrent 1 MiB bodies: every one answered.
	var wg sync.WaitGroup
	statuses := make(chan int, 40)
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses <- s.do(t, "POST", "/v1/counters/c/increment", body).Status
		}()
	}
	wg.Wait()
	close(statuses)
	ok := 0
	for st := range statuses {
		switch st {
		case 200:
			ok++
		case 413, 503:
		default:
			t.Errorf("a body of the burst was answered %d", st)
		}
	}
	r = s.do(t, "GET", "/v1/counters/c", "").must(t, 200)
	if want := fmt.Sprintf(`"value":%d`, ok+1); !strings.Contains(r.Body, want) {
		t.Fatalf("value %s, want %s: one per 200", r.Body, want)
	}
}

// grep returns the lines of s holding sub.
func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Test6OutOfRangeOnTotals: out_of_range was judged per shard, so a
// 2-shard counter holding +MaxInt64 on one shard and -MaxInt64 on the
// other (total 0) refused the +1 and -1 writes that landed on the full
// shard. On every store, such writes apply, one at a time and
// concurrently, and the total stays exact.
func Test6OutOfRangeOnTotals(t *testing.T) {
	for _, st := range []struct {
		name  string
		store func(t *testing.T) string
	}{
		{"Bolt", func(t *testing.T) string { return "" }},
		{"Postgres", func(t *testing.T) string { return pgtest.MustDatabase(t) }},
		{"Redis", func(t *testing.T) string { return "redis://" + redistest.MustStart(t).Addr }},
	} {
		t.Run(st.name, func(t *testing.T) {
			var args []string
			if dsn := st.store(t); dsn != "" {
				args = []string{"--store", dsn}
			}
			testTotals(t, start(t, args...))
		})
	}
}

func testTotals(t *testing.T, s *server) {
	s.do(t, "PUT", "/v1/counters/c", `{"shards":2}`).must(t, 201)
	// Request ids choose the shard (shard.PickFor), so the two extremes
	// land one on each shard.
	ids := make([][]string, 2)
	for i := 0; len(ids[0]) < 4 || len(ids[1]) < 4; i++ {
		rid := fmt.Sprintf("r%d", i)
		sh := shard.Of(shard.PickFor("c", rid), 2)
		ids[sh] = append(ids[sh], rid)
	}
	write := func(delta int64, rid string) reply {
		return s.do(t, "POST", "/v1/writes", fmt.Sprintf(`{"writes":[{"counter":"c","delta":%d,"request_id":%q}]}`, delta, rid))
	}
	write(math.MaxInt64, ids[0][0]).must(t, 200, `"applied":true`)
	write(-math.MaxInt64, ids[1][0]).must(t, 200, `"applied":true`)
	var placement struct {
		Placement []struct{ Value int64 } `json:"placement"`
	}
	json.Unmarshal([]byte(s.do(t, "GET", "/v1/counters/c/shards", "").must(t, 200).Body), &placement)
	if len(placement.Placement) != 2 || placement.Placement[0].Value != math.MaxInt64 || placement.Placement[1].Value != -math.MaxInt64 {
		t.Fatalf("shards %+v, want [MaxInt64, -MaxInt64]", placement)
	}
	want := int64(0)
	// Onto the full shards themselves: +1 on the MaxInt64 shard, -1 twice
	// on the -MaxInt64 one (the second past MinInt64 there).
	for _, w := range []struct {
		delta int64
		rid   string
	}{{1, ids[0][1]}, {-1, ids[1][1]}, {-1, ids[1][2]}, {-1, ids[1][3]}, {1, ids[0][2]}} {
		write(w.delta, w.rid).must(t, 200, `"applied":true`)
		want += w.delta
	}
	// And 40 writes on random shards, from 4 clients at once.
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 2))
			for range 10 {
				d, path := int64(1), "/v1/counters/c/increment"
				if r.IntN(2) == 0 {
					d, path = -1, "/v1/counters/c/decrement"
				}
				if rep := s.do(t, "POST", path, ""); rep.Status != 200 {
					t.Errorf("%+d: %d %s", d, rep.Status, rep.Body)
					return
				}
				mu.Lock()
				want += d
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	s.do(t, "GET", "/v1/counters/c", "").must(t, 200, fmt.Sprintf(`"value":%d,`, want))
	// At the edge of the total, a write is still refused.
	s.do(t, "PUT", "/v1/counters/edge", `{"shards":2}`).must(t, 201)
	s.do(t, "POST", "/v1/writes", fmt.Sprintf(`{"writes":[{"counter":"edge","delta":%d}]}`, int64(math.MaxInt64))).must(t, 200)
	s.do(t, "POST", "/v1/counters/edge/increment", "").must(t, 400, "out_of_range")
}

// Test7AuthHammering: failed authentications were neither slowed nor
// counted (and the comparison returned early on a length mismatch, which
// digests of one length now rule out; see internal/authtoken). After a
// burst of 100 failures from one address each further HTTP one is
// answered 429 resource_exhausted with Retry-After, and each RESP
// -WRONGPASS comes after at least 100 ms; the right token still works at
// once from that address; /metrics counts them, and the log says so once.
func Test7AuthHammering(t *testing.T) {
	s := start(t)
	// The allowance comes back one failure per 100 ms, so a client slower
	// than that (this one, on a loaded machine) gets a few more 401s
	// before its first 429: at most one per 100 ms it took.
	begin, n := time.Now(), 0
	for ; ; n++ {
		r := s.do(t, "GET", "/v1/counters", "", "Authorization", fmt.Sprintf("Bearer wrong-%d", n))
		if r.Status == 429 {
			break
		}
		r.must(t, 401, "unauthenticated")
	}
	if most := 100 + int(time.Since(begin)/(100*time.Millisecond)) + 1; n < 100 || n > most {
		t.Fatalf("%d failures answered 401 before the first 429, want 100 to %d", n, most)
	}
	for range 3 {
		r := s.do(t, "GET", "/v1/counters", "", "Authorization", "Bearer wrong").must(t, 429, "resource_exhausted")
		if r.Header.Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
	}
	s.do(t, "GET", "/v1/counters", "").must(t, 200)
	c := s.dialRESP(t)
	for range 2 {
		begin := time.Now()
		c.send("AUTH wrong\r\n")
		if got := c.line(); !strings.HasPrefix(got, "-WRONGPASS") {
			t.Fatalf("AUTH wrong: %q", got)
		}
		if took := time.Since(begin); took < 100*time.Millisecond {
			t.Fatalf("-WRONGPASS past the burst came after %v, want at least 100ms", took)
		}
	}
	c.send("AUTH " + token + "\r\nPING\r\n")
	if got := c.line() + c.line(); got != "+OK+PONG" {
		t.Fatalf("the right token: %q", got)
	}
	metrics := s.do(t, "GET", "/metrics", "").must(t, 200).Body
	for _, want := range []string{
		fmt.Sprintf(`shardcounter_auth_failures_total{protocol="http"} %d`, n+4), `shardcounter_auth_throttled_total{protocol="http"} 4`,
		`shardcounter_auth_failures_total{protocol="resp"} 2`, `shardcounter_auth_throttled_total{protocol="resp"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grep(metrics, "auth_"))
		}
	}
	if n := strings.Count(s.Logs(), "slowing this address down"); n != 1 {
		t.Errorf("the burst was logged %d times, want once:\n%s", n, s.Logs())
	}
}

// Test8SmallerPoints: a page token edited by hand was accepted; a body
// sent with Content-Encoding: gzip was read as if plain; a failed read
// answered "nothing was applied".
func Test8SmallerPoints(t *testing.T) {
	rs := redistest.MustStart(t)
	s := start(t, "--store", "redis://"+rs.Addr)
	for _, id := range []string{"a1", "a2", "a3"} {
		s.do(t, "PUT", "/v1/counters/"+id, `{}`).must(t, 201)
	}
	var page struct {
		Next string `json:"next_page_token"`
	}
	json.Unmarshal([]byte(s.do(t, "GET", "/v1/counters?prefix=a&limit=1", "").must(t, 200).Body), &page)
	raw, err := base64.RawURLEncoding.DecodeString(page.Next)
	if err != nil || !bytes.Contains(raw, []byte("a1")) {
		t.Fatalf("page token %q (%v): want one that continues after a1", page.Next, err)
	}
	edited := base64.RawURLEncoding.EncodeToString(bytes.Replace(raw, []byte("a1"), []byte("a2"), 1))
	s.do(t, "GET", "/v1/counters?prefix=a&limit=1&page_token="+url.QueryEscape(edited), "").must(t, 400, "invalid_argument", "page_token")

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"by":5}`))
	zw.Close()
	s.do(t, "POST", "/v1/counters/a1/increment", gz.String(), "Content-Encoding", "gzip").must(t, 415, "Content-Encoding")
	s.do(t, "POST", "/v1/counters/a1/increment", `{"by":5}`, "Content-Encoding", "gzip").must(t, 415)
	s.do(t, "GET", "/v1/counters/a1", "").must(t, 200, `"value":0`)

	rs.Stop()
	r := s.do(t, "GET", "/v1/counters/a1", "").must(t, 503, "unavailable")
	if strings.Contains(r.Body, "applied") {
		t.Fatalf("a failed read says %s", r.Body)
	}
	r = s.do(t, "POST", "/v1/reads", `{"counters":["a1","a2"]}`)
	if r.Status != 503 || strings.Contains(r.Body, "applied") {
		t.Fatalf("a failed batch read: %d %s", r.Status, r.Body)
	}
}

// Test9BodyShapes: --max-body-total counted a body's bytes, not what
// decoding made of them: 1,000 concurrent 1 MiB bodies, each one JSON
// string, took a server from 45 to 641 MiB, and a 1 MiB array of small
// values decodes to some 10 MiB. Now what a body holds decoded comes from
// the budget too: a body whose decoded form cannot fit the budget at all
// is refused 413, one that finds no room now 503, and a body nested more
// than 32 deep 400, each before it is decoded.
func Test9BodyShapes(t *testing.T) {
	// Room for one 1 MiB body of white space, not for one 1 MiB string
	// (its bytes and their decoded copy).
	s := start(t, "--max-body-total", "1600000")
	mib := 1 << 20
	s.do(t, "POST", "/v1/counters/c/increment", `{"by":1}`+strings.Repeat(" ", mib-8)).must(t, 200)
	s.do(t, "POST", "/v1/counters/c/increment", `{"by":1,"request_id":"`+strings.Repeat("x", mib-32)+`"}`).
		must(t, 413, "payload_too_large", "once decoded", "--max-body-total")
	s.do(t, "POST", "/v1/counters/c/increment", `{"by":1,"request_id":"`+strings.Repeat("x", 600<<10)+`"}`).
		must(t, 400, "request id is 614400 bytes long")

	// Many small values: a 100 KB array of zeros decodes to some 1 MB of
	// interface values, over the budget with its bytes; 10 KB of them fit.
	s.do(t, "PUT", "/v1/collections/docs", "").must(t, 201)
	zeros := func(n int) string { return `{"data":{"n":[` + strings.Repeat("0,", n) + `0]}}` }
	s.do(t, "POST", "/v1/collections/docs/documents", zeros(50_000)).must(t, 413, "once decoded")
	s.do(t, "POST", "/v1/collections/docs/documents", zeros(5_000)).must(t, 201)

	// Nesting: 32 levels in all are taken, 33 refused.
	nested := func(depth int) string {
		return `{"data":{"n":` + strings.Repeat("[", depth-2) + "1" + strings.Repeat("]", depth-2) + `}}`
	}
	s.do(t, "POST", "/v1/collections/docs/documents", nested(32)).must(t, 201)
	s.do(t, "POST", "/v1/collections/docs/documents", nested(33)).must(t, 400, "more than 32 deep")

	// A burst of 20 bodies of 600 KB strings, two of which fit at once:
	// each one is answered, decoded (400) or refused for room (503 with
	// Retry-After), at least one decoded, and the budget is all given
	// back after.
	var wg sync.WaitGroup
	replies := make(chan reply, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies <- s.do(t, "POST", "/v1/counters/c/increment", `{"by":1,"request_id":"`+strings.Repeat("x", 600<<10)+`"}`)
		}()
	}
	wg.Wait()
	close(replies)
	decoded := 0
	for r := range replies {
		switch {
		case r.Status == 400 && strings.Contains(r.Body, "request id is 614400 bytes long"):
			decoded++
		case r.Status == 503 && r.Header.Get("Retry-After") != "" && strings.Contains(r.Body, "--max-body-total"):
		default:
			t.Errorf("a body of the burst was answered %d: %.200s", r.Status, r.Body)
		}
	}
	if decoded == 0 {
		t.Error("no body of the burst was decoded")
	}
	// A handler gives its bytes back just after its reply is sent.
	deadline := time.Now().Add(10 * time.Second)
	for m := s.do(t, "GET", "/metrics", "").Body; !strings.Contains(m, "shardcounter_http_body_bytes_in_flight 0\n"); m = s.do(t, "GET", "/metrics", "").Body {
		if time.Now().After(deadline) {
			t.Fatalf("after the burst the budget is not all given back:\n%s", grep(m, "body_"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
