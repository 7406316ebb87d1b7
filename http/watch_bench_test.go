//go:build linux

package http_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/engine"
	shttp "github.com/shardcounter/shardcounter/http"
)

// The watch benchmark's clients run in a process of their own (this test
// binary, started again with watchClientsEnv set), so that the server's
// memory and CPU are measured alone.
const watchClientsEnv = "SHARDCOUNTER_WATCH_BENCH_CLIENTS"

func init() {
	if spec := os.Getenv(watchClientsEnv); spec != "" {
		os.Exit(runWatchClients(spec))
	}
}

// BenchmarkWatchers measures N watchers of one hot counter on one server:
// the server's CPU and memory next to the same hot counter with no
// watcher, measured in the same run, and the store reads the watchers
// cost. Each iteration is one window of -watch-window. Run it with
//
//	go test -run '^$' -bench BenchmarkWatchers -benchtime 1x ./http/
//
// Metrics: store-reads/interval (the claim: at most 1), cpu-cores (server
// CPU seconds per second), idle-cpu-cores (the same without watchers),
// events/s received by the clients, KB/watcher (the server's resident
// memory, and its Go heap and stacks, over the watcherless baseline),
// writes/s to the hot counter with and without the watchers.
//
// The peer, pollers=1000, is what watching replaces: each client reads the
// counter (GET, strong) once per interval on a kept-alive connection, as
// fresh as a watcher and with the same clients' process.
func BenchmarkWatchers(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) { benchWatchers(b, "watch", n) })
	}
	b.Run("pollers=1000", func(b *testing.B) { benchWatchers(b, "poll", 1000) })
}

const (
	benchInterval = time.Second
	benchWindow   = 10 * time.Second
	benchWriters  = 64
	// benchWriteRate is the hot counter's writes per second: steady, and
	// well within what the engine takes on bolt on a shared machine.
	benchWriteRate = 1000
)

// benchWatchers runs one case of BenchmarkWatchers: n clients in mode
// "watch" or "poll" against a server whose hot counter is written at a
// steady rate, each iteration one window measured against a window with
// no clients.
func benchWatchers(b *testing.B, mode string, n int) {
	wb := startWatchBench(b, n)
	wb.writeHot(b)
	noEvents := func() int64 { return 0 }
	idle := measureServer(benchWindow, &wb.writes, &wb.store.reads, noEvents)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		wb.measureClients(b, mode, n, idle)
	}
}

// watchBench is the server side of BenchmarkWatchers: a server over the
// engine over a bolt store whose reads are counted, with the counter
// "hot" created. All of it stops when the benchmark run ends.
type watchBench struct {
	store  *countingStore
	eng    *engine.Engine
	addr   net.Addr
	writes atomic.Int64 // to the hot counter
}

// startWatchBench starts the server, taking up to n watchers.
func startWatchBench(b *testing.B, n int) *watchBench {
	st, err := bolt.Open(context.Background(), filepath.Join(b.TempDir(), "shardcounter.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	store := &countingStore{CounterStore: st}
	eng, err := engine.New(store, engine.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close(context.Background()) })
	srv := shttp.NewServer(eng, shttp.ServerOptions{Watch: shttp.WatchOptions{MaxWatchers: n}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: srv}
	go hs.Serve(ln)
	b.Cleanup(func() { hs.Close() })
	b.Cleanup(srv.EndWatches)
	if _, _, err := eng.CreateCounter(context.Background(), "hot", shardcounter.CreateOptions{Shards: 16}); err != nil {
		b.Fatal(err)
	}
	return &watchBench{store: store, eng: eng, addr: ln.Addr()}
}

// writeHot writes to the hot counter through the engine at a steady rate
// until the benchmark run ends, so that the windows with and without
// clients do the same write work and differ by the clients alone.
func (wb *watchBench) writeHot(b *testing.B) {
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range benchWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(benchWriters * time.Second / benchWriteRate)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := wb.eng.WriteCounter(ctx, shardcounter.Write{Counter: "hot", Delta: 1}); err != nil {
					b.Error(err)
					return
				}
				wb.writes.Add(1)
			}
		}()
	}
	b.Cleanup(func() { close(stop); wg.Wait() })
}

// measureClients is one iteration: it starts the clients' process with n
// clients, measures the server over a window while they watch or poll,
// ends them, and reports the window next to idle, the window without
// them. Only the window is timed.
func (wb *watchBench) measureClients(b *testing.B, mode string, n int, idle serverUse) {
	clients := exec.Command(os.Args[0], "-test.run=^$")
	url := fmt.Sprintf("http://%s/v1/counters/hot/watch?interval=%v", wb.addr, benchInterval)
	if mode == "poll" {
		url = fmt.Sprintf("http://%s/v1/counters/hot", wb.addr)
	}
	clients.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s,%d", watchClientsEnv, mode, url, n))
	clients.Stderr = os.Stderr
	out, err := clients.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	connectStart := time.Now()
	if err := clients.Start(); err != nil {
		b.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "ready" {
		b.Fatalf("clients: %q, want ready", lines.Text())
	}
	connected := time.Since(connectStart)
	// The clients' count of events so far, asked for with SIGUSR1.
	events := func() int64 {
		clients.Process.Signal(syscall.SIGUSR1)
		if !lines.Scan() {
			b.Fatal("the clients ended")
		}
		v, _ := strconv.ParseInt(strings.TrimPrefix(lines.Text(), "events "), 10, 64)
		return v
	}
	b.StartTimer()
	busy := measureServer(benchWindow, &wb.writes, &wb.store.reads, events)
	b.StopTimer()
	clients.Process.Kill()
	clients.Wait()
	reportWatchers(b, mode, n, connected, busy, idle)
}

// reportWatchers reports a window with clients (busy) next to one without
// (idle) as the benchmark's metrics, and logs them in a sentence.
func reportWatchers(b *testing.B, mode string, n int, connected time.Duration, busy, idle serverUse) {
	b.ReportMetric(busy.readsPerSec*benchInterval.Seconds(), "store-reads/interval")
	b.ReportMetric(busy.cores, "cpu-cores")
	b.ReportMetric(idle.cores, "idle-cpu-cores")
	b.ReportMetric(busy.eventsPerSec, "events/s")
	b.ReportMetric(float64(busy.rss-idle.rss)/float64(n)/1024, "rss-KB/watcher")
	b.ReportMetric(float64(busy.goMem-idle.goMem)/float64(n)/1024, "go-KB/watcher")
	b.ReportMetric(busy.writesPerSec, "writes/s")
	b.ReportMetric(idle.writesPerSec, "idle-writes/s")
	b.Logf("%d %s clients connected in %v; over %v: %.2f store reads/s (%.2f without watchers), %.0f events/s received, %.0f writes/s (%.0f without watchers); server CPU %.3f cores (%.3f without watchers); RSS %d MB (%d MB without), Go heap and stacks %d MB (%d MB without)",
		n, mode, connected.Round(time.Millisecond), busy.elapsed.Round(time.Millisecond), busy.readsPerSec, idle.readsPerSec, busy.eventsPerSec,
		busy.writesPerSec, idle.writesPerSec, busy.cores, idle.cores, busy.rss>>20, idle.rss>>20, busy.goMem>>20, idle.goMem>>20)
}

// serverUse is what the server process used over a window.
type serverUse struct {
	elapsed      time.Duration
	cores        float64 // CPU seconds per second
	readsPerSec  float64 // the store's strong reads
	writesPerSec float64 // to the hot counter
	eventsPerSec float64 // received by the clients
	rss          int64   // resident bytes at the end
	goMem        int64   // Go heap in use and goroutine stacks at the end
}

// measureServer watches this process for d: its CPU, the store's reads,
// the writes and the clients' events, then (outside the window, since a
// collection stops the world) its memory.
func measureServer(d time.Duration, writes, reads *atomic.Int64, events func() int64) serverUse {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	e0, c0, r0, w0, t0 := events(), cpu(), reads.Load(), writes.Load(), time.Now()
	time.Sleep(d)
	c1, r1, w1, t1, e1 := cpu(), reads.Load(), writes.Load(), time.Now(), events()
	secs := t1.Sub(t0).Seconds()
	// Collect and give freed memory back to the system, so that the
	// resident size is what is in use now, not what an earlier run left.
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return serverUse{
		elapsed:      t1.Sub(t0),
		cores:        (c1 - c0).Seconds() / secs,
		readsPerSec:  float64(r1-r0) / secs,
		writesPerSec: float64(w1-w0) / secs,
		eventsPerSec: float64(e1-e0) / secs,
		rss:          residentBytes(),
		goMem:        int64(ms.HeapInuse + ms.StackInuse),
	}
}

// residentBytes reads this process's resident set size.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// runWatchClients is the client process: spec is "MODE,URL,N". It opens N
// connections, each watching URL (MODE watch) or getting it once per
// benchInterval (MODE poll), prints "ready" once each has had its first
// reading, counts the readings that follow, and prints "events K" at each
// SIGUSR1, until it is killed.
func runWatchClients(spec string) int {
	mode, req, n, err := parseWatchClients(spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	events, failed := startBenchClients(mode, req, n)
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "%d of %d clients failed\n", failed, n)
		return 1
	}
	// Notify before "ready": the first SIGUSR1 follows it at once, and
	// one that came before would be caught and dropped by the runtime.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	fmt.Println("ready")
	for range usr1 {
		fmt.Printf("events %d\n", events.Load())
	}
	return 0
}

// parseWatchClients reads runWatchClients' spec, "MODE,URL,N".
func parseWatchClients(spec string) (mode string, req *http.Request, n int, err error) {
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		return "", nil, 0, fmt.Errorf("bad spec %s", spec)
	}
	mode, u := parts[0], parts[1]
	if n, err = strconv.Atoi(parts[2]); err != nil {
		return "", nil, 0, fmt.Errorf("bad spec %s", spec)
	}
	if req, err = http.NewRequest(http.MethodGet, u, nil); err != nil {
		return "", nil, 0, err
	}
	return mode, req, n, nil
}

// startBenchClients starts n clients of req and waits until each has had
// its first reading or failed. It returns the count of readings after the
// first, which goes on growing, and how many clients failed.
func startBenchClients(mode string, req *http.Request, n int) (events *atomic.Int64, failed int64) {
	accept := "text/event-stream"
	if mode == "poll" {
		accept = "application/json"
	}
	// The request is written by hand on a connection of each client's
	// own, so that n clients are n connections.
	raw := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nAccept: %s\r\n\r\n", req.URL.RequestURI(), req.URL.Host, accept)
	var ready sync.WaitGroup
	var nfailed atomic.Int64
	events = new(atomic.Int64)
	for i := range n {
		ready.Add(1)
		go func() {
			first := true
			got := func() {
				if first {
					first = false
					ready.Done()
				} else {
					events.Add(1)
				}
			}
			defer func() {
				if first {
					ready.Done()
				}
			}()
			// Pollers spread their GETs over the interval.
			delay := benchInterval * time.Duration(i) / time.Duration(n)
			if err := runBenchClient(mode, req, raw, delay, got); err != nil {
				nfailed.Add(1)
			}
		}()
	}
	ready.Wait()
	return events, nfailed.Load()
}

// runBenchClient is one client: it connects and watches or polls, calling
// got for each reading, until the connection fails or ends.
func runBenchClient(mode string, req *http.Request, raw string, delay time.Duration, got func()) error {
	conn, err := net.Dial("tcp", req.URL.Host)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return err
	}
	defer conn.Close()
	if mode == "watch" {
		return watchConn(conn, raw, got)
	}
	return pollConn(conn, req, raw, delay, got)
}

// watchConn sends the watch request and calls got for each event's data
// until the stream ends; a stream that ends is not a failure.
func watchConn(conn net.Conn, raw string, got func()) error {
	if _, err := conn.Write([]byte(raw)); err != nil {
		return err
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data:") {
			got()
		}
	}
	return nil
}

// pollConn waits delay, then sends the GET once per benchInterval on the
// kept-alive connection, calling got for each reading, until one fails.
func pollConn(conn net.Conn, req *http.Request, raw string, delay time.Duration, got func()) error {
	br := bufio.NewReader(conn)
	time.Sleep(delay)
	tick := time.NewTicker(benchInterval)
	defer tick.Stop()
	for {
		if _, err := conn.Write([]byte(raw)); err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		got()
		<-tick.C
	}
}
