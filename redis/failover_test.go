package redis_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/internal/redistest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestFailoverWait is invariant 11 of the design: with wait_replicas, a
// write acknowledged on Redis survives the failover of its master. On 3
// masters with a replica each, writers add 1s through the engine (group
// commit, durable) to counters spread over every master; one master is
// killed (SIGKILL) under that load, its replica takes over, and the
// writers go on until writes succeed again. Every acknowledged write must
// be counted, and nothing beyond the writes whose outcome was unknown.
// The master's replica lags when it dies (it is cut off 300ms before the
// kill: paused, and its link dropped): the writes it lacks are those a
// failover loses, and without the option they were acknowledged (see
// BenchmarkFailover).
func TestFailoverWait(t *testing.T) {
	cl := redistest.MustStartClusterReplicas(t, 3)
	r := runFailover(t, cl, clusterDSN(cl)+"&wait_replicas=1", 32, 300*time.Millisecond)
	t.Logf("%+v", r)
	if r.lost != 0 || r.phantom != 0 {
		t.Fatalf("with wait_replicas=1: %d acknowledged writes lost, %d counted beyond the acknowledged and unknown ones (%+v)", r.lost, r.phantom, r)
	}
}

// failoverRun is what a runFailover saw: writes acknowledged, counted
// afterwards, answered outcome unknown; acknowledged writes not counted
// (lost) and counted writes neither acknowledged nor unknown (phantom).
type failoverRun struct {
	acked, counted, unknown, lost, phantom int64
	batches                                int64
}

// runFailover writes through an engine on dsn with the given number of
// writers, kills Masters[0] of cl once writes flow (lag after cutting its
// replica off, when lag is not 0), waits for its replica
// to take over, restarts the killed master (it comes back as a replica),
// waits for as many writes again to be acknowledged, then stops and reads
// every counter with a new store.
func runFailover(tb testing.TB, cl *redistest.Cluster, dsn string, writers int, lag time.Duration) failoverRun {
	ctx := context.Background()
	store := MustOpen(tb, dsn)
	counters := make([]string, 16)
	for i := range counters {
		counters[i] = fmt.Sprintf("%s%s/%d", tb.Name(), runID(), i)
		storetest.MustCreate(tb, store, counters[i], 4)
	}
	eng, err := engine.New(store, engine.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	load := startFailoverLoad(ctx, tb, eng, counters, writers)
	load.waitUntil(tb, "writes to flow", func() bool { return load.total.Load() >= 3000 })
	killed := failMaster(tb, cl, lag, load)
	after := load.total.Load()
	load.waitUntil(tb, "writes to flow again", func() bool { return load.total.Load() >= after+killed })
	load.halt()
	if err := eng.Close(ctx); err != nil {
		tb.Fatal(err)
	}
	r := load.count(tb, MustOpen(tb, dsn), counters)
	r.batches = eng.Stats().Flushes.Load()
	return r
}

// failoverLoad is the writers adding 1s to random counters through the
// engine, with what each counter's writes were told: acknowledged, or
// outcome unknown. An unavailable write applied nothing and is retried.
type failoverLoad struct {
	acked, unknown []atomic.Int64
	total          atomic.Int64 // acknowledged writes, over every counter
	stop           chan struct{}
	once           sync.Once
	wg             sync.WaitGroup
}

func startFailoverLoad(ctx context.Context, tb testing.TB, eng *engine.Engine, counters []string, writers int) *failoverLoad {
	l := &failoverLoad{acked: make([]atomic.Int64, len(counters)), unknown: make([]atomic.Int64, len(counters)), stop: make(chan struct{})}
	for w := range writers {
		l.wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				c := rng.IntN(len(counters))
				_, err := eng.WriteCounter(ctx, shardcounter.Write{Counter: counters[c], Delta: 1})
				switch {
				case err == nil:
					l.acked[c].Add(1)
					l.total.Add(1)
				case shardcounter.IsOutcomeUnknown(err):
					l.unknown[c].Add(1)
				case shardcounter.ErrorCode(err) == shardcounter.EUNAVAILABLE:
					time.Sleep(time.Millisecond) // nothing applied: the master is gone
				default:
					tb.Errorf("WriteCounter: %v", err)
					return
				}
			}
		})
	}
	return l
}

// halt stops the writers and waits for them; it may be called again.
func (l *failoverLoad) halt() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// waitUntil polls cond, stopping the writers and failing after a bound.
func (l *failoverLoad) waitUntil(tb testing.TB, what string, cond func() bool) {
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			l.halt()
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// failMaster kills Masters[0] of cl under the load (after cutting its
// replica off for lag, when lag is not 0), waits for the replica to take
// over and restarts the killed master. It returns the writes acknowledged
// before the kill.
func failMaster(tb testing.TB, cl *redistest.Cluster, lag time.Duration, load *failoverLoad) (killed int64) {
	if lag > 0 {
		// Cut the replica off: paused, it cannot reconnect, and the
		// master drops its link, so what the master does from now on
		// never reaches it.
		if err := cl.Replicas[0].Pause(); err != nil {
			tb.Fatal(err)
		}
		if _, err := cl.Masters[0].Do("CLIENT", "KILL", "TYPE", "replica"); err != nil {
			tb.Fatal(err)
		}
		time.Sleep(lag)
	}
	cl.Masters[0].Kill()
	killed = load.total.Load()
	if lag > 0 {
		if err := cl.Replicas[0].Resume(); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := cl.WaitFailover(cl.Masters[0], 60*time.Second); err != nil {
		load.halt()
		tb.Fatal(err)
	}
	// The promoted replica has no replica of its own, so with
	// wait_replicas no write to its slots can be acknowledged: bring the
	// killed master back, as an operator would; it rejoins as a replica.
	if err := cl.Masters[0].Restart(); err != nil {
		load.halt()
		tb.Fatal(err)
	}
	return killed
}

// count reads every counter with reader, a store opened after the run,
// and sets each against what its writers were told.
func (l *failoverLoad) count(tb testing.TB, reader shardcounter.CounterStore, counters []string) failoverRun {
	var r failoverRun
	for i, id := range counters {
		got := storetest.MustRead(tb, reader, id)
		a, u := l.acked[i].Load(), l.unknown[i].Load()
		r.acked += a
		r.unknown += u
		r.counted += got
		if got < a {
			r.lost += a - got
		}
		if got > a+u {
			r.phantom += got - a - u
		}
	}
	return r
}

// BenchmarkFailover measures what a master's failover loses: the
// acknowledged writes missing afterwards, without and with
// wait_replicas=1, on 3 masters with a replica each, when the replica is
// in step with its master (lag=0) and when it was cut off 300ms before
// the master died (one failover per run; b.N is not used).
func BenchmarkFailover(b *testing.B) {
	for _, lag := range []time.Duration{0, 300 * time.Millisecond} {
		for _, wait := range []bool{false, true} {
			b.Run(fmt.Sprintf("lag=%v/wait=%v", lag, wait), func(b *testing.B) {
				benchmarkFailover(b, lag, wait)
			})
		}
	}
}

func benchmarkFailover(b *testing.B, lag time.Duration, wait bool) {
	{
		{
			cl := redistest.MustStartClusterReplicas(b, 3)
			dsn := clusterDSN(cl)
			if wait {
				dsn += "&wait_replicas=1"
			}
			r := runFailover(b, cl, dsn, 32, lag)
			b.ReportMetric(float64(r.acked), "acked")
			b.ReportMetric(float64(r.lost), "lost")
			b.ReportMetric(float64(r.unknown), "unknown")
			b.ReportMetric(float64(r.phantom), "phantom")
		}
	}
}

// BenchmarkWait measures what wait_replicas=1 costs: writes through the
// engine (64 writers, durable) to 16 counters of 4 shards on 3 masters
// with a replica each, without and with the option, in one run. It
// reports the commit time per batch (one store.Apply: its scripts and,
// with the option, one WAIT per master) and per write it carried.
func BenchmarkWait(b *testing.B) {
	cl := redistest.MustStartClusterReplicas(b, 3)
	for _, wait := range []bool{false, true} {
		b.Run(fmt.Sprintf("wait=%v", wait), func(b *testing.B) {
			ctx := context.Background()
			dsn := clusterDSN(cl)
			if wait {
				dsn += "&wait_replicas=1"
			}
			store := MustOpen(b, dsn)
			counters := make([]string, 16)
			for i := range counters {
				counters[i] = fmt.Sprintf("%s%s/%d", b.Name(), runID(), i)
				storetest.MustCreate(b, store, counters[i], 4)
			}
			eng, err := engine.New(store, engine.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Close(ctx)
			st := eng.Stats()
			flushes, nanos, writes := st.Flushes.Load(), st.FlushNanos.Load(), st.Writes.Load()
			b.SetParallelism(32) // 64 writers on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(rand.Uint64(), 3))
				for pb.Next() {
					if _, err := eng.WriteCounter(ctx, shardcounter.Write{Counter: counters[rng.IntN(len(counters))], Delta: 1}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			f := float64(st.Flushes.Load() - flushes)
			n := float64(st.FlushNanos.Load() - nanos)
			w := float64(st.Writes.Load() - writes)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
			b.ReportMetric(w/f, "writes/batch")
			b.ReportMetric(n/f/1e3, "µs/batch")
			b.ReportMetric(n/w/1e3, "µs/write")
		})
	}
}

// TestWaitShort checks that a write whose WAIT falls short is outcome
// unknown, never success: a server with no replica, asked for one.
func TestWaitShort(t *testing.T) {
	srv := MustStartServer(t)
	ctx := context.Background()
	plain := MustOpen(t, serverDSN(srv))
	id := t.Name() + runID()
	storetest.MustCreate(t, plain, id, 2)
	s := MustOpen(t, serverDSN(srv)+"?wait_replicas=1&wait_timeout_ms=50")
	err := s.Add(ctx, id, 5, 0)
	if !shardcounter.IsOutcomeUnknown(err) {
		t.Fatalf("Add with no replica to confirm it: %v, want outcome unknown", err)
	}
	if got := storetest.MustRead(t, plain, id); got != 5 {
		t.Fatalf("value = %d, want 5: the write is on the master", got)
	}
	if _, err := s.CreateCounter(ctx, id+"/new", shardcounter.Spec{Shards: 1}); !shardcounter.IsOutcomeUnknown(err) {
		t.Fatalf("CreateCounter with no replica to confirm it: %v, want outcome unknown", err)
	}
}

// TestWaitReplica checks the other side: a server with a replica
// acknowledges writes, creates and reshards with wait_replicas=1, and the
// replica has them when they are acknowledged.
func TestWaitReplica(t *testing.T) {
	master := MustStartServer(t)
	host, port, _ := strings.Cut(master.Addr, ":")
	replica := redistest.MustStart(t, "replicaof "+host+" "+port)
	ctx := context.Background()
	s := MustOpen(t, serverDSN(master)+"?wait_replicas=1")
	id := t.Name() + runID()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.CreateCounter(ctx, id, shardcounter.Spec{Shards: 4})
		if err == nil {
			break
		}
		if !shardcounter.IsOutcomeUnknown(err) || time.Now().After(deadline) {
			t.Fatalf("CreateCounter: %v", err)
		}
		// The replica is still syncing: the create may have applied.
		if err := s.DeleteCounter(ctx, id); err != nil && !errors.Is(err, shardcounter.ErrNotFound) && !shardcounter.IsOutcomeUnknown(err) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := range 20 {
		if err := s.Add(ctx, id, 1, uint64(i)); err != nil {
			t.Fatalf("Add: %v", err)
		}
	}
	if _, err := s.ReshardCounter(ctx, id, 7); err != nil {
		t.Fatal(err)
	}
	// The replica has what was acknowledged: read it as the store would
	// after a failover to it.
	if _, err := replica.Do("REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatal(err)
	}
	r := MustOpen(t, serverDSN(replica))
	if got := storetest.MustRead(t, r, id); got != 20 {
		t.Fatalf("value on the replica = %d, want 20", got)
	}
	if c, err := r.GetCounter(ctx, id); err != nil || c.Shards != 7 {
		t.Fatalf("GetCounter on the replica = %+v, %v; want 7 shards", c, err)
	}
}
