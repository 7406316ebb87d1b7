// Command respbench is a load generator for the Redis protocol: go-redis
// clients sending the patterns redis-benchmark cannot (a MULTI/EXEC
// transaction, keys drawn from a Zipf distribution) to any RESP address,
// shardcounter's port or a redis-server alike, so that both are measured
// by one client in one session. scripts/bench-resp-patterns.sh and
// scripts/bench-expire.sh start the servers and run it; docs/RESP.md
// quotes the figures.
//
// Workloads (-workload):
//
//   - tx-incr2: MULTI, INCR k1, INCR k2, EXEC, k1 and k2 two different keys
//     drawn uniformly from -keys keys: one transaction of two increments.
//   - hincrby: HINCRBY post:N likes 1, N drawn from 0..-fields−1 with a Zipf
//     distribution of exponent -zipf (rank 0 the hottest): per-object
//     counters in hashes.
//   - hincrby-fields: HINCRBY likes N 1, N as hincrby's: the counters
//     as fields of one hash.
//   - incr: INCR k, k uniform over -keys keys, for reference.
//   - ratelimit: MULTI, INCR k, INCR k:b, EXPIRE k 60, EXEC, k uniform
//     over -keys keys: the rate-limit pattern (scripts/bench-expire.sh).
//   - multi: the same transaction without its EXPIRE, which shows what
//     the transaction costs apart from its deadline.
//   - expire: EXPIRE k 60 of keys that exist (each made by INCR first).
//
// Each of -clients clients has a connection of its own and sends one
// operation at a time. It prints one line: operations a second, the p50
// and p99 latency of an operation, and how many failed.
//
//	go run ./cmd/respbench -addr 127.0.0.1:6379 -workload hincrby -fields 1000000 -duration 5s
//
// Its figures depend on the machine; they are measurements, not tests.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "the RESP `address` to load")
	name := flag.String("name", "", "the target's name in the output (default: the address)")
	workload := flag.String("workload", "tx-incr2", "tx-incr2, hincrby, hincrby-fields, incr, ratelimit, multi or expire")
	clients := flag.Int("clients", 64, "concurrent clients, a connection each")
	duration := flag.Duration("duration", 5*time.Second, "the run's length")
	keys := flag.Int("keys", 1000, "keys of tx-incr2 and incr, drawn uniformly")
	fields := flag.Int("fields", 1_000_000, "hashes of hincrby (post:0 ... post:N-1), fields of hincrby-fields")
	zipf := flag.Float64("zipf", 1.1, "the Zipf exponent of hincrby (> 1)")
	prefix := flag.String("prefix", "rb:", "prefix of every key, so runs need not share keys")
	flag.Parse()
	if *name == "" {
		*name = *addr
	}
	newOp, err := operation(*workload, *prefix, *keys, *fields, *zipf)
	if err != nil {
		log.Fatal(err)
	}
	if *workload == "expire" { // EXPIRE sets a deadline only on a key that exists
		if err := makeKeys(*addr, *prefix, *keys); err != nil {
			log.Fatalf("%s: %v", *addr, err)
		}
	}
	r := run(*addr, *clients, *duration, newOp)
	fmt.Printf("%-28s %-9s %9.0f ops/s  p50 %7.2f ms  p99 %7.2f ms  errors %d  (%d clients, %s)\n",
		*name, *workload, r.rate, ms(r.p50), ms(r.p99), r.errors, *clients, *duration)
	if r.firstErr != nil {
		fmt.Printf("  first error: %v\n", r.firstErr)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// op sends one operation on c.
type op func(ctx context.Context, c *goredis.Client) error

// operation returns the workload's operations: a maker of one client's,
// drawing its keys from the client's rng.
func operation(workload, prefix string, keys, fields int, s float64) (func(rng *rand.Rand) op, error) {
	switch workload {
	case "tx-incr2":
		return func(rng *rand.Rand) op {
			return func(ctx context.Context, c *goredis.Client) error {
				i := rng.IntN(keys)
				j := (i + 1 + rng.IntN(keys-1)) % keys // another key
				_, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
					p.Incr(ctx, prefix+strconv.Itoa(i))
					p.Incr(ctx, prefix+strconv.Itoa(j))
					return nil
				})
				return err
			}
		}, nil
	case "incr":
		return func(rng *rand.Rand) op {
			return func(ctx context.Context, c *goredis.Client) error {
				return c.Incr(ctx, prefix+strconv.Itoa(rng.IntN(keys))).Err()
			}
		}, nil
	case "hincrby":
		if s <= 1 {
			return nil, fmt.Errorf("-zipf %v: the exponent must be > 1", s)
		}
		return func(rng *rand.Rand) op {
			z := rand.NewZipf(rng, s, 1, uint64(fields-1))
			return func(ctx context.Context, c *goredis.Client) error {
				return c.HIncrBy(ctx, prefix+"post:"+strconv.FormatUint(z.Uint64(), 10), "likes", 1).Err()
			}
		}, nil
	case "hincrby-fields":
		if s <= 1 {
			return nil, fmt.Errorf("-zipf %v: the exponent must be > 1", s)
		}
		return func(rng *rand.Rand) op {
			z := rand.NewZipf(rng, s, 1, uint64(fields-1))
			return func(ctx context.Context, c *goredis.Client) error {
				return c.HIncrBy(ctx, prefix+"likes", strconv.FormatUint(z.Uint64(), 10), 1).Err()
			}
		}, nil
	}
	if op := expiryOperation(workload, prefix, keys); op != nil {
		return op, nil
	}
	return nil, fmt.Errorf("unknown workload %q: tx-incr2, hincrby, hincrby-fields, incr, ratelimit, multi or expire", workload)
}

// expiryOperation returns the workloads of deadlines: ratelimit, multi
// and expire; nil for another.
func expiryOperation(workload, prefix string, keys int) func(rng *rand.Rand) op {
	switch workload {
	case "ratelimit", "multi":
		expire := workload == "ratelimit"
		return func(rng *rand.Rand) op {
			return func(ctx context.Context, c *goredis.Client) error {
				k := prefix + strconv.Itoa(rng.IntN(keys))
				var n *goredis.IntCmd
				var x *goredis.BoolCmd
				_, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
					n = p.Incr(ctx, k)
					p.Incr(ctx, k+":b")
					if expire {
						x = p.Expire(ctx, k, time.Minute)
					}
					return nil
				})
				switch {
				case err != nil:
				case n.Val() < 1:
					err = fmt.Errorf("INCR %q in a transaction answered %d", k, n.Val())
				case expire && !x.Val():
					err = fmt.Errorf("EXPIRE %q in a transaction found no key", k)
				}
				return err
			}
		}
	case "expire":
		return func(rng *rand.Rand) op {
			return func(ctx context.Context, c *goredis.Client) error {
				k := prefix + strconv.Itoa(rng.IntN(keys))
				ok, err := c.Expire(ctx, k, time.Minute).Result()
				if err == nil && !ok {
					err = fmt.Errorf("EXPIRE of %q found no key", k)
				}
				return err
			}
		}
	}
	return nil
}

// makeKeys makes every key of the expire workload, with INCR.
func makeKeys(addr, prefix string, keys int) error {
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, Protocol: 2})
	defer c.Close()
	p := c.Pipeline()
	for k := range keys {
		p.Incr(ctx, prefix+strconv.Itoa(k))
	}
	_, err := p.Exec(ctx)
	return err
}

type result struct {
	rate     float64
	p50, p99 time.Duration
	errors   int64
	firstErr error
}

// run runs op from clients clients for d and measures it.
func run(addr string, clients int, d time.Duration, newOp func(rng *rand.Rand) op) result {
	ctx := context.Background()
	var errs atomic.Int64
	var firstErr atomic.Pointer[error]
	lats := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for i := range clients {
		c := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1, Protocol: 2})
		defer c.Close()
		if err := c.Ping(ctx).Err(); err != nil {
			log.Fatalf("%s: %v", addr, err)
		}
		op := newOp(rand.New(rand.NewPCG(uint64(i)+1, uint64(time.Now().UnixNano()))))
		wg.Go(func() {
			for {
				t := time.Now()
				if !t.Before(end) {
					return
				}
				err := op(ctx, c)
				lats[i] = append(lats[i], time.Since(t))
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	all := slices.Concat(lats...)
	slices.Sort(all)
	r := result{errors: errs.Load()}
	if p := firstErr.Load(); p != nil {
		r.firstErr = *p
	}
	if len(all) > 0 {
		r.rate = float64(len(all)) / took.Seconds()
		r.p50, r.p99 = all[len(all)/2], all[len(all)*99/100]
	}
	return r
}
