//go:build wrk

package http_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/engine"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/pebble"
)

// TestWrk measures POST /v1/counters/hot/increment {"by":1} with wrk
// (Debian's wrk package), 64 connections, against shardcounter's server
// over the engine on Pebble (or bolt) and against a bare net/http handler that only
// adds to an atomic, in alternating runs within one process, so that the
// ratio of the two is measured on the same machine at the same time. It
// prints requests/s, the process's CPU time, Go allocations and
// read/write syscalls per request for each run, and for shardcounter's
// the requests a commit.
// It is behind the wrk build tag, so the default test run never pays for
// it:
//
//	go test -tags wrk -run TestWrk -v -timeout 30m ./http
//
// SHARDCOUNTER_WRK_DURATION (default 10s), SHARDCOUNTER_WRK_ROUNDS
// (default 3), SHARDCOUNTER_WRK_CONNECTIONS (64) and
// SHARDCOUNTER_WRK_DURABILITY (durable or async) and
// SHARDCOUNTER_WRK_STORE (pebble or bolt) vary it;
// SHARDCOUNTER_WRK_CPUPROFILE=FILE and SHARDCOUNTER_WRK_MEMPROFILE=FILE
// write a CPU and an allocation profile of the first shardcounter run
// (go tool pprof -sample_index=alloc_objects for the allocations).
func TestWrk(t *testing.T) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		t.Fatal("wrk is not installed: apt-get install wrk")
	}
	duration := envOr("SHARDCOUNTER_WRK_DURATION", "10s")
	rounds, _ := strconv.Atoi(envOr("SHARDCOUNTER_WRK_ROUNDS", "3"))
	conns := envOr("SHARDCOUNTER_WRK_CONNECTIONS", "64")
	durability, err := engine.ParseDurability(envOr("SHARDCOUNTER_WRK_DURABILITY", "durable"))
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	storeName := envOr("SHARDCOUNTER_WRK_STORE", "pebble")
	var store interface {
		shardcounter.CounterStore
		Close() error
	}
	switch storeName {
	case "pebble":
		store, err = pebble.Open(context.Background(), filepath.Join(dir, "pebble"), pebble.Options{})
	case "bolt":
		store, err = bolt.Open(context.Background(), filepath.Join(dir, "wrk.db"), bolt.Options{})
	default:
		t.Fatalf("SHARDCOUNTER_WRK_STORE=%q: give pebble or bolt", storeName)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	eng, err := engine.New(store, engine.Config{Durability: durability})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(context.Background())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	api := shttp.NewServer(eng, shttp.ServerOptions{Logger: quiet, AsyncWrites: durability == engine.Async})
	bare := &bareCounter{}
	servers := []struct {
		name string
		url  string
	}{
		{"shardcounter", serveOn(t, api)},
		{"bare", serveOn(t, bare)},
	}
	if _, _, err := eng.CreateCounter(context.Background(), "hot", shardcounter.CreateOptions{Shards: 1}); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "post.lua")
	os.WriteFile(script, []byte(`wrk.method = "POST"
wrk.body = '{"by":1}'
wrk.headers["Content-Type"] = "application/json"
`), 0o644)

	fmt.Printf("wrk -t2 -c%s -d%s, %s on %s, GOMAXPROCS %d\n", conns, duration, durability, storeName, runtime.GOMAXPROCS(0))
	fmt.Printf("%-6s %-13s %12s %14s %11s %13s %10s %10s\n", "round", "server", "requests/s", "cpu us/req", "allocs/req", "syscalls/req", "req/commit", "ratio")
	var sumRatio float64
	for round := 1; round <= rounds; round++ {
		rates := map[string]float64{}
		order := servers
		if round%2 == 0 { // alternate who goes first
			order = []struct{ name, url string }{servers[1], servers[0]}
		}
		for _, s := range order {
			if prof := os.Getenv("SHARDCOUNTER_WRK_CPUPROFILE"); prof != "" && s.name == "shardcounter" && round == 1 {
				f, err := os.Create(prof)
				if err != nil {
					t.Fatal(err)
				}
				pprof.StartCPUProfile(f)
				defer f.Close()
			}
			profileAllocs := os.Getenv("SHARDCOUNTER_WRK_MEMPROFILE") != "" && s.name == "shardcounter" && round == 1
			if profileAllocs {
				runtime.MemProfileRate = 512
			}
			var before, after syscall.Rusage
			var mBefore, mAfter runtime.MemStats
			runtime.ReadMemStats(&mBefore)
			sysBefore, flushBefore, writesBefore := syscalls(t), eng.Stats().Flushes.Load(), eng.Stats().Writes.Load()
			syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			out, err := exec.Command(wrk, "-t2", "-c"+conns, "-d"+duration, "-s", script, s.url+"/v1/counters/hot/increment").CombinedOutput()
			if err != nil {
				t.Fatalf("wrk: %v\n%s", err, out)
			}
			syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			pprof.StopCPUProfile()
			sysAfter, flushes, writes := syscalls(t), eng.Stats().Flushes.Load()-flushBefore, eng.Stats().Writes.Load()-writesBefore
			runtime.ReadMemStats(&mAfter)
			if profileAllocs {
				writeHeapProfile(t, os.Getenv("SHARDCOUNTER_WRK_MEMPROFILE"))
				runtime.MemProfileRate = 512 * 1024
			}
			if m := regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`).FindSubmatch(out); m != nil {
				t.Fatalf("%s: %s requests failed:\n%s", s.name, m[1], out)
			}
			total := regexp.MustCompile(`(\d+) requests in`).FindSubmatch(out)
			rate := regexp.MustCompile(`Requests/sec:\s+([\d.]+)`).FindSubmatch(out)
			if total == nil || rate == nil {
				t.Fatalf("cannot read wrk's output:\n%s", out)
			}
			n, _ := strconv.ParseFloat(string(total[1]), 64)
			rates[s.name], _ = strconv.ParseFloat(string(rate[1]), 64)
			cpu := cpuTime(after) - cpuTime(before)
			perCommit := "-"
			if s.name == "shardcounter" && flushes > 0 {
				perCommit = fmt.Sprintf("%.1f", float64(writes)/float64(flushes))
			}
			fmt.Printf("%-6d %-13s %12.0f %14.1f %11.1f %13.2f %10s %10s\n", round, s.name, rates[s.name], cpu.Seconds()/n*1e6,
				float64(mAfter.Mallocs-mBefore.Mallocs)/n, float64(sysAfter-sysBefore)/n, perCommit, "")
		}
		r := rates["shardcounter"] / rates["bare"]
		sumRatio += r
		fmt.Printf("%-6d %-13s %12s %14s %11s %13s %10s %9.2fx\n", round, "ratio", "", "", "", "", "", r)
	}
	fmt.Printf("mean ratio shardcounter/bare over %d rounds: %.2fx\n", rounds, sumRatio/float64(rounds))
	if r, err := eng.ReadCounter(context.Background(), "hot", shardcounter.Strong); err != nil || r.Value <= 0 {
		t.Fatalf("hot after the runs: %+v, %v", r, err)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// syscalls returns the read and write syscalls this process has made
// (/proc/self/io's syscr and syscw).
func syscalls(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			x, _ := strconv.ParseInt(v, 10, 64)
			n += x
		} else if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			x, _ := strconv.ParseInt(v, 10, 64)
			n += x
		}
	}
	return n
}

// writeHeapProfile writes the allocations profiled so far to path.
func writeHeapProfile(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
}

func cpuTime(r syscall.Rusage) time.Duration {
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

// serveOn serves h on a loopback port with serve's timeouts and returns
// its URL.
func serveOn(t *testing.T, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		WriteTimeout: 15 * time.Second, IdleTimeout: 2 * time.Minute}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// bareCounter is the bare handler: it drains the body, adds 1 to an
// atomic and answers as the increment route does. It is the least an
// HTTP server can do per increment (the bench's http-bare peer).
type bareCounter struct{ n atomic.Int64 }

func (b *bareCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	b.n.Add(1)
	io.WriteString(w, `{"counter":"hot","applied":true}`+"\n")
}
