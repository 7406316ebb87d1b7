package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/resp/server"
)

// slowWrites delays every WriteBatch of the service it wraps, so that a
// batch's commit is under way for a while after its claims: the window in
// which a concurrent write of another type to the same new name must be
// refused.
type slowWrites struct {
	shardcounter.CounterService
	delay time.Duration
}

func (s slowWrites) WriteBatch(ctx context.Context, ws []shardcounter.Write) ([]shardcounter.WriteResult, error) {
	time.Sleep(s.delay)
	return s.CounterService.WriteBatch(ctx, ws)
}

// TestFirstWritesOneType sends, for each of many new names, an HINCRBY
// and an INCR at the same moment, on two connections, and checks that
// exactly one of them passes and the other is WRONGTYPE, and that the
// store holds the winner's type only: the field and the marker, or the
// counter. The commits are slowed, so that the second claim is made while
// the first one's commit is under way; both serving modes are tried (on
// goroutines each connection claims on its own, in the loop one batch
// claims for both).
func TestFirstWritesOneType(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		t.Run(fmt.Sprintf("ConnGoroutines=%v", goroutines), func(t *testing.T) {
			eng := MustEngine(t)
			_, addr := MustServe(t, slowWrites{eng, 5 * time.Millisecond}, server.Options{ConnGoroutines: goroutines})
			hashes := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64, MaxRetries: -1})
			plains := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64, MaxRetries: -1})
			t.Cleanup(func() { hashes.Close(); plains.Close() })
			ctx := context.Background()
			const names = 200
			herr := make([]error, names)
			perr := make([]error, names)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range names {
				name := fmt.Sprint("race:", i)
				wg.Go(func() {
					<-start
					if i%2 == 0 {
						time.Sleep(time.Millisecond) // the INCR first, about half the time
					}
					herr[i] = hashes.HIncrBy(ctx, name, "f", 1).Err()
				})
				wg.Go(func() {
					<-start
					perr[i] = plains.Incr(ctx, name).Err()
				})
			}
			close(start)
			wg.Wait()
			wins := map[string]int{}
			for i := range names {
				name := fmt.Sprint("race:", i)
				wrong := func(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE") }
				var winner string
				switch {
				case herr[i] == nil && wrong(perr[i]):
					winner = "hash"
				case perr[i] == nil && wrong(herr[i]):
					winner = "plain"
				default:
					t.Errorf("%s: HINCRBY: %v, INCR: %v; want one to pass and the other WRONGTYPE", name, herr[i], perr[i])
					continue
				}
				wins[winner]++
				_, cerr := eng.GetCounter(ctx, name)
				_, ferr := eng.GetCounter(ctx, shardcounter.HashFieldID(name, "f"))
				_, merr := eng.GetCounter(ctx, shardcounter.HashMarkerID(name))
				for what, err := range map[string]error{"counter": cerr, "field": ferr, "marker": merr} {
					if err != nil && !errors.Is(err, shardcounter.ErrNotFound) {
						t.Fatalf("%s: reading its %s: %v", name, what, err)
					}
				}
				hashHeld := ferr == nil && merr == nil
				if winner == "hash" && (!hashHeld || cerr == nil) || winner == "plain" && (cerr != nil || ferr == nil) {
					t.Errorf("%s: %s won, but the store holds counter %v, field %v, marker %v", name, winner, cerr == nil, ferr == nil, merr == nil)
				}
				if typ, err := plains.Type(ctx, name).Result(); err != nil || typ != map[string]string{"hash": "hash", "plain": "string"}[winner] {
					t.Errorf("%s: TYPE = %q, %v after %s won", name, typ, err, winner)
				}
			}
			t.Logf("winners: %v", wins)
		})
	}
}

// recorder records the WriteBatch calls and counts the CreateCounter
// calls of the service it wraps. drop, when set, keeps hashes' marker
// writes from the service and answers each with an item error, as a
// store that refused them alone would.
type recorder struct {
	shardcounter.CounterService
	mu      sync.Mutex
	batches [][]shardcounter.Write
	creates int
	drop    bool
}

func (r *recorder) WriteBatch(ctx context.Context, ws []shardcounter.Write) ([]shardcounter.WriteResult, error) {
	r.mu.Lock()
	r.batches = append(r.batches, append([]shardcounter.Write(nil), ws...))
	drop := r.drop
	r.mu.Unlock()
	if !drop {
		return r.CounterService.WriteBatch(ctx, ws)
	}
	var kept []shardcounter.Write
	var at []int // of each kept write in ws
	for i, w := range ws {
		if _, f, ok := shardcounter.SplitHashID(w.Counter); ok && f == "" && w.Expire == nil {
			continue
		}
		w.JoinNext = w.JoinNext && i < len(ws)-1
		kept, at = append(kept, w), append(at, i)
	}
	res := make([]shardcounter.WriteResult, len(ws))
	for i := range res {
		res[i] = shardcounter.WriteResult{Counter: ws[i].Counter, Error: &shardcounter.Error{Code: shardcounter.EUNAVAILABLE, Message: "refused by the test"}}
	}
	if len(kept) == 0 {
		return res, nil
	}
	got, err := r.CounterService.WriteBatch(ctx, kept)
	if err != nil {
		return nil, err
	}
	for k, i := range at {
		res[i] = got[k]
	}
	return res, nil
}

func (r *recorder) CreateCounter(ctx context.Context, id string, opts shardcounter.CreateOptions) (*shardcounter.Counter, bool, error) {
	r.mu.Lock()
	r.creates++
	r.mu.Unlock()
	return r.CounterService.CreateCounter(ctx, id, opts)
}

// TestHashMarkerJoined checks how a new hash's marker is made: a write of
// one shard's counter joined to the field's, in the field's WriteBatch,
// and no CreateCounter (a commit of its own); inside a transaction, too.
// Once the name is known, a write to the hash carries no marker. A fresh
// server on the same store then finds the hash by its marker.
func TestHashMarkerJoined(t *testing.T) {
	ctx := context.Background()
	eng := MustEngine(t)
	rec := &recorder{CounterService: eng}
	_, addr := MustServe(t, rec, server.Options{})
	rdb := MustClient(t, addr, 2, "")
	if v, err := rdb.HIncrBy(ctx, "post:1", "likes", 3).Result(); err != nil || v != 3 {
		t.Fatalf("HINCRBY = %d, %v", v, err)
	}
	if v, err := rdb.HIncrBy(ctx, "post:1", "likes", 1).Result(); err != nil || v != 4 {
		t.Fatalf("HINCRBY again = %d, %v", v, err)
	}
	cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, "n")
		p.HIncrBy(ctx, "post:2", "likes", 5)
		return nil
	})
	if err != nil || len(cmds) != 2 || cmds[0].(*redis.IntCmd).Val() != 1 || cmds[1].(*redis.IntCmd).Val() != 5 {
		t.Fatalf("MULTI INCR HINCRBY EXEC = %v, %v", cmds, err)
	}
	rec.mu.Lock()
	batches, creates := rec.batches, rec.creates
	rec.mu.Unlock()
	if creates != 0 {
		t.Errorf("%d CreateCounter calls, want none: the marker goes in the field's batch", creates)
	}
	m1, f1 := shardcounter.HashMarkerID("post:1"), shardcounter.HashFieldID("post:1", "likes")
	m2, f2 := shardcounter.HashMarkerID("post:2"), shardcounter.HashFieldID("post:2", "likes")
	type w struct {
		counter string
		join    bool
	}
	want := [][]w{{{m1, true}, {f1, false}}, {{f1, false}}, {{"n", true}, {m2, true}, {f2, false}}}
	if len(batches) != len(want) {
		t.Fatalf("%d batches: %v; want %d", len(batches), batches, len(want))
	}
	for i, b := range batches {
		got := make([]w, len(b))
		for j, x := range b {
			got[j] = w{x.Counter, x.JoinNext}
		}
		if fmt.Sprint(got) != fmt.Sprint(want[i]) {
			t.Errorf("batch %d = %+v, want %+v", i, got, want[i])
		}
	}
	for _, m := range []string{m1, m2} {
		if c, err := eng.GetCounter(ctx, m); err != nil || c.Shards != 1 {
			t.Errorf("marker %q: %+v, %v; want a counter of one shard", m, c, err)
		}
	}
	// A server that has not met the names asks the store.
	_, addr2 := MustServe(t, eng, server.Options{})
	rdb2 := MustClient(t, addr2, 2, "")
	for _, name := range []string{"post:1", "post:2"} {
		wantPrefix(t, "INCR on "+name+" from a fresh server", rdb2.Incr(ctx, name).Err(), "WRONGTYPE")
		if typ, err := rdb2.Type(ctx, name).Result(); err != nil || typ != "hash" {
			t.Errorf("TYPE %s = %q, %v", name, typ, err)
		}
	}
}

// TestHashMarkerFallback has the service refuse a new hash's marker write
// alone while it applies the field's: the server then makes the marker
// on its own, so that the store never holds the field without it.
func TestHashMarkerFallback(t *testing.T) {
	ctx := context.Background()
	eng := MustEngine(t)
	rec := &recorder{CounterService: eng, drop: true}
	_, addr := MustServe(t, rec, server.Options{})
	rdb := MustClient(t, addr, 2, "")
	if v, err := rdb.HIncrBy(ctx, "post:1", "likes", 2).Result(); err != nil || v != 2 {
		t.Fatalf("HINCRBY = %d, %v", v, err)
	}
	rec.mu.Lock()
	creates := rec.creates
	rec.mu.Unlock()
	if creates != 1 {
		t.Errorf("%d CreateCounter calls, want 1: the marker's, after its write failed", creates)
	}
	if _, err := eng.GetCounter(ctx, shardcounter.HashMarkerID("post:1")); err != nil {
		t.Errorf("the marker: %v", err)
	}
	_, addr2 := MustServe(t, eng, server.Options{})
	wantPrefix(t, "INCR on the hash from a fresh server", MustClient(t, addr2, 2, "").Incr(ctx, "post:1").Err(), "WRONGTYPE")
}

// TestNewHashesOneShardCluster writes new hashes whose fields are
// counters of one shard on a Redis Cluster of three masters: a field and
// its marker then often live on two masters, which no one transaction
// spans, so the joined write of the two is refused whole (CROSSSLOT).
// The server then makes the marker on its own and writes the field again:
// each HINCRBY passes, and each hash has its marker.
func TestNewHashesOneShardCluster(t *testing.T) {
	ctx := context.Background()
	eng, _ := clusterEngine(t, 1)
	_, addr := MustServe(t, eng, server.Options{})
	rdb := MustClient(t, addr, 2, "")
	for i := range 24 {
		name := fmt.Sprint("post:", i)
		if v, err := rdb.HIncrBy(ctx, name, "likes", 2).Result(); err != nil || v != 2 {
			t.Errorf("HINCRBY %s = %d, %v; want 2", name, v, err)
			continue
		}
		if _, err := eng.GetCounter(ctx, shardcounter.HashMarkerID(name)); err != nil {
			t.Errorf("%s's marker: %v", name, err)
		}
	}
}
