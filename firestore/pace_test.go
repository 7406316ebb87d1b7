package firestore_test

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

	gfs "cloud.google.com/go/firestore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestPaceAcrossServers runs three servers (a store and an engine each,
// pacing at one interval) on one database, with clients writing one
// counter through all three, while a poller reads the shard documents'
// update times and stamps (sc_by): no two commits of one document by two
// servers may come less than 0.8 of an interval apart (the store's pace
// across servers; one server's own are the engine's, logged as the
// shortest gap of all), and the counter is exact afterwards.
//
// SHARDCOUNTER_PACE_FIGURES=1 runs the set-up instead (48 clients
// on a 16-shard counter for 25 s, pacing at 1 s), through
// SHARDCOUNTER_PACE_SERVERS servers (default 3), for docs/FIRESTORE.md:
// each client on one server (as a client keeping its connection), or,
// with SHARDCOUNTER_PACE_ROUTE=any, each write to a server picked at
// random (as a load balancer spreading requests).
func TestPaceAcrossServers(t *testing.T) {
	interval, servers, clients, shards, run := 400*time.Millisecond, 3, 4, 4, 4*time.Second
	if os.Getenv("SHARDCOUNTER_PACE_FIGURES") != "" {
		interval, clients, shards, run = time.Second, 48, 16, 25*time.Second
		if n, err := strconv.Atoi(os.Getenv("SHARDCOUNTER_PACE_SERVERS")); err == nil && n > 0 {
			servers = n
		}
		clients /= servers
	}
	ctx := context.Background()
	project := firestoretest.Project(t)
	var commits atomic.Int64
	var engs []*engine.Engine
	for range servers {
		s, err := firestore.New(ctx, project, "", firestore.Options{ShardWriteInterval: interval})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		s.OnShardCommit(func(string, int) { commits.Add(1) })
		e, err := engine.New(s, engine.Config{ShardWriteInterval: interval})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close(context.Background()) })
		engs = append(engs, e)
	}
	id := t.Name() + fmt.Sprint(time.Now().UnixNano())
	storetest.MustCreate(t, engs[0].Store(), id, shards)
	// The create commits every shard document, unpaced (the engine paces
	// writes): the writes begin an interval later, as on a counter that
	// was there before.
	time.Sleep(interval)
	commits.Store(0)

	raw, err := gfs.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	counter := raw.Collection("counters").Doc(firestore.Escape(id))
	var refs []*gfs.DocumentRef
	for i := range shards {
		refs = append(refs, counter.Collection("shards").Doc(fmt.Sprint(i)))
	}
	type commit struct {
		at time.Time
		by any
	}
	seen := make([][]commit, shards)
	done := make(chan struct{})
	var poll sync.WaitGroup
	poll.Go(func() {
		for {
			snaps, err := raw.GetAll(ctx, refs)
			if err != nil {
				t.Errorf("poll: %v", err)
				return
			}
			for i, sn := range snaps {
				if n := len(seen[i]); n == 0 || !seen[i][n-1].at.Equal(sn.UpdateTime) {
					seen[i] = append(seen[i], commit{sn.UpdateTime, sn.Data()["sc_by"]})
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
					if _, err := to.WriteCounter(ctx, shardcounter.Write{Counter: id, Delta: 1}); err != nil {
						t.Errorf("WriteCounter: %v", err)
						return
					}
					applied.Add(1)
				}
			})
		}
	}
	wg.Wait()
	close(done)
	poll.Wait()

	total, shortest, own := 0, time.Duration(0), 0
	for i, ts := range seen {
		slices.SortFunc(ts, func(a, b commit) int { return a.at.Compare(b.at) })
		for j := 1; j < len(ts); j++ {
			gap := ts[j].at.Sub(ts[j-1].at)
			if shortest == 0 || gap < shortest {
				shortest = gap
			}
			if gap < interval*8/10 && ts[j].by == ts[j-1].by {
				own++
			}
			if gap < interval*8/10 && ts[j].by != ts[j-1].by {
				t.Errorf("shard %d: two commits by two servers %v apart (at %v and %v), pacing at %v", i, gap, ts[j-1].at, ts[j].at, interval)
			}
		}
		total += len(ts)
	}
	if got := storetest.MustRead(t, engs[0].Store(), id); got != applied.Load() {
		t.Errorf("value %d, but %d writes were applied", got, applied.Load())
	}
	route := "each client on one server"
	if anyServer {
		route = "each write to any server"
	}
	t.Logf("%s: %d writes through %d servers, %d clients each, %d shards, pacing %v: %d shard-document commits (%.3f a write); %d update times seen by polling, the shortest gap %v; %d gaps under 0.8 of the interval between two commits of one server",
		route, applied.Load(), servers, clients, shards, interval, commits.Load(), float64(commits.Load())/float64(applied.Load()), total, shortest, own)
}
