package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/internal/shard"
	"github.com/shardcounter/shardcounter/storetest"
)

// commitLog wraps a store and records, for each Apply, the time and the
// shards each counter's increments went to.
type commitLog struct {
	shardcounter.CounterStore
	mu      sync.Mutex
	commits map[string][]time.Time // "counter/shard" → commit times
}

func (c *commitLog) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	out, err := c.CounterStore.Apply(ctx, incs)
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[string]bool)
	for i, inc := range incs {
		if err != nil || out[i].Err != nil {
			continue
		}
		pick := inc.Pick
		if inc.Member != "" {
			pick = shard.ForMember(inc.Member)
		}
		k := fmt.Sprintf("%s/%d", inc.Counter, shard.Of(pick, 4))
		if !seen[k] {
			seen[k] = true
			c.commits[k] = append(c.commits[k], time.Now())
		}
	}
	return out, err
}

// TestShardWriteInterval hammers two counters of 4 shards from many
// writers with pacing at 1s: every write is answered and counted, no
// shard is committed twice within a second, and the shards take turns,
// so a counter commits every quarter second, not once a second.
func TestShardWriteInterval(t *testing.T) {
	store := MustOpenStore(t)
	for _, id := range []string{"hot", "warm"} {
		storetest.MustCreate(t, store, id, 4)
	}
	log := &commitLog{CounterStore: store, commits: make(map[string][]time.Time)}
	var answered time.Duration
	synctest.Test(t, func(t *testing.T) {
		e := MustStart(t, log, engine.Config{ShardWriteInterval: time.Second})
		defer e.Close(context.Background())
		start := time.Now()
		var wg sync.WaitGroup
		for w := range 32 {
			wg.Go(func() {
				id := "hot"
				if w%4 == 0 {
					id = "warm"
				}
				for i := range 10 {
					wr := shardcounter.Write{Counter: id, Delta: 1}
					if i == 9 {
						wr.RequestID = fmt.Sprintf("r%d", w) // pinned to its shard
					}
					if _, err := e.WriteCounter(context.Background(), wr); err != nil {
						t.Errorf("write: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		answered = time.Since(start)
	})
	if got := storetest.MustRead(t, store, "hot") + storetest.MustRead(t, store, "warm"); got != 320 {
		t.Fatalf("hot + warm = %d, want 320: every write counted once", got)
	}
	hot := 0
	for k, ts := range log.commits {
		for i := 1; i < len(ts); i++ {
			if gap := ts[i].Sub(ts[i-1]); gap < time.Second {
				t.Errorf("shard %s committed %v after its previous commit, want at least 1s apart", k, gap)
			}
		}
		if len(k) > 3 && k[:3] == "hot" {
			hot += len(ts)
		}
	}
	// 240 writes to hot: with 4 shards taking turns, a commit every 250ms.
	if secs := answered.Seconds(); float64(hot) < 3.5*secs-4 {
		t.Errorf("hot had %d commits in %.1fs of pacing at 1s over 4 shards: the shards do not take turns", hot, secs)
	}
	t.Logf("%d commits of hot in %v", hot, answered)
}

// TestPacedTxnCommitsWhole checks that pacing never cuts a transaction (a
// run of writes joined by JoinNext): a MULTI writing a counter whose one
// shard was just committed and an idle counter, with an EXPIRE of the
// idle one, waits for the busy counter's shard and goes in one commit,
// its deadline change with it, rather than the idle counter's part now
// and the rest a second later.
func TestPacedTxnCommitsWhole(t *testing.T) {
	store := &recordingApplies{CounterStore: MustOpenStore(t), in: make(map[string]int)}
	for _, id := range []string{"busy", "idle", "warm"} {
		storetest.MustCreate(t, store, id, 1)
	}
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := MustStart(t, store, engine.Config{ShardWriteInterval: time.Second})
		defer e.Close(ctx)
		// The store's first deadline writes the marker that deadlines are
		// in use, in a commit of its own before it (expiry).
		if ok, err := e.ExpireCounter(ctx, "warm", time.Now().Add(time.Hour)); err != nil || !ok {
			t.Fatalf("EXPIRE warm: %v, %v; want true", ok, err)
		}
		if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "busy", Delta: 1}); err != nil {
			t.Fatal(err)
		}
		store.mu.Lock()
		before := store.applies
		store.mu.Unlock()
		ws := []shardcounter.Write{
			{Counter: "busy", Delta: 1, JoinNext: true},
			{Counter: "idle", Delta: 1, JoinNext: true},
			{Counter: "idle", Expire: &shardcounter.ExpireChange{At: time.Now().Add(time.Hour).UnixMilli()}},
		}
		res, err := e.WriteBatch(ctx, ws)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Error != nil || !r.Applied {
				t.Fatalf("write %d (%+v): %+v", i, ws[i], r)
			}
		}
		store.mu.Lock()
		defer store.mu.Unlock()
		if n := store.applies - before; n != 1 || store.in["busy"] != store.in["idle"] {
			t.Fatalf("a paced transaction took %d store commits (busy in %d, idle in %d), want 1", n, store.in["busy"], store.in["idle"])
		}
	})
}
