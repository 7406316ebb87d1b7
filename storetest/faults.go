package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/internal/faultproxy"
)

// FaultOptions configure RunFaults.
type FaultOptions struct {
	// Load is how long the writers run while the network fails. Default
	// 1.5s.
	Load time.Duration
	// Writers is the number of concurrent writers. Default 24.
	Writers int
	// Partition, when set, replaces the random faults by one network
	// partition that long in the middle of the load: every proxy accepts
	// connections and forwards nothing. Load is then at least twice it.
	Partition time.Duration
	// FlushTimeout is the engine's, the deadline of each commit and of
	// settling it. Default 3s.
	FlushTimeout time.Duration
	// FaultGap is the mean time between two random faults. Default 50ms;
	// a store whose client multiplexes every call on one connection
	// (gRPC) needs longer, or no call ever completes between two cuts.
	FaultGap time.Duration
}

// faultWrite is one write of the faults suite and what it got.
type faultWrite struct {
	w   shardcounter.Write
	err error
}

// RunFaults is the faults suite, for every store reached over a network:
// store must reach its servers only through proxies. Many writers, half
// of their writes with request ids, write through an engine while the
// proxies cut every connection, cut replies in their middle (the server
// committed, the client never hears it) and black-hole briefly, at random
// moments, so that many cuts land on commits. Then, with the network
// healed, the checker proves per write:
//
//   - acknowledged: applied exactly once (retried with its request id,
//     it is a duplicate; the counters hold every acknowledged write);
//   - unavailable: not applied (retried with its request id, it applies);
//   - outcome_unknown: retried with its request id, it is reported a
//     duplicate exactly when it had been applied (the final value, which
//     counts each write once, proves it);
//   - nothing else: never internal.
//
// Writes without request ids are checked by the totals alone.
func RunFaults(t *testing.T, store shardcounter.CounterStore, proxies []*faultproxy.Proxy, opts FaultOptions) {
	if opts.Load == 0 {
		opts.Load = 1500 * time.Millisecond
	}
	if opts.Writers == 0 {
		opts.Writers = 24
	}
	opts.Load = max(opts.Load, 2*opts.Partition)
	if opts.FlushTimeout == 0 {
		opts.FlushTimeout = 3 * time.Second
	}
	if opts.FaultGap == 0 {
		opts.FaultGap = 50 * time.Millisecond
	}
	eng, err := engine.New(store, engine.Config{FlushTimeout: opts.FlushTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(context.Background()) //nolint:errcheck // the checker has spoken
	ctx := context.Background()
	p := prefix(t)
	counters := make([]string, 4)
	for i := range counters {
		counters[i] = fmt.Sprintf("%sfaults-%d", p, i)
		MustCreate(t, store, counters[i], 4)
		// One write each before the faults: the connections are up and
		// the store knows the counters, so that the writes under faults
		// are commits, on a slow store too.
		if _, err := eng.WriteCounter(ctx, shardcounter.Write{Counter: counters[i], Delta: 1}); err != nil {
			t.Fatal(err)
		}
	}

	// The faults stop with the load; the writes still in flight then
	// settle, as they would once a real network heals.
	stop := make(chan struct{})
	var faults sync.WaitGroup
	if opts.Partition > 0 {
		faults.Go(func() { partition(stop, proxies, opts.Load/4, opts.Partition) })
	} else {
		faults.Go(func() { injectFaults(stop, proxies, opts.FaultGap) })
	}
	time.AfterFunc(opts.Load, func() { close(stop) })
	writes := faultLoad(eng, counters, opts)
	faults.Wait()
	for _, px := range proxies {
		px.BlackHole(false)
		px.CutReplies(0)
	}
	var cuts int64
	for _, px := range proxies {
		cuts += px.Cuts()
	}
	checkFaults(t, ctx, eng, counters, writes, cuts)
}

// injectFaults fails the proxies' connections at random moments until
// stop: cuts of every connection, replies cut in their middle, and short
// black holes, gap apart on average.
func injectFaults(stop chan struct{}, proxies []*faultproxy.Proxy, gap time.Duration) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(gap*2/5 + rand.N(gap*6/5)):
		}
		px := proxies[rand.IntN(len(proxies))]
		switch r := rand.IntN(10); {
		case r < 4:
			px.CutAll()
		case r < 9:
			px.CutReplies(1 + rand.IntN(3))
		default:
			px.BlackHole(true)
			time.Sleep(100 * time.Millisecond)
			px.BlackHole(false)
		}
	}
}

// partition black-holes every proxy for d, after a wait of after.
func partition(stop chan struct{}, proxies []*faultproxy.Proxy, after, d time.Duration) {
	select {
	case <-stop:
		return
	case <-time.After(after):
	}
	for _, px := range proxies {
		px.BlackHole(true)
	}
	select {
	case <-stop:
	case <-time.After(d):
	}
	for _, px := range proxies {
		px.BlackHole(false)
	}
}

// faultLoad runs the writers for opts.Load and returns every write with
// its result.
func faultLoad(svc shardcounter.CounterService, counters []string, opts FaultOptions) []faultWrite {
	var (
		mu  sync.Mutex
		all []faultWrite
		wg  sync.WaitGroup
	)
	deadline := time.Now().Add(opts.Load)
	for i := range opts.Writers {
		wg.Go(func() {
			var mine []faultWrite
			for n := 0; time.Now().Before(deadline); n++ {
				w := shardcounter.Write{Counter: counters[(i+n)%len(counters)], Delta: 1}
				if n%2 == 0 {
					w.RequestID = fmt.Sprintf("w%d-%d", i, n)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := svc.WriteCounter(ctx, w)
				cancel()
				mine = append(mine, faultWrite{w: w, err: err})
				if err != nil {
					time.Sleep(10 * time.Millisecond) // as a client honouring Retry-After would, briefly
				}
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return all
}

// settleTime bounds how long retryAll retries one write that the store
// answers unavailable or outcome_unknown once the network has healed. It
// only matters when a retry fails: a store that never recovers still
// fails the suite, a minute later.
const settleTime = 60 * time.Second

// retry is the retry of one write with its request id.
type retry struct {
	res    shardcounter.WriteResult
	err    error
	unsure bool // an attempt of the retry itself had an unknown outcome
}

// retryAll retries, 16 at a time, every write that has a request id,
// each until the store answers it, for up to settleTime: the pool may hold
// connections the faults broke, and a store may hold locks for a
// transaction whose rollback the faults lost (the Datastore emulator does,
// until it expires the transaction); on a machine loaded by other tests a
// commit may also outlast the engine's flush timeout for a while.
func retryAll(ctx context.Context, svc shardcounter.CounterService, writes []faultWrite) []retry {
	out := make([]retry, len(writes))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, fw := range writes {
		if fw.w.RequestID == "" {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r := &out[i]
			for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
				var res *shardcounter.WriteResult
				res, r.err = svc.WriteCounter(ctx, fw.w)
				if r.err == nil {
					r.res = *res
					return
				}
				r.unsure = r.unsure || shardcounter.IsOutcomeUnknown(r.err)
				if time.Since(start) > settleTime || !(r.unsure || shardcounter.ErrorCode(r.err) == shardcounter.EUNAVAILABLE) {
					return
				}
			}
		})
	}
	wg.Wait()
	return out
}

// faultTally is what the writes of one counter got.
type faultTally struct {
	counted int64 // writes known to count once: acknowledged, settled by retry
	maybe   int64 // outcome unknown without a request id: may count
}

// checkFaults is RunFaults's checker (see there).
func checkFaults(t *testing.T, ctx context.Context, svc shardcounter.CounterService, counters []string, writes []faultWrite, cuts int64) {
	t.Helper()
	tally := make(map[string]*faultTally)
	for _, c := range counters {
		tally[c] = &faultTally{counted: 1} // the write before the faults
	}
	retries := retryAll(ctx, svc, writes)
	var acked, unavailable, unknown, unknownApplied int
	for i, fw := range writes {
		tl := tally[fw.w.Counter]
		code := shardcounter.ErrorCode(fw.err)
		switch {
		case fw.err == nil:
			acked++
		case shardcounter.IsOutcomeUnknown(fw.err):
			unknown++
		case code == shardcounter.EUNAVAILABLE:
			unavailable++
		default:
			t.Errorf("write %+v: %v: want success, unavailable or outcome_unknown", fw.w, fw.err)
			continue
		}
		if fw.w.RequestID == "" {
			switch {
			case fw.err == nil:
				tl.counted++
			case shardcounter.IsOutcomeUnknown(fw.err):
				tl.maybe++
			}
			continue
		}
		res, err := retries[i].res, retries[i].err
		if err != nil {
			t.Fatalf("retry of %+v once the network healed: %v", fw.w, err)
		}
		tl.counted++ // counted once now, by the first attempt or by this one
		switch {
		case retries[i].unsure:
			// A retry of its own had an unknown outcome: Duplicate may
			// be that retry's doing. The totals still count it once.
		case fw.err == nil && !res.Duplicate:
			t.Errorf("write %+v was acknowledged, but its retry applied again: it had not been applied", fw.w)
		case code == shardcounter.EUNAVAILABLE && res.Duplicate:
			t.Errorf("write %+v was answered unavailable (%v), but its retry is a duplicate: it had been applied", fw.w, fw.err)
		case shardcounter.IsOutcomeUnknown(fw.err) && res.Duplicate:
			unknownApplied++
		}
	}
	for _, c := range counters {
		r, err := svc.ReadCounter(ctx, c, shardcounter.Strong)
		if err != nil {
			t.Fatal(err)
		}
		tl := tally[c]
		if r.Value < tl.counted || r.Value > tl.counted+tl.maybe {
			t.Errorf("counter %s = %d, want %d (each write counted once) plus up to %d of unknown outcome without request id", c, r.Value, tl.counted, tl.maybe)
		}
	}
	t.Logf("%d writes, %d connections cut: %d acknowledged, %d unavailable, %d outcome unknown (%d of them had applied)",
		len(writes), cuts, acked, unavailable, unknown, unknownApplied)
	if acked == 0 || cuts == 0 && unknown == 0 && unavailable == 0 {
		t.Errorf("%d writes acknowledged, %d connections cut: the suite tested nothing", acked, cuts)
	}
}
