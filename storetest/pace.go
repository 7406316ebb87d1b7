package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// PacedStore is a store RunPaceAcrossServers runs servers on: it counts
// its shard document commits, and adds to one shard (the seed's
// increment, as a batch of one).
type PacedStore interface {
	shardcounter.CounterStore
	OnShardCommit(func(counter string, shard int))
	Add(ctx context.Context, id string, delta int64, pick uint64) error
}

// PaceCommit is a shard document's last commit as a poll saw it: when,
// by the store's record of it (zero when it has none: not counted), and
// by which store (its stamp).
type PaceCommit struct {
	At time.Time
	By any
}

// PaceOptions are a store's hooks for RunPaceAcrossServers.
type PaceOptions struct {
	// Open opens a server's store on the database all the servers
	// share, pacing at interval.
	Open func(tb testing.TB, interval time.Duration) PacedStore
	// Poll reads the last commit of each of the shards of counter id.
	Poll func(ctx context.Context, id string, shards int) ([]PaceCommit, error)
	// FlushTimeout is the engines' (engine.Config); 0 for the default.
	FlushTimeout time.Duration
}

// RunPaceAcrossServers runs three servers (a store and an engine each,
// pacing at one interval) on one database. First two of the stores add to
// one shard in turn: the second commit must come an interval after the
// first (the second store's own engine never committed the shard: the
// store waits). Then clients write one counter through all three engines, while a poller reads the shard documents'
// commits (when, and which store's): no two commits of one document by
// two servers may come less than 0.8 of an interval apart (the store's
// pace across servers; one server's own are the engine's, logged as the
// shortest gap of all), and the counter is exact afterwards.
//
// SHARDCOUNTER_PACE_FIGURES=1 runs the set-up instead (48 clients
// on a 16-shard counter for 25 s, pacing at 1 s), through
// SHARDCOUNTER_PACE_SERVERS servers (default 3), for docs/FIRESTORE.md:
// each client on one server (as a client keeping its connection), or,
// with SHARDCOUNTER_PACE_ROUTE=any, each write to a server picked at
// random (as a load balancer spreading requests).
func RunPaceAcrossServers(t *testing.T, o PaceOptions) {
	interval, servers, clients, shards, run := 400*time.Millisecond, 3, 4, 4, 4*time.Second
	if os.Getenv("SHARDCOUNTER_PACE_FIGURES") != "" {
		interval, clients, shards, run = time.Second, 48, 16, 25*time.Second
		if n, err := strconv.Atoi(os.Getenv("SHARDCOUNTER_PACE_SERVERS")); err == nil && n > 0 {
			servers = n
		}
		clients /= servers
	}
	ctx := context.Background()
	var commits atomic.Int64
	var engs []*engine.Engine
	var stores []PacedStore
	for range servers {
		s := o.Open(t, interval)
		stores = append(stores, s)
		s.OnShardCommit(func(string, int) { commits.Add(1) })
		e, err := engine.New(s, engine.Config{ShardWriteInterval: interval, FlushTimeout: o.FlushTimeout})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close(context.Background()) })
		engs = append(engs, e)
	}
	id := t.Name() + fmt.Sprint(time.Now().UnixNano())
	MustCreate(t, engs[0].Store(), id, shards)
	// The create commits every shard document, unpaced (the engine paces
	// writes): the writes begin an interval later, as on a counter that
	// was there before.
	time.Sleep(interval)
	var turns []time.Time
	for _, s := range stores[:2] {
		if err := s.Add(ctx, id, 1, 0); err != nil {
			t.Fatal(err)
		}
		last, err := o.Poll(ctx, id, shards)
		if err != nil {
			t.Fatal(err)
		}
		turns = append(turns, last[0].At)
	}
	if gap := turns[1].Sub(turns[0]); gap < interval*8/10 {
		t.Errorf("two stores in turn committed shard 0 %v apart, pacing at %v", gap, interval)
	} else {
		t.Logf("two stores in turn committed shard 0 %v apart, pacing at %v", gap, interval)
	}
	time.Sleep(interval) // the engines start with every shard due
	commits.Store(0)

	seen := make([][]PaceCommit, shards)
	done := make(chan struct{})
	var poll sync.WaitGroup
	poll.Go(func() {
		for {
			last, err := o.Poll(ctx, id, shards)
			if err != nil {
				t.Errorf("poll: %v", err)
				return
			}
			for i, c := range last {
				if n := len(seen[i]); !c.At.IsZero() && (n == 0 || !seen[i][n-1].At.Equal(c.At)) {
					seen[i] = append(seen[i], c)
				}
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})

	var applied atomic.Int64
	var slowMu sync.Mutex
	var slowest time.Duration // the slowest write
	applied.Store(2)          // the two in turn
	var wg sync.WaitGroup
	stop := time.Now().Add(run)
	anyServer := os.Getenv("SHARDCOUNTER_PACE_ROUTE") == "any"
	for _, e := range engs {
		for range clients {
			wg.Go(func() {
				for time.Now().Before(stop) {
					to := e
					if anyServer {
						to = engs[rand.IntN(len(engs))]
					}
					began := time.Now()
					if _, err := to.WriteCounter(ctx, shardcounter.Write{Counter: id, Delta: 1}); err != nil {
						t.Errorf("WriteCounter: %v", err)
						return
					}
					applied.Add(1)
					slowMu.Lock()
					slowest = max(slowest, time.Since(began))
					slowMu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	close(done)
	poll.Wait()

	total, shortest, across, own := 0, time.Duration(0), time.Duration(0), 0
	for i, cs := range seen {
		slices.SortFunc(cs, func(a, b PaceCommit) int { return a.At.Compare(b.At) })
		for j := 1; j < len(cs); j++ {
			gap := cs[j].At.Sub(cs[j-1].At)
			if shortest == 0 || gap < shortest {
				shortest = gap
			}
			if cs[j].By != cs[j-1].By && (across == 0 || gap < across) {
				across = gap
			}
			if gap < interval*8/10 && cs[j].By == cs[j-1].By {
				own++
			}
			if gap < interval*8/10 && cs[j].By != cs[j-1].By {
				t.Errorf("shard %d: two commits by two servers %v apart (at %v and %v), pacing at %v", i, gap, cs[j-1].At, cs[j].At, interval)
			}
		}
		total += len(cs)
	}
	if got := MustRead(t, engs[0].Store(), id); got != applied.Load() {
		t.Errorf("value %d, but %d writes were applied", got, applied.Load())
	}
	route := "each client on one server"
	if anyServer {
		route = "each write to any server"
	}
	t.Logf("%s: %d writes through %d servers, %d clients each, %d shards, pacing %v: %d shard-document commits (%.3f a write); %d commits seen by polling, the shortest gap %v, the shortest between two servers %v; %d gaps under 0.8 of the interval between two commits of one server; the slowest write %v",
		route, applied.Load(), servers, clients, shards, interval, commits.Load(), float64(commits.Load())/float64(applied.Load()), total, shortest, across, own, slowest)
}
