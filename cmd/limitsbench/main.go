// Command limitsbench measures what hostile clients can make a running
// `shardcounter serve` hold, for docs/OPERATIONS.md: the resident memory
// (VmRSS, VmHWM from /proc) of the server process while many
// unauthenticated RESP connections send half frames, and while many
// clients send 1 MiB HTTP bodies at once, and how long the server takes
// to close or answer them. It starts the binary it is given in a
// temporary directory, with serve's default store there (or -store), with
// a token file.
//
//	go build -o /tmp/shardcounter ./cmd/shardcounter
//	go run ./cmd/limitsbench -bin /tmp/shardcounter [-resp 1000] [-http 1000] [-shape request_id] [-settle 60s]
//
// Each -shape is a 1 MiB body whose decoded form differs: spaces (an
// increment padded with white space: bytes, decoded to nothing), and one
// JSON string of 1 MiB as a request_id (an increment), a member (a batch
// write to a distinct counter) or a document field (a document of a
// collection); an answer other than the body budget's 503 is a body its
// handler decoded.
//
// Linux only (it reads /proc/PID/status). Its figures depend on the
// machine; they are measurements, not tests.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shardcounter/shardcounter/internal/testbin"
)

func main() {
	bin := flag.String("bin", "", "the shardcounter binary to measure")
	respConns := flag.Int("resp", 1000, "unauthenticated RESP connections, each sending a half frame (0: skip)")
	attack := flag.String("frame", "half", "what each RESP connection sends: half (a frame within the limits before AUTH, never finished) or big (an array of 4,000 arguments announced, then bulks of 64 KiB, up to 1 MiB, sent as fast as the server takes them)")
	httpBodies := flag.Int("http", 1000, "concurrent 1 MiB HTTP bodies (0: skip)")
	shapes := flag.String("shape", "spaces", "what each 1 MiB body is, comma-separated for one server each: "+strings.Join(shapeNames(), ", "))
	store := flag.String("store", "", "serve's --store (default: serve's own default, in the temporary directory)")
	settle := flag.Duration("settle", time.Minute, "how long to watch the server's memory after the HTTP bodies")
	extra := flag.String("args", "", "more flags for serve, space-separated")
	flag.Parse()
	if *bin == "" {
		log.Fatal("give -bin: the shardcounter binary to measure")
	}
	if *respConns > 0 {
		s := startServer(*bin, *store, strings.Fields(*extra))
		measureRESP(s, *respConns, *attack)
		s.stop()
	}
	for _, name := range strings.Split(*shapes, ",") {
		if *httpBodies == 0 {
			break
		}
		sh, ok := bodyShapes[name]
		if !ok {
			log.Fatalf("unknown -shape %q: the shapes are %s", name, strings.Join(shapeNames(), ", "))
		}
		s := startServer(*bin, *store, strings.Fields(*extra))
		measureHTTP(s, name, sh, *httpBodies, *settle)
		s.stop()
	}
}

const token = "limitsbench-token"

type server struct {
	*testbin.Server
	url, resp string
	dir       string
}

func startServer(bin, store string, extra []string) *server {
	dir, err := os.MkdirTemp("", "limitsbench")
	if err != nil {
		log.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte(token+"\n"), 0o600)
	args := []string{"--listen", "127.0.0.1:0", "--resp-listen", "127.0.0.1:0", "--auth-token-file", tokens}
	if store != "" {
		args = append(args, "--store", store)
	}
	ts, err := testbin.Start(bin, dir, 30*time.Second, append(args, extra...)...)
	if err != nil {
		log.Fatal(err)
	}
	time.Sleep(time.Second) // let it settle before the baseline
	return &server{Server: ts, url: ts.URL, resp: ts.RESP, dir: dir}
}

func (s *server) stop() {
	var errors []string
	for _, l := range strings.Split(s.Logs.String(), "\n") {
		if strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN") {
			errors = append(errors, l)
		}
	}
	if len(errors) > 0 {
		fmt.Printf("  the server logged %d warnings or errors; the first:\n    %s\n", len(errors), strings.Join(errors[:min(len(errors), 5)], "\n    "))
	}
	s.Kill()
	os.RemoveAll(s.dir)
}

// mem returns the server's resident set now and its peak, in MiB.
func (s *server) mem() (rss, hwm float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.Cmd.Process.Pid))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			hwm = kb / 1024
		}
	}
	return rss, hwm
}

func measureRESP(s *server, n int, frame string) {
	base, _ := s.mem()
	fmt.Printf("RESP: %d unauthenticated connections, frame %q; server RSS before: %.1f MiB\n", n, frame, base)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var closedAfter []time.Duration
	var failed int
	var replies = map[string]int{}
	start := time.Now()
	sent := make(chan struct{}, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", s.resp)
			if err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
				sent <- struct{}{}
				return
			}
			defer nc.Close()
			t0 := time.Now()
			switch frame {
			case "big":
				nc.Write([]byte("*4000\r\n"))
				chunk := []byte("$65536\r\n" + strings.Repeat("x", 65536) + "\r\n")
				for i := 0; i < 16; i++ {
					nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
					if _, err := nc.Write(chunk); err != nil {
						break
					}
				}
			default:
				nc.Write([]byte("*2\r\n$4\r\nAUTH\r\n$4000\r\n" + strings.Repeat("x", 3900)))
			}
			sent <- struct{}{}
			nc.SetReadDeadline(time.Now().Add(5 * time.Minute))
			line, _ := bufio.NewReader(nc).ReadString('\n')
			_, err = io.Copy(io.Discard, nc)
			mu.Lock()
			closedAfter = append(closedAfter, time.Since(t0))
			key := strings.TrimSpace(line)
			if i := strings.Index(key, ":"); i > 0 && strings.HasPrefix(key, "-ERR Protocol error") {
				key = key[:min(len(key), 60)]
			}
			replies[key]++
			mu.Unlock()
		}()
	}
	for range n {
		<-sent
	}
	time.Sleep(500 * time.Millisecond)
	held, hwm := s.mem()
	fmt.Printf("  all sent after %v: RSS %.1f MiB (+%.1f), peak %.1f MiB (+%.1f)\n", time.Since(start).Round(time.Millisecond), held, held-base, hwm, hwm-base)
	wg.Wait()
	sort.Slice(closedAfter, func(i, j int) bool { return closedAfter[i] < closedAfter[j] })
	after, hwm := s.mem()
	fmt.Printf("  closed by the server: %d of %d (dial failures %d); time from the frame to the close: median %v, max %v\n",
		len(closedAfter), n, failed, closedAfter[len(closedAfter)/2].Round(time.Millisecond), closedAfter[len(closedAfter)-1].Round(time.Millisecond))
	for k, v := range replies {
		fmt.Printf("  reply %q: %d\n", k, v)
	}
	fmt.Printf("  after: RSS %.1f MiB, peak over the run %.1f MiB (+%.1f over the start)\n", after, hwm, hwm-base)
}

// bodyShape is a request whose body is 1 MiB: setup prepares what it
// writes to, if anything.
type bodyShape struct {
	method, path string
	setup        [][3]string // method, path and body of requests made first
	body         func(pad string) string
}

// mib1 is the size of every body, give or take the JSON around the pad.
const mib1 = 1 << 20

var bodyShapes = map[string]bodyShape{
	"spaces": {method: "POST", path: "/v1/counters/c/increment",
		body: func(string) string { return `{"by":1}` + strings.Repeat(" ", mib1-8) }},
	"request_id": {method: "POST", path: "/v1/counters/c/increment",
		body: func(pad string) string { return `{"by":1,"request_id":"` + pad + `"}` }},
	"member": {method: "POST", path: "/v1/writes",
		setup: [][3]string{{"PUT", "/v1/counters/d", `{"kind":"distinct"}`}},
		body:  func(pad string) string { return `{"writes":[{"counter":"d","member":"` + pad + `"}]}` }},
	"numbers": {method: "POST", path: "/v1/collections/docs/documents",
		setup: [][3]string{{"PUT", "/v1/collections/docs", ""}},
		body:  func(pad string) string { return `{"data":{"n":[` + strings.Repeat("0,", len(pad)/2) + `0]}}` }},
	"nested": {method: "POST", path: "/v1/collections/docs/documents",
		setup: [][3]string{{"PUT", "/v1/collections/docs", ""}},
		body: func(pad string) string {
			nest := strings.Repeat("[", 9990) + strings.Repeat("]", 9990)
			return `{"data":{"n":[` + strings.Repeat(nest+",", len(pad)/len(nest)-1) + nest + `]}}`
		}},
	"field": {method: "POST", path: "/v1/collections/docs/documents",
		setup: [][3]string{{"PUT", "/v1/collections/docs", ""}},
		body:  func(pad string) string { return `{"data":{"note":"` + pad + `"}}` }},
}

func shapeNames() []string {
	var names []string
	for n := range bodyShapes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// messageRE finds the start of an error's message in the API's error body.
var messageRE = regexp.MustCompile(`"message":"([^"]*)`)

func measureHTTP(s *server, name string, shape bodyShape, n int, settle time.Duration) {
	base, _ := s.mem()
	fmt.Printf("HTTP: %d concurrent 1 MiB bodies, shape %s; server RSS before: %.1f MiB\n", n, name, base)
	body := []byte(shape.body(strings.Repeat("x", mib1-64)))
	tr := &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: n, DisableKeepAlives: true}
	client := &http.Client{Transport: tr, Timeout: 5 * time.Minute}
	var peak float64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if r, _ := s.mem(); r > peak {
					peak = r
				}
			}
		}
	}()
	for _, r := range shape.setup {
		req, _ := http.NewRequest(r[0], s.url+r[1], strings.NewReader(r[2]))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			log.Fatalf("%s %s: %s", r[0], r[1], resp.Status)
		}
	}
	var mu sync.Mutex
	statuses := map[string]int{}
	var wg sync.WaitGroup
	begin := make(chan struct{})
	start := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			req, _ := http.NewRequest(shape.method, s.url+shape.path, bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			key := ""
			if err != nil {
				key = "error: " + err.Error()
				if len(key) > 80 {
					key = key[:80]
				}
			} else {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				key = strconv.Itoa(resp.StatusCode)
				if m := messageRE.FindSubmatch(b); m != nil && resp.StatusCode >= 300 {
					key += " " + string(m[1][:min(len(m[1]), 40)])
				}
			}
			mu.Lock()
			statuses[key]++
			mu.Unlock()
		}()
	}
	close(begin)
	wg.Wait()
	took := time.Since(start)
	close(stop)
	sampler.Wait()
	_, hwm := s.mem()
	decoded := 0
	for k, v := range statuses {
		if !strings.HasPrefix(k, "503 the server holds its limit") && !strings.HasPrefix(k, "error") {
			decoded += v
		}
	}
	fmt.Printf("  all answered after %v: %v; decoded by their handler (not refused by the body budget): %d\n", took.Round(time.Millisecond), statuses, decoded)
	fmt.Printf("  peak RSS %.1f MiB (VmHWM; sampled %.1f MiB), %.1f over the start\n", hwm, peak, hwm-base)
	done := time.Now()
	for _, at := range []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, settle} {
		if at > settle {
			break
		}
		time.Sleep(time.Until(done.Add(at)))
		r, _ := s.mem()
		fmt.Printf("  RSS %v after the last reply: %.1f MiB\n", at, r)
	}
	resp, err := client.Get(s.url + "/metrics")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "shardcounter_http_body") {
				fmt.Println("  " + l)
			}
		}
	}
}
