package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	"github.com/shardcounter/shardcounter/engine"
)

// WorkloadRanking is `shardcounter bench --workload ranking`
// (docs/RANKINGS.md, "Measured"): what keeping a ranking costs the writes
// and what reading it costs, in process on one store, against the hot
// sorted set users would build instead. It is a workload of its own, not
// a Config.Workload: it measures one engine, not paths and peers.
const WorkloadRanking = "ranking"

// RankingConfig is a ranking workload.
type RankingConfig struct {
	Store    shardcounter.CounterStore
	Counters int           // written to, Zipf 1.1
	Clients  int           // concurrent
	Duration time.Duration // of each run
	// Last, when set, ranks by the sum of the trailing Last over counters
	// with 1-minute buckets kept an hour (a trending ranking), instead of
	// by value.
	Last time.Duration
	// Peer runs the mix against Redis too: ZINCRBY on one sorted set for
	// each write, ZREVRANGE 0 9 for each read. PeerRedis is its server
	// (flushed first); empty starts a redis-server of its own with
	// appendfsync always (redis-server on PATH).
	Peer      bool
	PeerRedis string
	Out       io.Writer // the table, a line per run
}

// RankingResult is a ranking workload's figures.
type RankingResult struct {
	// Plain and Ranked are the writes without and with the ranking, each
	// summed over the rounds (ops/s their mean), the latencies empty.
	Plain, Ranked RankingRun
	Mix, Peer     RankingRun
	Rounds        [][2]RankingRun // each round's run without, then with
	Seed          time.Duration   // the seeding scan
}

// RankingRun is one run's figures.
type RankingRun struct {
	Name      string
	OpsPerSec float64
	TopP50    time.Duration // of top-10 reads; 0 without reads
	TopP99    time.Duration
	// Staleness is the oldest as_of a read returned, behind the moment
	// the read began.
	Staleness time.Duration
	Errors    int64
	// The counters the ranking's refreshes moved by their commits' deltas,
	// read from the store, and read holding their commits back, during
	// the run (engine.Stats).
	Deltas, Reads, Blocked int64
}

// rankingRounds is how many times the runs without and with the ranking
// alternate: on a shared machine one pair can differ by more than the
// ranking costs.
const rankingRounds = 3

// Ranking runs the workload: +1 writes to cfg.Counters counters (Zipf
// 1.1) through an engine that keeps no ranking and through one that
// keeps a ranking of their prefix, alternately, rankingRounds times; then
// 90% such writes and 10% top-10 reads; then the peer's mix. The two
// engines share the store, and the ranking engine never hears of the
// other's writes: its list is then not exact, which changes nothing of
// what keeping it costs.
func Ranking(ctx context.Context, cfg RankingConfig) (*RankingResult, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("bench: ranking: no store")
	case cfg.Counters < 2 || cfg.Clients < 1 || cfg.Duration <= 0:
		return nil, errors.New("bench: ranking: give 2 counters or more, and positive clients and duration")
	case cfg.Last < 0 || cfg.Last%time.Minute != 0 || cfg.Last > time.Hour:
		return nil, fmt.Errorf("bench: ranking: last %v: give whole minutes up to 1h (the counters keep 1-minute buckets an hour), or 0", cfg.Last)
	}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	plain, err := engine.New(cfg.Store, engine.Config{})
	if err != nil {
		return nil, err
	}
	defer plain.Close(ctx)
	e, err := engine.New(cfg.Store, engine.Config{})
	if err != nil {
		return nil, err
	}
	defer e.Close(ctx)
	prefix := fmt.Sprintf("rb%x:", time.Now().UnixNano())
	ids := make([]string, cfg.Counters)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%07d", prefix, i)
	}
	if err := rankPrefill(ctx, plain, ids, cfg.Last > 0); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "# ranking: %d counters (Zipf 1.1), %d clients, %s a run, ranking by %s\n", cfg.Counters, cfg.Clients, cfg.Duration, rankedBy(cfg.Last))
	fmt.Fprintf(out, "%-28s %12s %10s %10s %14s\n", "run", "ops/s", "top p50", "top p99", "max staleness")
	rankRun(cfg.Clients, cfg.Duration/2, ids, 0, plain.WriteCounter, nil) // warm-up, not reported
	const name = "bench-ranking"
	if _, _, err := e.CreateRanking(ctx, name, shardcounter.RankingOptions{Prefix: prefix, Size: 1000, Last: shardcounter.Duration(cfg.Last)}); err != nil {
		return nil, err
	}
	defer e.DeleteRanking(context.WithoutCancel(ctx), name)
	res := &RankingResult{}
	start := time.Now()
	if _, err := e.Top(ctx, name, 10); err != nil { // the seeding scan
		return nil, err
	}
	res.Seed = time.Since(start)
	fmt.Fprintf(out, "# seeding the ranking (a scan of %d counters) took %s\n", cfg.Counters, res.Seed.Round(time.Millisecond))
	top := func(ctx context.Context) (time.Time, error) {
		t, err := e.Top(ctx, name, 10)
		if err != nil {
			return time.Time{}, err
		}
		return t.AsOf, nil
	}
	ranked := func(readRatio float64) RankingRun {
		st := e.Stats()
		d, r, b := st.RankingDeltas.Load(), st.RankingReads.Load(), st.RankingBlocked.Load()
		got := rankRun(cfg.Clients, cfg.Duration, ids, readRatio, e.WriteCounter, top)
		got.Deltas, got.Reads, got.Blocked = st.RankingDeltas.Load()-d, st.RankingReads.Load()-r, st.RankingBlocked.Load()-b
		return got
	}
	for i := range rankingRounds {
		p := rankRun(cfg.Clients, cfg.Duration, ids, 0, plain.WriteCounter, nil)
		p.Name = fmt.Sprintf("writes, no ranking (%d)", i+1)
		writeRankingRun(out, p)
		r := ranked(0)
		r.Name = fmt.Sprintf("writes, with the ranking (%d)", i+1)
		writeRankingRun(out, r)
		res.Rounds = append(res.Rounds, [2]RankingRun{p, r})
		res.Plain.add(p, rankingRounds)
		res.Ranked.add(r, rankingRounds)
	}
	fmt.Fprintf(out, "# writes with the ranking / without, over the %d rounds: %.2fx\n", rankingRounds, res.Ranked.OpsPerSec/res.Plain.OpsPerSec)
	res.Mix = ranked(0.1)
	res.Mix.Name = "90% writes, 10% top 10"
	writeRankingRun(out, res.Mix)
	if cfg.Peer {
		p, err := rankPeer(ctx, cfg, ids)
		if err != nil {
			return res, err
		}
		p.Name = "redis ZINCRBY/ZREVRANGE"
		res.Peer = p
		writeRankingRun(out, p)
		fmt.Fprintf(out, "# mix: shardcounter / redis sorted set: %.2fx\n", res.Mix.OpsPerSec/p.OpsPerSec)
	}
	return res, nil
}

// add counts r as one of n runs of a sum.
func (s *RankingRun) add(r RankingRun, n int) {
	s.OpsPerSec += r.OpsPerSec / float64(n)
	s.Errors += r.Errors
	s.Deltas += r.Deltas
	s.Reads += r.Reads
	s.Blocked += r.Blocked
}

func rankedBy(last time.Duration) string {
	if last > 0 {
		return "the sum of the last " + shardcounter.Duration(last).String() + " of 1m buckets"
	}
	return "value"
}

// rankPrefill writes 1 to every counter, creating it, prefillBatchSize
// a batch; windowed counters are created first, with 1-minute buckets kept
// an hour.
func rankPrefill(ctx context.Context, e *engine.Engine, ids []string, windowed bool) error {
	var failed atomic.Pointer[error]
	fail := func(err error) { failed.CompareAndSwap(nil, &err) }
	var wg sync.WaitGroup
	if windowed {
		w := &shardcounter.Window{Bucket: shardcounter.BucketMinute, Retention: shardcounter.Duration(time.Hour)}
		for c := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := c; i < len(ids) && failed.Load() == nil; i += 16 {
					if _, _, err := e.CreateCounter(ctx, ids[i], shardcounter.CreateOptions{Shards: 1, Window: w}); err != nil {
						fail(err)
					}
				}
			}()
		}
		wg.Wait()
	}
	sem := make(chan struct{}, 4)
	for i := 0; i < len(ids) && failed.Load() == nil; i += prefillBatchSize {
		ws := make([]shardcounter.Write, 0, prefillBatchSize)
		for _, id := range ids[i:min(i+prefillBatchSize, len(ids))] {
			ws = append(ws, shardcounter.Write{Counter: id, Delta: 1})
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := prefillBatch(ctx, e, ws); err != nil {
				fail(err)
			}
		}()
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		return fmt.Errorf("bench: ranking: prefill: %w", *p)
	}
	return nil
}

// prefillBatchSize is the writes of one prefill batch: small enough that
// a commit of 4 of them fits a loaded Redis store's timeouts.
const prefillBatchSize = 250

// prefillBatch writes ws, again those that failed (a loaded store times
// some out), so that every counter exists before the clock starts: the
// ranking is seeded with them all.
func prefillBatch(ctx context.Context, e *engine.Engine, ws []shardcounter.Write) error {
	for try := 0; ; try++ {
		rs, err := e.WriteBatch(ctx, ws)
		if err != nil {
			return err
		}
		var again []shardcounter.Write
		var last *shardcounter.Error
		for i, r := range rs {
			if r.Error != nil {
				again, last = append(again, ws[i]), r.Error
			}
		}
		if len(again) == 0 {
			return nil
		}
		if try == 10 {
			return fmt.Errorf("%d writes failed 10 times, the last with %s", len(again), last.Message)
		}
		ws = again
		time.Sleep(time.Duration(try+1) * 100 * time.Millisecond) // a loaded store's commits time out: let it catch up
	}
}

func writeRankingRun(out io.Writer, r RankingRun) {
	p50, p99, stale := "-", "-", "-"
	if r.TopP99 > 0 {
		p50, p99 = r.TopP50.Round(10*time.Nanosecond).String(), r.TopP99.Round(10*time.Nanosecond).String()
	}
	if r.Staleness > 0 {
		stale = r.Staleness.Round(time.Millisecond).String()
	}
	fmt.Fprintf(out, "%-28s %12.0f %10s %10s %14s\n", r.Name, r.OpsPerSec, p50, p99, stale)
	if r.Errors > 0 {
		fmt.Fprintf(out, "# %s: %d errors\n", r.Name, r.Errors)
	}
	if r.Deltas+r.Reads > 0 {
		fmt.Fprintf(out, "#   its refreshes moved %d counters by their deltas and read %d from the store (%d holding their commits back)\n", r.Deltas, r.Reads, r.Blocked)
	}
}

// rankRun has clients write to Zipf-picked counters (and, with
// readRatio, read the top instead) for d.
func rankRun(clients int, d time.Duration, ids []string, readRatio float64,
	write func(context.Context, shardcounter.Write) (*shardcounter.WriteResult, error),
	top func(context.Context) (time.Time, error)) RankingRun {
	var ops, errs atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var res RankingRun
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			zipf := rand.NewZipf(rng, 1.1, 1, uint64(len(ids)-1))
			var mine []time.Duration
			var stale time.Duration
			ctx := context.Background()
			for time.Now().Before(deadline) {
				if top != nil && readRatio > 0 && rng.Float64() < readRatio {
					began := time.Now()
					asOf, err := top(ctx)
					mine = append(mine, time.Since(began))
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
			lat = append(lat, mine...)
			res.Staleness = max(res.Staleness, stale)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(lat) > 0 {
		slices.Sort(lat)
		res.TopP50, res.TopP99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	res.OpsPerSec = float64(ops.Load()) / d.Seconds()
	res.Errors = errs.Load()
	return res
}

// rankPeer runs the mix on Redis: ZINCRBY of one sorted set per write,
// ZREVRANGE 0 9 per read.
func rankPeer(ctx context.Context, cfg RankingConfig, ids []string) (RankingRun, error) {
	url := cfg.PeerRedis
	if url == "" {
		u, stop, err := startRedis()
		if err != nil {
			return RankingRun{}, err
		}
		defer stop()
		url = u
	}
	opts, err := goredis.ParseURL(url)
	if err != nil {
		return RankingRun{}, fmt.Errorf("bench: ranking peer: %w", err)
	}
	opts.PoolSize = cfg.Clients
	rdb := goredis.NewClient(opts)
	defer rdb.Close()
	const board = "bench-ranking-board"
	if err := rdb.Del(ctx, board).Err(); err != nil {
		return RankingRun{}, fmt.Errorf("bench: ranking peer: %w", err)
	}
	pipe := rdb.Pipeline()
	for _, id := range ids {
		pipe.ZIncrBy(ctx, board, 1, id)
		if pipe.Len() == 1000 {
			if _, err := pipe.Exec(ctx); err != nil {
				return RankingRun{}, err
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return RankingRun{}, err
	}
	defer rdb.Del(context.WithoutCancel(ctx), board)
	write := func(ctx context.Context, w shardcounter.Write) (*shardcounter.WriteResult, error) {
		return nil, rdb.ZIncrBy(ctx, board, float64(w.Delta), w.Counter).Err()
	}
	top := func(ctx context.Context) (time.Time, error) {
		now := time.Now()
		return now, rdb.ZRevRangeWithScores(ctx, board, 0, 9).Err()
	}
	return rankRun(cfg.Clients, cfg.Duration, ids, 0.1, write, top), nil
}

// startRedis starts a redis-server of its own (append-only file,
// appendfsync always; its files in the temporary directory, where a
// default --store keeps its own) on a free loopback port and returns its
// URL and its stop. The ranking and limit workloads' peers use it.
func startRedis() (string, func(), error) {
	dir, err := os.MkdirTemp("", "bench-redis")
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--logfile", filepath.Join(dir, "log"))
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("bench: peer: start redis-server: %w", err)
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait(); os.RemoveAll(dir) }
	url := fmt.Sprintf("redis://127.0.0.1:%d", port)
	opts, _ := goredis.ParseURL(url)
	rdb := goredis.NewClient(opts)
	defer rdb.Close()
	for i := 0; rdb.Ping(context.Background()).Err() != nil; i++ {
		if i > 100 {
			stop()
			return "", nil, errors.New("bench: peer: redis-server did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return url, stop, nil
}
