// Command pfadd is the PFADD benchmark of scripts/bench-pfadd.sh: CLIENTS
// connections send PFADD KEY ele:i for every i below N, each i once (so
// the truth is N distinct members), one command per round trip, then
// PFCOUNT KEY is compared with N. The same program drives shardcounter's
// RESP port and redis-server, so the ratio of their rates is the
// servers'.
//
//	go run ./scripts/pfadd -addr 127.0.0.1:6379 -n 1000000 -c 64 -key hll
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter/sketch"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "the server")
	n := flag.Int("n", 1_000_000, "distinct members added")
	clients := flag.Int("c", 64, "connections")
	key := flag.String("key", "hll", "the key")
	flag.Parse()
	if err := run(*addr, *key, *n, *clients); err != nil {
		fmt.Fprintln(os.Stderr, "pfadd:", err)
		os.Exit(1)
	}
}

func run(addr, key string, n, clients int) error {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: clients, MinIdleConns: clients, Protocol: 2})
	defer rdb.Close()
	if err := rdb.Del(ctx, key).Err(); err != nil {
		return err
	}
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := rdb.PFAdd(ctx, key, "ele:"+strconv.FormatInt(i, 10)).Err(); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	est, err := rdb.PFCount(ctx, key).Result()
	if err != nil {
		return err
	}
	rel := float64(est-int64(n)) / float64(n)
	fmt.Printf("addr=%s members=%d clients=%d seconds=%.1f rps=%.0f estimate=%d error=%+.4f%% within_3se=%v\n",
		addr, n, clients, took.Seconds(), float64(n)/took.Seconds(), est, 100*rel, math.Abs(rel) <= 3*sketch.StdError)
	return nil
}
