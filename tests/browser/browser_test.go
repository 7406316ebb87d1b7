package browser_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/internal/testbin"
)

// chromiumPath is where Debian's chromium package puts the browser; the
// script launches it from there (Playwright's own browser download does
// not work offline).
const chromiumPath = "/usr/bin/chromium"

// TestDashboard runs the real binary's `serve` on bolt, fills it with
// counters and a collection, and drives the dashboard in Chromium through
// dashboard.mjs while it writes to one counter: once with a token (the
// login, the screenshots) and once without (the browser's own
// EventSource reads the watch stream). A missing browser, node or
// playwright-core is a failure: scripts/ensure-browser.sh installs them.
func TestDashboard(t *testing.T) {
	requireTools(t)
	bin := buildBinary(t)
	shots := os.Getenv("SHARDCOUNTER_SCREENSHOTS")
	for _, tc := range []struct {
		name  string
		token string
		shots string
	}{
		{"Token", "dashboard-test-token", shots},
		{"NoToken", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.shots == "" {
				tc.shots = t.TempDir()
			}
			runDashboard(t, bin, tc.token, tc.shots)
		})
	}
}

// The dashboard's data: 60 counters under post/, so that a search pages;
// the watched one among them has 8 shards.
const (
	dashPrefix, dashCounter = "post/", "post/0042/likes"
	dashShards              = 8
)

// runDashboard starts a server, seeds it, keeps writers running and runs
// dashboard.mjs against it, which drives the page in a browser and
// answers whether each view showed what it should.
func runDashboard(t *testing.T, bin, token, shots string) {
	dir := t.TempDir()
	// A store path relative to the server's directory, as users write it,
	// so that the shard table (and its screenshot) names it so.
	args := []string{"serve", "--listen", "127.0.0.1:0", "--store", "bolt:shardcounter-data/shardcounter.db"}
	if token != "" {
		tokenFile := filepath.Join(dir, "tokens")
		if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--auth-token-file", tokenFile)
	}
	url, logs := startServer(t, bin, dir, args...)
	client := shttp.NewClient(url)
	client.Token = token
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	seedDashboard(ctx, t, client)
	stop := startDashWriters(ctx, t, client)

	sctx, scancel := context.WithTimeout(ctx, 3*time.Minute)
	defer scancel()
	cmd := exec.CommandContext(sctx, "node", "dashboard.mjs")
	cmd.Env = append(os.Environ(),
		"SC_URL="+url, "SC_TOKEN="+token, "SC_PREFIX="+dashPrefix, "SC_COUNTER="+dashCounter, "SC_IDLE=video/2/views",
		fmt.Sprintf("SC_SHARDS=%d", dashShards), "SC_COLLECTION=trades", "SC_INDEX=exchange", "SC_INDEX_VALUE=XLON", "SC_RANKING=liked",
		"SC_PROFILE="+filepath.Join(dir, "chromium-profile"), "SC_SCREENSHOTS="+shots)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	stop()
	var result struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if jerr := json.Unmarshal(out, &result); jerr != nil || err != nil || !result.OK {
		t.Fatalf("dashboard.mjs: %v\nstdout: %s\nstderr: %s\nserver log:\n%s", err, out, stderr.String(), logs())
	}
	t.Logf("dashboard.mjs saw: %s", strings.TrimSpace(string(out)))
	if token != "" && strings.Contains(logs(), token) {
		t.Fatalf("the server logged the token:\n%s", logs())
	}
}

// seedDashboard creates what each view of the page shows: the counters
// under post/ with values, two video counters (one written, one idle), a
// collection of trades with an index, and a ranking.
func seedDashboard(ctx context.Context, t *testing.T, client *shttp.Client) {
	for i := 1; i <= 60; i++ {
		id := fmt.Sprintf("post/%04d/likes", i)
		opts := shardcounter.CreateOptions{Shards: 4}
		if id == dashCounter {
			opts.Shards = dashShards
		}
		if _, _, err := client.CreateCounter(ctx, id, opts); err != nil {
			t.Fatal(err)
		}
	}
	var seed []shardcounter.Write
	for i := 1; i <= 60; i++ {
		seed = append(seed, shardcounter.Write{Counter: fmt.Sprintf("post/%04d/likes", i), Delta: int64(1 + (i*337)%2000)})
	}
	if _, err := client.WriteBatch(ctx, seed); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"video/1/views", "video/2/views"} {
		if _, err := client.WriteCounter(ctx, shardcounter.Write{Counter: id, Delta: 100}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.CreateCollection(ctx, "trades", shardcounter.CollectionOptions{Shards: 4, Indexes: []string{"exchange"}}); err != nil {
		t.Fatal(err)
	}
	var docs []shardcounter.DocumentInput
	base := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	for i := range 30 {
		docs = append(docs, shardcounter.DocumentInput{ID: fmt.Sprintf("t%02d", i), Data: map[string]any{
			"exchange":  []string{"XNYS", "XLON", "XTKS"}[i%3],
			"symbol":    []string{"ACME", "INITECH", "UMBRELLA"}[i%3],
			"price":     100 + i,
			"timestamp": base.Add(time.Duration(i) * time.Minute).Format(time.RFC3339),
		}})
	}
	if _, err := client.PutDocuments(ctx, "trades", docs); err != nil {
		t.Fatal(err)
	}
	// A ranking of the ten counters post/0040 to post/0049, the watched
	// one among them.
	if _, _, err := client.CreateRanking(ctx, "liked", shardcounter.RankingOptions{Prefix: "post/004", Size: 10, MaxStaleness: shardcounter.Duration(200 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
}

// startDashWriters starts the writers that run until the script ends:
// the one the page watches, a few writes a second of varying size, and a
// few more on another counter, so that commits carry more than one
// write. The function it returns stops them and waits for them.
func startDashWriters(ctx context.Context, t *testing.T, client *shttp.Client) (stop func()) {
	var wg sync.WaitGroup
	done := make(chan struct{})
	write := func(id string, delta func() int64, pause func() time.Duration) {
		defer wg.Done()
		for {
			if _, err := client.WriteCounter(ctx, shardcounter.Write{Counter: id, Delta: delta()}); err != nil {
				t.Errorf("writing %s: %v", id, err)
				return
			}
			select {
			case <-done:
				return
			case <-time.After(pause()):
			}
		}
	}
	wg.Add(1)
	go write(dashCounter, func() int64 { return 1 + rand.Int64N(20) }, func() time.Duration { return time.Duration(50+rand.IntN(250)) * time.Millisecond })
	for range 4 {
		wg.Add(1)
		go write("video/1/views", func() int64 { return 1 }, func() time.Duration { return 20 * time.Millisecond })
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

// requireTools fails the test when the browser, node or playwright-core
// is missing, saying how to get them.
func requireTools(t *testing.T) {
	t.Helper()
	const fix = ": run scripts/ensure-browser.sh (scripts/test.sh does)"
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("no browser at %s (Debian's chromium package)%s", chromiumPath, fix)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not on PATH%s", fix)
	}
	if _, err := os.Stat(filepath.Join("node_modules", "playwright-core", "package.json")); err != nil {
		t.Fatalf("playwright-core is not installed in tests/browser/node_modules%s", fix)
	}
}

// buildBinary builds cmd/shardcounter, so that the dashboard is tested as
// users get it: embedded in the binary.
func buildBinary(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return testbin.Build(t, root, t.TempDir())
}

var addrRE = regexp.MustCompile(`msg="shardcounter serving" addr=(\S+)`)

// startServer runs the binary with args until the end of the test and
// returns its URL and a function that returns its log so far.
func startServer(t *testing.T, bin, dir string, args ...string) (string, func() string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var log strings.Builder
	addr := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	logs := func() string {
		mu.Lock()
		defer mu.Unlock()
		return log.String()
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		cmd.Wait()
	})
	select {
	case a := <-addr:
		return "http://" + a, logs
	case <-done:
		t.Fatalf("serve exited before listening:\n%s", logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start:\n%s", logs())
	}
	return "", nil
}
