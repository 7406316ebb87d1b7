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
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/engine"
	shttp "github.com/shardcounter/shardcounter/http"
)

// TestWrk measures POST /v1/counters/hot/increment {"by":1} with wrk
// (Debian's wrk package), 64 connections, against shardcounter's server
// over the engine on bolt and against a bare net/http handler that only
// adds to an atomic, in alternating runs within one process, so that the
// ratio of the two is measured on the same machine at the same time. It
// prints requests/s and the process's CPU time per request for each run.
// It is behind the wrk build tag, so the default test run never pays for
// it:
//
//	go test -tags wrk -run TestWrk -v -timeout 30m ./http
//
// SHARDCOUNTER_WRK_DURATION (default 10s), SHARDCOUNTER_WRK_ROUNDS
// (default 3), SHARDCOUNTER_WRK_CONNECTIONS (64) and
// SHARDCOUNTER_WRK_DURABILITY (durable or async) vary it;
// SHARDCOUNTER_WRK_CPUPROFILE=FILE writes a CPU profile of the first
// shardcounter run.
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
	store, err := bolt.Open(context.Background(), filepath.Join(dir, "wrk.db"), bolt.Options{})
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

	fmt.Printf("wrk -t2 -c%s -d%s, %s on bolt, GOMAXPROCS %d\n", conns, duration, durability, runtime.GOMAXPROCS(0))
	fmt.Printf("%-6s %-13s %12s %14s %10s\n", "round", "server", "requests/s", "cpu us/req", "ratio")
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
			var before syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			out, err := exec.Command(wrk, "-t2", "-c"+conns, "-d"+duration, "-s", script, s.url+"/v1/counters/hot/increment").CombinedOutput()
			if err != nil {
				t.Fatalf("wrk: %v\n%s", err, out)
			}
			var after syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			pprof.StopCPUProfile()
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
			ratio := ""
			if s.name == "shardcounter" {
				ratio = "-"
			}
			fmt.Printf("%-6d %-13s %12.0f %14.1f %10s\n", round, s.name, rates[s.name], cpu.Seconds()/n*1e6, ratio)
		}
		r := rates["shardcounter"] / rates["bare"]
		sumRatio += r
		fmt.Printf("%-6d %-13s %12s %14s %9.2fx\n", round, "ratio", "", "", r)
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
