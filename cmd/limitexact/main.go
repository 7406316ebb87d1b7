// Command limitexact checks that a fixed-window rate limit is exact across
// servers sharing one store (docs/LIMITS.md, docs/BENCHMARKS.md "Rate
// limits across servers"): it starts the store, then several `shardcounter
// serve` processes on it, defines a limit (300 per 10 s by default), and
// has many clients, spread over the servers, take cost 1 from one key
// through HTTP for a while, each take with a request id of its own. Every
// answer is recorded in the window it was decided in, read from the
// store's answer: a fixed window ends at a Unix time multiple of the
// period on the store's clock, and the answer's reset_after_ms is the
// time from the decision to that end, so the window is the multiple of
// the period nearest the reply's time plus reset_after_ms.
//
// It runs twice: steadily, then with one server SIGKILLed mid-run (just
// after a window starts, while takes are being admitted), whose clients
// send the takes they had in flight again, with the same request ids, to
// another server. It prints a table of the windows and checks:
//
//   - admitted ≤ the limit in every window;
//   - the store's own count agrees: in each window the admitted takes'
//     "remaining" answers are distinct, and the limit less the lowest of
//     them (what the store had charged) equals what was admitted, the
//     takes whose first answer was lost counted once, by their retry's
//     duplicate answer;
//   - every take sent again afterwards with its request id answers
//     duplicate with its first decision, and takes nothing (a peek then
//     finds the whole quota);
//   - the target: admitted ≥ limit − 3 in each window the run covers
//     whole (reported, not a correctness check).
//
// Stores: postgres (a fresh database on the shared test server,
// internal/pgtest; scripts/ensure-postgres.sh starts one), redis-cluster
// (three masters it starts, internal/redistest), firestore (an emulator
// it starts, internal/firestoretest). A store name may carry a DSN query
// after "?", appended to its DSN: "firestore?shard_write_interval=0" runs
// Firestore without its pace of one commit a second a shard document,
// which bounds what a hot key admits. A store that refuses takes
// (ErrLimitsUnsupported) is reported as refusing them, and not run.
//
//	go build -o /tmp/shardcounter ./cmd/shardcounter
//	go run ./cmd/limitexact -bin /tmp/shardcounter -store postgres,redis-cluster,firestore
//
// It exits 1 when a check fails. scripts/limit-exact.sh builds and runs it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/internal/redistest"
	"github.com/shardcounter/shardcounter/internal/testbin"
)

const token = "limitexact-token"

var (
	bin      = flag.String("bin", "", "the shardcounter binary to run")
	stores   = flag.String("store", "postgres,redis-cluster,firestore", "comma-separated stores: postgres, redis-cluster, firestore")
	nServers = flag.Int("servers", 3, "serve processes sharing the store")
	nClients = flag.Int("clients", 48, "clients, spread over the servers")
	quota    = flag.Int64("limit", 300, "the limit's quota a window")
	period   = flag.Duration("period", 10*time.Second, "the limit's window (whole seconds)")
	duration = flag.Duration("duration", 30*time.Second, "how long the clients take")
	runs     = flag.String("runs", "steady,kill", "the runs: steady (every server up), kill (server 0 SIGKILLed mid-run)")
	killAt   = flag.Duration("kill-after-window", 20*time.Millisecond, "the kill run kills server 0 this long after the start of the window nearest the run's middle (on this machine's clock), while the window still admits, so that takes in flight are ones being admitted")
	verbose  = flag.Bool("v", false, "print every server's log at the end of a run")
)

func main() {
	flag.Parse()
	if *bin == "" {
		log.Fatal("give -bin: the shardcounter binary to run")
	}
	if *period < time.Second || *period%time.Second != 0 {
		log.Fatal("-period must be a whole number of seconds")
	}
	failed := false
	for _, st := range strings.Split(*stores, ",") {
		ok, err := runStore(st)
		if err != nil {
			log.Printf("%s: %v", st, err)
			failed = true
		} else if !ok {
			failed = true
		}
	}
	if failed {
		fmt.Println("FAIL")
		os.Exit(1)
	}
	fmt.Println("PASS")
}

// runStore starts the store, runs each run on it and reports whether
// every check held.
func runStore(name string) (bool, error) {
	dir, err := os.MkdirTemp("", "limitexact")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	var dsn, query string
	if i := strings.IndexByte(name, '?'); i >= 0 {
		name, query = name[:i], name[i:]
	}
	switch name {
	case "postgres":
		d, drop, err := pgtest.CreateDatabase(context.Background())
		if err != nil {
			return false, err
		}
		defer drop()
		dsn = d
	case "redis-cluster":
		c, err := redistest.StartCluster(dir, 3)
		if err != nil {
			return false, err
		}
		defer c.Stop()
		addrs := c.Addrs()
		dsn = "redis+cluster://" + addrs[0] + "?addr=" + strings.Join(addrs[1:], "&addr=")
	case "firestore":
		e, err := firestoretest.Start(firestoretest.Native)
		if err != nil {
			return false, err
		}
		defer e.Stop()
		os.Setenv("FIRESTORE_EMULATOR_HOST", e.Addr)
		dsn = "firestore://limitexact"
	default:
		return false, fmt.Errorf("unknown store (the stores are postgres, redis-cluster, firestore)")
	}
	if query != "" {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + query[1:]
	}
	fmt.Printf("## %s (%d servers on one store, %d clients, fixed %d/%v, %v a run)\n\n", name+query, *nServers, *nClients, *quota, *period, *duration)
	ok := true
	for _, run := range strings.Split(*runs, ",") {
		if run != "steady" && run != "kill" {
			return false, fmt.Errorf("unknown run %q (the runs are steady, kill)", run)
		}
		r := &runner{store: name, dsn: dsn, dir: dir, kill: run == "kill", limit: "exact-" + run}
		good, refused, err := r.run()
		if err != nil {
			return false, err
		}
		if refused != "" {
			fmt.Printf("%s refuses takes: a take answered %s\n\n", name, refused)
			return true, nil
		}
		ok = ok && good
	}
	return ok, nil
}

// runner is one run on one store.
type runner struct {
	store, dsn, dir string
	kill            bool
	limit           string

	servers []*testbin.Server
	dead    []atomic.Bool
	client  *http.Client

	start, end, killedAt time.Time
}

// take is one request id's life: its attempts and the answer it got.
type take struct {
	client   int
	id       string
	first    time.Time // when its first attempt was sent
	sent     time.Time // when the attempt answered was sent
	got      time.Time // when that answer came
	attempts int       // attempts sent (more than 1: sent again)
	retried  bool      // sent again after its server was killed
	res      shardcounter.LimitResult
}

func (r *runner) startServers() error {
	tokens := filepath.Join(r.dir, "tokens")
	if err := os.WriteFile(tokens, []byte(token+"\n"), 0o600); err != nil {
		return err
	}
	for i := range *nServers {
		d := filepath.Join(r.dir, fmt.Sprintf("%s-server-%d", r.limit, i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		s, err := testbin.Start(*bin, d, time.Minute, "--listen", "127.0.0.1:0", "--auth-token-file", tokens, "--store", r.dsn)
		if err != nil {
			return fmt.Errorf("server %d: %v", i, err)
		}
		r.servers = append(r.servers, s)
	}
	r.dead = make([]atomic.Bool, len(r.servers))
	return nil
}

func (r *runner) stopServers() {
	for i, s := range r.servers {
		s.Kill()
		if *verbose {
			fmt.Printf("--- server %d's log\n%s\n", i, s.Logs.String())
		}
	}
}

// do sends a request to server i and decodes a 200 answer (201 to a PUT)
// into out; another status is a *statusError holding the body.
func (r *runner) do(i int, method, path, body string, out any) error {
	req, err := http.NewRequest(method, r.servers[i].URL+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK && !(method == "PUT" && resp.StatusCode == http.StatusCreated) {
		return &statusError{resp.StatusCode, strings.TrimSpace(string(b))}
	}
	if out == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(out)
}

type statusError struct {
	status int
	body   string
}

func (e *statusError) Error() string { return fmt.Sprintf("status %d: %s", e.status, e.body) }

func (r *runner) takePath() string { return "/v1/limits/" + r.limit + "/keys/hot/take" }

// run runs the clients and checks what they got. refused is the answer
// of a store that refuses takes.
func (r *runner) run() (ok bool, refused string, err error) {
	r.client = &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: *nClients, MaxConnsPerHost: *nClients}}
	if err := r.startServers(); err != nil {
		return false, "", err
	}
	defer r.stopServers()
	policy := fmt.Sprintf(`{"kind":"fixed","limit":%d,"period":"%v"}`, *quota, *period)
	if err := r.do(0, "PUT", "/v1/limits/"+r.limit, policy, nil); err != nil {
		var se *statusError
		if asStatus(err, &se) && strings.Contains(se.body, "does not decide takes") {
			return true, se.Error(), nil
		}
		return false, "", fmt.Errorf("defining the limit: %v", err)
	}
	var probe shardcounter.LimitResult
	if err := r.do(0, "POST", "/v1/limits/"+r.limit+"/keys/probe/take", `{"request_id":"probe"}`, &probe); err != nil {
		var se *statusError
		if asStatus(err, &se) && strings.Contains(se.body, "does not decide takes") {
			return true, se.Error(), nil
		}
		return false, "", fmt.Errorf("a first take: %v", err)
	}

	var mu sync.Mutex
	var takes []*take
	var errs []string
	r.start = time.Now()
	r.end = r.start.Add(*duration)
	var wg sync.WaitGroup
	for c := range *nClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv := c % len(r.servers)
			for seq := 0; time.Now().Before(r.end); seq++ {
				t := &take{client: c, id: fmt.Sprintf("%s-c%d-%d", r.limit, c, seq), first: time.Now()}
				for {
					t.attempts++
					t.sent = time.Now()
					var res shardcounter.LimitResult
					err := r.do(srv, "POST", r.takePath(), `{"request_id":"`+t.id+`"}`, &res)
					t.got = time.Now()
					if err == nil {
						t.res = res
						break
					}
					// The decision may or may not have been made: send the
					// take again with its request id, to another server when
					// this one is dead.
					if r.dead[srv].Load() {
						srv = r.alive(c)
						t.retried = true
					} else {
						mu.Lock()
						errs = append(errs, fmt.Sprintf("client %d, server %d, %s: %v", c, srv, t.id, err))
						mu.Unlock()
						time.Sleep(100 * time.Millisecond)
					}
					if t.attempts > 20 {
						mu.Lock()
						errs = append(errs, fmt.Sprintf("client %d: %s never answered", c, t.id))
						mu.Unlock()
						return
					}
				}
				mu.Lock()
				takes = append(takes, t)
				mu.Unlock()
			}
		}()
	}
	if r.kill {
		mid := r.start.Add(*duration / 2)
		at := localWindow(mid.Add(*period / 2)).Add(*killAt)
		if !at.Before(r.end) {
			at = mid
		}
		time.Sleep(time.Until(at))
		r.dead[0].Store(true)
		r.killedAt = time.Now()
		r.servers[0].Kill()
	}
	wg.Wait()
	fmt.Printf("### run %q: %d servers", r.limit, len(r.servers))
	if r.kill {
		fmt.Printf(", server 0 SIGKILLed at +%.1f s", r.killedAt.Sub(r.start).Seconds())
	}
	fmt.Printf("; %d takes answered in %.1f s\n\n", len(takes), time.Since(r.start).Seconds())
	ok = r.report(takes)
	if len(errs) > 0 {
		fmt.Printf("errors (%d), the first:\n", len(errs))
		for _, e := range errs[:min(len(errs), 10)] {
			fmt.Println("  " + e)
		}
	}
	if !r.replay(takes) {
		ok = false
	}
	fmt.Println()
	return ok, "", nil
}

func asStatus(err error, se **statusError) bool {
	e, ok := err.(*statusError)
	if ok {
		*se = e
	}
	return ok
}

// alive returns a server that was not killed, chosen by the client so that
// a dead server's clients spread over the others.
func (r *runner) alive(c int) int {
	var live []int
	for i := range r.servers {
		if !r.dead[i].Load() {
			live = append(live, i)
		}
	}
	return live[c%len(live)]
}

// replay waits for the next window, sends every admitted take, every take
// sent again after the kill and up to 500 refused ones again with their
// request ids, and checks that each answers duplicate with its decision,
// then that a peek finds the whole quota (nothing was taken).
func (r *runner) replay(takes []*take) bool {
	var again []*take
	refused := 0
	for _, t := range takes {
		if t.res.Allowed || t.retried || t.attempts > 1 {
			again = append(again, t)
		} else if refused < 500 {
			again = append(again, t)
			refused++
		}
	}
	time.Sleep(time.Until(localWindow(time.Now()).Add(*period + 100*time.Millisecond)))
	var mu sync.Mutex
	var bad []string
	var next atomic.Int64
	var wg sync.WaitGroup
	for c := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(again) {
					return
				}
				t := again[i]
				var res shardcounter.LimitResult
				err := r.do(r.alive(c), "POST", r.takePath(), `{"request_id":"`+t.id+`"}`, &res)
				mu.Lock()
				if err != nil {
					bad = append(bad, fmt.Sprintf("%s sent again: %v", t.id, err))
				} else if !res.Duplicate || res.Allowed != t.res.Allowed {
					bad = append(bad, fmt.Sprintf("%s sent again: allowed %v duplicate %v, first answered allowed %v", t.id, res.Allowed, res.Duplicate, t.res.Allowed))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var peek shardcounter.LimitResult
	err := r.do(r.alive(0), "POST", "/v1/limits/"+r.limit+"/keys/hot/peek", "", &peek)
	if err != nil {
		bad = append(bad, fmt.Sprintf("peek: %v", err))
	} else if peek.Remaining != *quota {
		bad = append(bad, fmt.Sprintf("after the takes sent again, a peek finds %d remaining, not %d: something was taken", peek.Remaining, *quota))
	}
	fmt.Printf("sent again with their request ids: %d takes (%d admitted or sent again, %d refused): ", len(again), len(again)-refused, refused)
	if len(bad) == 0 {
		fmt.Printf("every one answered duplicate with its first decision; a peek then found %d remaining\n", peek.Remaining)
		return true
	}
	fmt.Printf("%d wrong, the first:\n", len(bad))
	for _, b := range bad[:min(len(bad), 10)] {
		fmt.Println("  " + b)
	}
	return false
}
