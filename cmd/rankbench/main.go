// Command rankbench measures rankings (docs/RANKINGS.md, "Measured") in
// process, on one store, against the hot sorted set users would build
// instead:
//
//   - writes: +1 writes to -counters counters (Zipf 1.1) by -clients
//     clients, through the engine, without a ranking and then with one of
//     their prefix: the ratio is what keeping the ranking costs;
//
//   - mix: 90% such writes and 10% top-10 reads of the ranking, with the
//     reads' p50/p99 latency and the oldest as_of a read returned, behind
//     the moment it began;
//
//   - peer: the same mix on a redis-server of its own (appendonly yes,
//     appendfsync always), ZINCRBY on one sorted set for each write and
//     ZREVRANGE 0 9 for each read.
//
//     go run ./cmd/rankbench -store pebble:/tmp/rb -counters 100000 -duration 5s
//
// Its figures depend on the machine; they are measurements, not tests.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/dsn"
	"github.com/shardcounter/shardcounter/engine"
)

func main() {
	store := flag.String("store", "", "the store `DSN`, as serve --store takes it")
	counters := flag.Int("counters", 100000, "the counters written to, Zipf 1.1")
	clients := flag.Int("clients", 64, "concurrent clients")
	duration := flag.Duration("duration", 5*time.Second, "each run's length")
	peer := flag.Bool("peer", true, "also run the Redis sorted-set peer (needs redis-server on PATH)")
	last := flag.Duration("last", 0, "rank by the sum of the trailing `DURATION` (a trending ranking) over counters with 1-minute buckets kept an hour, instead of by value")
	flag.Parse()
	if *store == "" {
		log.Fatal("give -store, such as pebble:/tmp/rankbench")
	}
	ctx := context.Background()
	s, err := dsn.Open(ctx, *store)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(s, engine.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close(ctx)
	prefix := fmt.Sprintf("rb%x:", time.Now().UnixNano())
	ids := make([]string, *counters)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%07d", prefix, i)
	}
	prefill(ctx, e, ids, *last > 0)
	fmt.Printf("# rankbench: %d counters (Zipf 1.1), %d clients, %s a run, store %s, ranking by %s\n", *counters, *clients, *duration, dsn.Redact(*store), by(*last))
	fmt.Printf("%-28s %12s %10s %10s %14s\n", "run", "ops/s", "top p50", "top p99", "max staleness")

	run(*clients, *duration/2, ids, 0, e.WriteCounter, nil) // warm-up, not reported
	plain := run(*clients, *duration, ids, 0, e.WriteCounter, nil)
	report("writes, no ranking", plain)
	if _, _, err := e.CreateRanking(ctx, "rankbench", shardcounter.RankingOptions{Prefix: prefix, Size: 1000, Last: shardcounter.Duration(*last)}); err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	if _, err := e.Top(ctx, "rankbench", 10); err != nil { // the seeding scan
		log.Fatal(err)
	}
	fmt.Printf("# seeding the ranking (a scan of %d counters) took %s\n", *counters, time.Since(start).Round(time.Millisecond))
	top := func(ctx context.Context) (time.Time, error) {
		t, err := e.Top(ctx, "rankbench", 10)
		if err != nil {
			return time.Time{}, err
		}
		return t.AsOf, nil
	}
	ranked := run(*clients, *duration, ids, 0, e.WriteCounter, top)
	report("writes, with the ranking", ranked)
	fmt.Printf("# writes with the ranking / without: %.2fx\n", ranked.ops/plain.ops)
	mix := run(*clients, *duration, ids, 0.1, e.WriteCounter, top)
	report("90% writes, 10% top 10", mix)
	// The plain run again, the ranking deleted: the machine's drift
	// between the first run and the others shows here.
	if err := e.DeleteRanking(ctx, "rankbench"); err != nil {
		log.Fatal(err)
	}
	again := run(*clients, *duration, ids, 0, e.WriteCounter, nil)
	report("writes, no ranking (again)", again)
	fmt.Printf("# writes with the ranking / the mean of the runs without: %.2fx\n", ranked.ops/((plain.ops+again.ops)/2))
	if *peer {
		p := redisPeer(*clients, *duration, ids)
		report("redis ZINCRBY/ZREVRANGE", p)
		fmt.Printf("# mix: shardcounter / redis sorted set: %.2fx\n", mix.ops/p.ops)
	}
}

func by(last time.Duration) string {
	if last > 0 {
		return "the sum of the last " + shardcounter.Duration(last).String() + " of 1m buckets"
	}
	return "value"
}

// prefill writes 1 to every counter, creating it, a thousand a batch;
// windowed counters are created first, with 1-minute buckets kept an
// hour.
func prefill(ctx context.Context, e *engine.Engine, ids []string, windowed bool) {
	if windowed {
		w := &shardcounter.Window{Bucket: shardcounter.BucketMinute, Retention: shardcounter.Duration(time.Hour)}
		var wg sync.WaitGroup
		for c := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := c; i < len(ids); i += 16 {
					if _, _, err := e.CreateCounter(ctx, ids[i], shardcounter.CreateOptions{Shards: 1, Window: w}); err != nil {
						log.Fatal(err)
					}
				}
			}()
		}
		wg.Wait()
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := 0; i < len(ids); i += 1000 {
		ws := make([]shardcounter.Write, 0, 1000)
		for _, id := range ids[i:min(i+1000, len(ids))] {
			ws = append(ws, shardcounter.Write{Counter: id, Delta: 1})
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if _, err := e.WriteBatch(ctx, ws); err != nil {
				log.Fatal(err)
			}
		}()
	}
	wg.Wait()
}

type result struct {
	ops       float64
	tops      []time.Duration
	staleness time.Duration
	errs      int64
}

func report(name string, r result) {
	p50, p99 := "-", "-"
	if len(r.tops) > 0 {
		slices.Sort(r.tops)
		p50 = r.tops[len(r.tops)/2].Round(10 * time.Nanosecond).String()
		p99 = r.tops[len(r.tops)*99/100].Round(10 * time.Nanosecond).String()
	}
	stale := "-"
	if r.staleness > 0 {
		stale = r.staleness.Round(time.Millisecond).String()
	}
	fmt.Printf("%-28s %12.0f %10s %10s %14s\n", name, r.ops, p50, p99, stale)
	if r.errs > 0 {
		fmt.Printf("# %s: %d errors\n", name, r.errs)
	}
}

// run has clients write to Zipf-picked counters (and, with readRatio,
// read the top instead) for d.
func run(clients int, d time.Duration, ids []string, readRatio float64,
	write func(context.Context, shardcounter.Write) (*shardcounter.WriteResult, error),
	top func(context.Context) (time.Time, error)) result {
	var ops, errs atomic.Int64
	var mu sync.Mutex
	var res result
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			zipf := rand.NewZipf(rng, 1.1, 1, uint64(len(ids)-1))
			var lat []time.Duration
			var stale time.Duration
			ctx := context.Background()
			for time.Now().Before(deadline) {
				if top != nil && readRatio > 0 && rng.Float64() < readRatio {
					began := time.Now()
					asOf, err := top(ctx)
					lat = append(lat, time.Since(began))
					if err != nil {
						errs.Add(1)
					} else if s := began.Sub(asOf); s > stale {
						stale = s
					}
				} else if _, err := write(ctx, shardcounter.Write{Counter: ids[zipf.Uint64()], Delta: 1}); err != nil {
					errs.Add(1)
				}
				ops.Add(1)
			}
			mu.Lock()
			res.tops = append(res.tops, lat...)
			res.staleness = max(res.staleness, stale)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.ops = float64(ops.Load()) / d.Seconds()
	res.errs = errs.Load()
	return res
}

// redisPeer runs the mix on a redis-server of its own with appendfsync
// always: ZINCRBY of one sorted set per write, ZREVRANGE 0 9 per read.
func redisPeer(clients int, d time.Duration, ids []string) result {
	dir, err := os.MkdirTemp("", "rankbench-redis")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--logfile", filepath.Join(dir, "log"))
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	rdb := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), PoolSize: clients})
	defer rdb.Close()
	ctx := context.Background()
	for i := 0; ; i++ {
		if rdb.Ping(ctx).Err() == nil {
			break
		}
		if i > 100 {
			log.Fatal("redis-server did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	pipe := rdb.Pipeline()
	for _, id := range ids {
		pipe.ZIncrBy(ctx, "board", 1, id)
		if pipe.Len() == 1000 {
			if _, err := pipe.Exec(ctx); err != nil {
				log.Fatal(err)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		log.Fatal(err)
	}
	write := func(ctx context.Context, w shardcounter.Write) (*shardcounter.WriteResult, error) {
		return nil, rdb.ZIncrBy(ctx, "board", float64(w.Delta), w.Counter).Err()
	}
	top := func(ctx context.Context) (time.Time, error) {
		now := time.Now()
		return now, rdb.ZRevRangeWithScores(ctx, "board", 0, 9).Err()
	}
	return run(clients, d, ids, 0.1, write, top)
}
