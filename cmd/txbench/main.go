// Command txbench drives Redis-protocol servers with a workload that
// redis-benchmark cannot send: the rate-limit pattern, a MULTI/EXEC
// transaction of INCR, INCR and EXPIRE per request, from many clients at
// once; and, for comparison on the same clients, INCR alone and EXPIRE
// alone, and the transaction without its EXPIRE. It measures each address given, one after another, with the
// same clients and keys, and prints transactions (or commands) per
// second and each target's ratio to the first.
//
//	go run ./cmd/txbench -addr 127.0.0.1:6380,127.0.0.1:6379 [-names shardcounter,redis] \
//	    [-clients 64] [-keys 1000] [-duration 5s] [-workload ratelimit|incr|expire] [-rounds 1]
//
// scripts/bench-expire.sh runs it against `shardcounter serve` on Pebble
// and redis-server with appendfsync always; docs/RESP.md quotes it. Its
// figures depend on the machine; they are measurements, not tests.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

func main() {
	addrs := flag.String("addr", "", "comma-separated host:port of the servers to measure, the first the reference of the ratios")
	names := flag.String("names", "", "comma-separated names of the servers (default: their addresses)")
	clients := flag.Int("clients", 64, "concurrent clients, one connection each")
	keys := flag.Int("keys", 1000, "distinct keys; each request picks one at random (the second INCR's key is its twin)")
	duration := flag.Duration("duration", 5*time.Second, "how long each measurement runs")
	workload := flag.String("workload", "ratelimit", "ratelimit (MULTI, INCR k, INCR k:b, EXPIRE k 60, EXEC), multi (the same without EXPIRE), incr (INCR k) or expire (EXPIRE k 60 of keys that exist)")
	rounds := flag.Int("rounds", 1, "rounds over all servers, interleaved; the best of each is kept")
	flag.Parse()
	targets := strings.Split(*addrs, ",")
	if *addrs == "" {
		log.Fatal("txbench: give -addr")
	}
	labels := targets
	if *names != "" {
		labels = strings.Split(*names, ",")
		if len(labels) != len(targets) {
			log.Fatal("txbench: -names needs one name per address")
		}
	}
	best := make([]result, len(targets))
	for range *rounds {
		for i, addr := range targets {
			r, err := measure(addr, *workload, *clients, *keys, *duration)
			if err != nil {
				log.Fatalf("txbench: %s: %v", labels[i], err)
			}
			if r.rate > best[i].rate {
				best[i] = r
			}
		}
	}
	fmt.Printf("| target | workload | clients | keys | per second | p50 ms | p99 ms | × %s |\n", labels[0])
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|")
	for i, r := range best {
		fmt.Printf("| %s | %s | %d | %d | %.0f | %.2f | %.2f | %.2f× |\n", labels[i], *workload, *clients, *keys, r.rate, ms(r.p50), ms(r.p99), r.rate/best[0].rate)
	}
}

// result is one measurement: requests a second and latency percentiles.
type result struct {
	rate     float64
	p50, p99 time.Duration
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// measure runs the workload against addr for d and returns its rate.
func measure(addr, workload string, clients, keys int, d time.Duration) (result, error) {
	ctx := context.Background()
	rdb := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: clients, MinIdleConns: clients, MaxRetries: -1, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return result{}, err
	}
	if workload == "expire" { // EXPIRE sets a deadline only on a key that exists
		p := rdb.Pipeline()
		for k := range keys {
			p.Incr(ctx, key(k))
		}
		if _, err := p.Exec(ctx); err != nil {
			return result{}, err
		}
	}
	op, err := request(rdb, workload)
	if err != nil {
		return result{}, err
	}
	var done atomic.Int64
	var failed atomic.Value
	lat := make([][]time.Duration, clients)
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for time.Now().Before(stop) {
				start := time.Now()
				if err := op(ctx, key(rng.IntN(keys))); err != nil {
					failed.Store(err)
					return
				}
				lat[c] = append(lat[c], time.Since(start))
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return result{}, err
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	if len(all) == 0 {
		return result{}, errors.New("no request completed")
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return result{rate: float64(done.Load()) / d.Seconds(), p50: all[len(all)/2], p99: all[len(all)*99/100]}, nil
}

func key(k int) string { return fmt.Sprintf("rl:%d", k) }

// request returns one request of the workload on key k.
func request(rdb *goredis.Client, workload string) (func(ctx context.Context, k string) error, error) {
	switch workload {
	case "ratelimit":
		return func(ctx context.Context, k string) error {
			var n *goredis.IntCmd
			var x *goredis.BoolCmd
			_, err := rdb.TxPipelined(ctx, func(p goredis.Pipeliner) error {
				n = p.Incr(ctx, k)
				p.Incr(ctx, k+":b")
				x = p.Expire(ctx, k, time.Minute)
				return nil
			})
			if err == nil && (n.Val() < 1 || !x.Val()) {
				err = fmt.Errorf("MULTI INCR INCR EXPIRE EXEC on %q: INCR %d, EXPIRE %v", k, n.Val(), x.Val())
			}
			return err
		}, nil
	case "multi":
		return func(ctx context.Context, k string) error {
			_, err := rdb.TxPipelined(ctx, func(p goredis.Pipeliner) error {
				p.Incr(ctx, k)
				p.Incr(ctx, k+":b")
				return nil
			})
			return err
		}, nil
	case "incr":
		return func(ctx context.Context, k string) error { return rdb.Incr(ctx, k).Err() }, nil
	case "expire":
		return func(ctx context.Context, k string) error {
			ok, err := rdb.Expire(ctx, k, time.Minute).Result()
			if err == nil && !ok {
				err = fmt.Errorf("EXPIRE of %q found no key", k)
			}
			return err
		}, nil
	}
	fmt.Fprintln(os.Stderr, "txbench: -workload is ratelimit, multi, incr or expire")
	return nil, fmt.Errorf("unknown workload %q", workload)
}
