package transfer_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/internal/redistest"
	"github.com/shardcounter/shardcounter/transfer"
)

// TestBenchExportImport measures export and import of N counters of 16
// shards, a tenth of them distinct with 10 members each (the project's
// targets use N = 1,000,000): N counters are written into Pebble, exported,
// imported into a fresh Pebble and into PostgreSQL, and exported from
// there. It runs only with SHARDCOUNTER_BENCH=1; N is
// SHARDCOUNTER_BENCH_ITEMS (default 100,000). It prints counters/s of each
// step; docs/EXPORT.md records a run.
func TestBenchExportImport(t *testing.T) {
	if os.Getenv("SHARDCOUNTER_BENCH") == "" {
		t.Skip("a measurement, not a test: run with SHARDCOUNTER_BENCH=1")
	}
	n := 100000
	if v := os.Getenv("SHARDCOUNTER_BENCH_ITEMS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	ctx := context.Background()
	dir := t.TempDir()
	src, err := transfer.OpenStore(ctx, "pebble:"+filepath.Join(dir, "src"), &transfer.Clock{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var incs []shardcounter.Increment
	flush := func() {
		if _, err := src.Apply(ctx, incs); err != nil {
			t.Fatal(err)
		}
		incs = incs[:0]
	}
	sum, distinct := &shardcounter.Spec{Shards: 16}, &shardcounter.Spec{Shards: 16, Kind: shardcounter.KindDistinct}
	for i := range n {
		id := fmt.Sprintf("c%08d", i)
		if i%10 == 0 {
			for m := range 10 {
				incs = append(incs, shardcounter.Increment{Counter: id, Member: "u" + strconv.Itoa(m), Delta: 1, Create: distinct})
			}
		} else {
			incs = append(incs, shardcounter.Increment{Counter: id, Delta: int64(i), Pick: uint64(i), Create: sum})
		}
		if len(incs) >= 1000 {
			flush()
		}
	}
	flush()
	step := func(name string, f func() error) {
		start := time.Now()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		el := time.Since(start)
		fmt.Printf("%-28s %d counters in %v: %.0f counters/s\n", name, n, el.Round(time.Millisecond), float64(n)/el.Seconds())
	}
	var buf bytes.Buffer
	step("export pebble", func() error { _, err := transfer.Export(ctx, src, &buf, transfer.ExportOptions{}); return err })
	data := buf.Bytes()
	for _, dst := range []struct{ name, dsn string }{
		{"pebble", "pebble:" + filepath.Join(dir, "dst")},
		{"postgres", pgtest.MustDatabase(t)},
	} {
		clock := &transfer.Clock{}
		s, err := transfer.OpenStore(ctx, dst.dsn, clock)
		if err != nil {
			t.Fatal(err)
		}
		step("import "+dst.name, func() error {
			_, err := transfer.Import(ctx, s, bytes.NewReader(data), transfer.ImportOptions{Clock: clock})
			return err
		})
		var out bytes.Buffer
		step("export "+dst.name, func() error { _, err := transfer.Export(ctx, s, &out, transfer.ExportOptions{}); return err })
		if !bytes.Equal(out.Bytes(), data) {
			t.Errorf("%s: export differs from the source's", dst.name)
		}
		s.Close()
	}
}

// TestBenchImportRedis measures import-redis of N integer keys from a live
// Redis into Pebble (the project's target: 1,000,000 keys at ≥ 50,000
// keys/s), and Redis's own INCR latency, p99, from one client while it
// runs against the same client alone before. SHARDCOUNTER_BENCH=1 runs
// it; N is SHARDCOUNTER_BENCH_ITEMS (default 100,000).
func TestBenchImportRedis(t *testing.T) {
	if os.Getenv("SHARDCOUNTER_BENCH") == "" {
		t.Skip("a measurement, not a test: run with SHARDCOUNTER_BENCH=1")
	}
	n := 100000
	if v := os.Getenv("SHARDCOUNTER_BENCH_ITEMS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	ctx := context.Background()
	srv := redistest.MustStart(t)
	src := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	defer src.Close()
	for i := 0; i < n; i += 1000 {
		pipe := src.Pipeline()
		for j := i; j < min(n, i+1000); j++ {
			pipe.Set(ctx, fmt.Sprintf("k:%08d", j), j, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	p99 := func(stop <-chan struct{}) <-chan time.Duration {
		out := make(chan time.Duration, 1)
		go func() {
			c := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
			defer c.Close()
			var lat []time.Duration
			for {
				select {
				case <-stop:
					slices.Sort(lat)
					out <- lat[len(lat)*99/100]
					return
				default:
				}
				start := time.Now()
				c.Incr(ctx, "probe")
				lat = append(lat, time.Since(start))
			}
		}()
		return out
	}
	stop := make(chan struct{})
	base := p99(stop)
	time.Sleep(2 * time.Second)
	close(stop)
	baseP99 := <-base

	store, err := transfer.OpenStore(ctx, "pebble:"+filepath.Join(t.TempDir(), "p"), &transfer.Clock{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	stop = make(chan struct{})
	during := p99(stop)
	start := time.Now()
	st, rs, err := transfer.ImportRedis(ctx, src, store, transfer.RedisOptions{Match: "k:*", Shards: 16}, transfer.ImportOptions{})
	el := time.Since(start)
	close(stop)
	duringP99 := <-during
	if err != nil || st.Counters != int64(n) || rs.Skipped != 0 {
		t.Fatalf("import-redis: %+v %+v %v", st, rs, err)
	}
	fmt.Printf("import-redis %d keys into pebble in %v: %.0f keys/s; INCR p99 %v alone, %v during (%.2fx)\n",
		n, el.Round(time.Millisecond), float64(n)/el.Seconds(), baseP99, duringP99, float64(duringP99)/float64(baseP99))
}

// TestBenchBackup measures the write throughput of 64 clients writing
// through the engine to Pebble and to bolt holding N counters, alone and
// while backups through the admin endpoint run back to back (the
// project's target: ≥ 0.7× during). That a backup restores to the same
// export is cmd/shardcounter's TestServerExportBackup. SHARDCOUNTER_BENCH=1
// runs it; N is SHARDCOUNTER_BENCH_ITEMS (default 100,000).
func TestBenchBackup(t *testing.T) {
	if os.Getenv("SHARDCOUNTER_BENCH") == "" {
		t.Skip("a measurement, not a test: run with SHARDCOUNTER_BENCH=1")
	}
	n := 100000
	if v := os.Getenv("SHARDCOUNTER_BENCH_ITEMS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	ctx := context.Background()
	for _, kind := range []string{"pebble", "bolt"} {
		store, err := transfer.OpenStore(ctx, kind+":"+filepath.Join(t.TempDir(), "s"), &transfer.Clock{})
		if err != nil {
			t.Fatal(err)
		}
		var incs []shardcounter.Increment
		for i := range n {
			incs = append(incs, shardcounter.Increment{Counter: fmt.Sprintf("c%08d", i), Delta: 1, Create: &shardcounter.Spec{Shards: 16}})
			if len(incs) == 4000 || i == n-1 {
				if _, err := store.Apply(ctx, incs); err != nil {
					t.Fatal(err)
				}
				incs = incs[:0]
			}
		}
		eng, err := engine.New(store, engine.Config{})
		if err != nil {
			t.Fatal(err)
		}
		srv := MustServeAdmin(t, store, eng)
		writes := func(d time.Duration, during func(stop <-chan struct{})) float64 {
			var ops atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for c := range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						if _, err := eng.WriteCounter(ctx, shardcounter.Write{Counter: fmt.Sprintf("c%08d", (c*7919+i)%n), Delta: 1}); err != nil {
							t.Error(err)
							return
						}
						ops.Add(1)
					}
				}()
			}
			done := make(chan struct{})
			go func() { during(stop); close(done) }()
			time.Sleep(d)
			close(stop)
			wg.Wait()
			<-done
			return float64(ops.Load()) / d.Seconds()
		}
		backups := 0
		alone := writes(3*time.Second, func(<-chan struct{}) {})
		during := writes(3*time.Second, func(stop <-chan struct{}) {
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := http.Get(srv.URL + transfer.BackupPath)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				backups++
			}
		})
		fmt.Printf("backup %s, %d counters: %.0f writes/s alone, %.0f during %d backups (%.2fx)\n", kind, n, alone, during, backups, during/alone)
		srv.Close()
		eng.Close(ctx)
		store.Close()
	}
}
