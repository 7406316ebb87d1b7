package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// RunRankings runs the rankings of an engine over the store against a
// brute-force checker: the definitions (RunRankingStore's cases), then
// rounds of concurrent writes, decrements, member adds and removals,
// deletes, creates and reshards, during which every top read is checked
// for order, membership and its staleness bound, and after which the top
// list, once its as_of is past the round, must equal a sort of every
// counter with the prefix read from the store. The same runs with writes
// reaching the store from a second engine (another server) and the
// ranking engine in RankingRescan mode, and for a windowed ranking on
// the store's clock.
func RunRankings(t *testing.T, open OpenFunc, opts Options) {
	t.Run("Definitions", func(t *testing.T) {
		RunRankingStore(t, open(t))
	})
	t.Run("Exact", func(t *testing.T) { testRankingExact(t, open(t), opts, false) })
	t.Run("Rescan", func(t *testing.T) { testRankingExact(t, open(t), opts, true) })
	t.Run("Window", func(t *testing.T) { testRankingWindow(t, opts) })
}

// rankEngine returns an engine over s, closed at the end of the test.
func rankEngine(tb testing.TB, s shardcounter.CounterStore, cfg engine.Config) *engine.Engine {
	tb.Helper()
	e, err := engine.New(s, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close(context.Background()) })
	return e
}

// bruteTop reads every counter with the prefix through svc and returns
// the first size by value, then id, with how many there are.
func bruteTop(tb testing.TB, svc shardcounter.CounterService, prefix string, size int) ([]shardcounter.RankingEntry, int) {
	tb.Helper()
	ctx := context.Background()
	var all []shardcounter.RankingEntry
	after := ""
	for {
		page, err := svc.ListCounters(ctx, shardcounter.ListOptions{Prefix: prefix, After: after, Limit: shardcounter.MaxListLimit})
		if err != nil {
			tb.Fatalf("ListCounters: %v", err)
		}
		ids := make([]string, len(page.Counters))
		for i, c := range page.Counters {
			ids[i] = c.ID
		}
		if len(ids) > 0 {
			rs, err := svc.ReadCounters(ctx, ids, shardcounter.Strong)
			if err != nil {
				tb.Fatalf("ReadCounters: %v", err)
			}
			for i, r := range rs {
				if r.Err != nil {
					tb.Fatalf("ReadCounters(%s): %v", ids[i], r.Err)
				}
				all = append(all, shardcounter.RankingEntry{ID: ids[i], Value: r.Reading.Value})
			}
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	return sortTop(all, size), len(all)
}

func sortTop(all []shardcounter.RankingEntry, size int) []shardcounter.RankingEntry {
	slices.SortFunc(all, func(a, b shardcounter.RankingEntry) int {
		switch {
		case a.Value > b.Value:
			return -1
		case a.Value < b.Value:
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	return all[:min(size, len(all))]
}

// checkShape fails unless a top list is in order, holds distinct
// counters of the prefix, at most k of them, and is no older than its
// bound at the moment the read began.
func checkShape(tb testing.TB, top *shardcounter.TopList, prefix string, k int, began time.Time) {
	tb.Helper()
	if len(top.Entries) > k {
		tb.Errorf("top %d returned %d entries", k, len(top.Entries))
	}
	seen := make(map[string]bool)
	for i, e := range top.Entries {
		if !strings.HasPrefix(e.ID, prefix) || seen[e.ID] {
			tb.Errorf("entry %d %+v: not of prefix %q, or twice", i, e, prefix)
		}
		seen[e.ID] = true
		if i > 0 {
			p := top.Entries[i-1]
			if p.Value < e.Value || (p.Value == e.Value && p.ID >= e.ID) {
				tb.Errorf("entries %d and %d out of order: %+v, %+v", i-1, i, p, e)
			}
		}
	}
	if bound := time.Duration(top.MaxStaleness); top.AsOf.Before(began.Add(-bound)) {
		tb.Errorf("top list as of %v, more than its bound %v before the read began at %v", top.AsOf, bound, began)
	}
}

// waitFresh reads the top list until its as_of is after since, and
// returns it.
func waitFresh(tb testing.TB, svc shardcounter.RankingService, name string, since time.Time) *shardcounter.TopList {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		top, err := svc.Top(context.Background(), name, 0)
		if err != nil {
			tb.Fatalf("Top(%s): %v", name, err)
		}
		if top.AsOf.After(since) {
			return top
		}
		if time.Now().After(deadline) {
			tb.Fatalf("Top(%s) stays as of %v, before %v", name, top.AsOf, since)
		}
		time.Sleep(time.Duration(top.MaxStaleness) / 4)
	}
}

func wantTop(tb testing.TB, what string, got, want []shardcounter.RankingEntry) {
	tb.Helper()
	if !slices.Equal(got, want) {
		tb.Fatalf("%s: top list\n%v\nwant (a sort of every counter)\n%v", what, got, want)
	}
}

// testRankingExact runs the rounds. With rescan the writes come from a
// second engine over the store, which the ranking engine never hears of.
func testRankingExact(t *testing.T, s shardcounter.CounterStore, opts Options, rescan bool) {
	ctx := context.Background()
	p := prefix(t)
	ranker := rankEngine(t, s, engine.Config{RankingRescan: rescan})
	writer := ranker
	if rescan {
		writer = rankEngine(t, s, engine.Config{})
	}
	const size = 6
	name := p + "top"
	if _, _, err := ranker.CreateRanking(ctx, name, shardcounter.RankingOptions{Prefix: p + "post:", Size: size, MaxStaleness: shardcounter.Duration(20 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	// Counters before the ranking, one of them a distinct counter, and
	// one outside the prefix that must never show.
	for i := range 12 {
		if _, err := writer.WriteCounter(ctx, shardcounter.Write{Counter: fmt.Sprintf("%spost:%02d", p, i), Delta: int64(i%5 + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := writer.WriteCounter(ctx, shardcounter.Write{Counter: p + "other", Delta: 1000}); err != nil {
		t.Fatal(err)
	}
	for round := range 4 {
		rankRound(t, writer, ranker, name, p, size, opts.scaled(150), round)
		quiet := time.Now()
		top := waitFresh(t, ranker, name, quiet)
		want, n := bruteTop(t, writer, p+"post:", size)
		wantTop(t, fmt.Sprintf("round %d", round), top.Entries, want)
		if top.Counters != n {
			t.Fatalf("round %d: ranking counts %d counters, the store holds %d", round, top.Counters, n)
		}
	}
}

// rankRound runs 4 writers of ops operations each on the counters
// p+"post:NN" while a reader checks every top list it gets.
func rankRound(t *testing.T, writer, ranker *engine.Engine, name, p string, size, ops, round int) {
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // the reader
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			began := time.Now()
			top, err := ranker.Top(ctx, name, 4)
			if err != nil {
				t.Errorf("Top under writes: %v", err)
				return
			}
			checkShape(t, top, p+"post:", min(4, size), began)
			time.Sleep(time.Millisecond)
		}
	}()
	var writers sync.WaitGroup
	for w := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			rng := rand.New(rand.NewPCG(uint64(round), uint64(w)))
			for range ops {
				rankOp(t, writer, p, rng)
			}
		}()
	}
	writers.Wait()
	close(stop)
	wg.Wait()
}

// rankOp makes one random change: mostly increments and decrements, some
// member adds and removals on distinct counters, creates of new
// counters, reshards and deletes.
func rankOp(t *testing.T, svc *engine.Engine, p string, rng *rand.Rand) {
	ctx := context.Background()
	id := fmt.Sprintf("%spost:%02d", p, rng.IntN(24)) // half of them made during the test
	var err error
	switch op := rng.IntN(100); {
	case op < 55:
		_, err = svc.WriteCounter(ctx, shardcounter.Write{Counter: id, Delta: rng.Int64N(20) + 1})
	case op < 80:
		_, err = svc.WriteCounter(ctx, shardcounter.Write{Counter: id, Delta: -(rng.Int64N(20) + 1)})
	case op < 88:
		did := fmt.Sprintf("%spost:m%d", p, rng.IntN(3))
		w := shardcounter.AddMember(did, fmt.Sprint(rng.IntN(8)))
		if rng.IntN(3) == 0 {
			w = shardcounter.RemoveMember(did, w.Member)
		}
		_, err = svc.WriteCounter(ctx, w)
	case op < 94:
		_, err = svc.ReshardCounter(ctx, id, 1+rng.IntN(6))
	default:
		err = svc.DeleteCounter(ctx, id)
	}
	switch shardcounter.ErrorCode(err) {
	case "", shardcounter.ENOTFOUND, shardcounter.EEXISTS:
	case shardcounter.EINVALID:
		// A member write to an id a delta write made a sum counter, or the
		// reverse: both kinds share the id space of the test.
	default:
		t.Errorf("%s: %v", id, err)
	}
}

// testRankingWindow checks a trending ranking (last 5m over 1-minute
// buckets) on the store's clock: after writes, and as buckets leave the
// window with no write at all, its list equals a sort of every counter's
// ReadWindow; counters whose window does not fit, or that have none,
// stay out.
func testRankingWindow(t *testing.T, opts Options) {
	ctx := context.Background()
	s, clk := openWithClock(t, opts)
	clk.Set(at("10:00:00"))
	e := rankEngine(t, s, engine.Config{Now: clk.Now})
	p := prefix(t) + "tag:"
	minute := &shardcounter.Window{Bucket: shardcounter.BucketMinute, Retention: shardcounter.Duration(time.Hour)}
	hour := &shardcounter.Window{Bucket: shardcounter.BucketHour, Retention: shardcounter.Duration(24 * time.Hour)}
	for i, w := range []*shardcounter.Window{minute, minute, minute, minute, minute, hour, nil} {
		if _, _, err := e.CreateCounter(ctx, fmt.Sprintf("%s%d", p, i), shardcounter.CreateOptions{Shards: 2, Window: w}); err != nil {
			t.Fatal(err)
		}
	}
	name := prefix(t) + "trending"
	if _, _, err := e.CreateRanking(ctx, name, shardcounter.RankingOptions{Prefix: p, Last: shardcounter.Duration(5 * time.Minute), Size: 3}); err != nil {
		t.Fatal(err)
	}
	write := func(i int, d int64) {
		t.Helper()
		if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: fmt.Sprintf("%s%d", p, i), Delta: d}); err != nil {
			t.Fatal(err)
		}
	}
	fitting := []int{0, 1, 2, 3, 4} // the counters whose window fits
	check := func(when string) {
		t.Helper()
		clk.Set(at(when))
		top, err := e.Top(ctx, name, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !top.AsOf.Equal(at(when)) || top.Note == "" {
			t.Fatalf("at %s: top list as of %v (note %q), want a refresh at %s that says what it ranks", when, top.AsOf, top.Note, when)
		}
		var all []shardcounter.RankingEntry
		for _, i := range fitting {
			id := fmt.Sprintf("%s%d", p, i)
			r, err := e.ReadWindow(ctx, id, 5*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, shardcounter.RankingEntry{ID: id, Value: r.Value})
		}
		wantTop(t, "at "+when, top.Entries, sortTop(all, 3))
		if top.Counters != len(fitting) {
			t.Fatalf("at %s: ranking counts %d counters, want the %d with minute buckets", when, top.Counters, len(fitting))
		}
	}
	check("10:00:01")
	clk.Set(at("10:00:02"))
	write(0, 50)
	write(1, 10)
	write(5, 1000) // hour buckets: not in a 5m ranking
	write(6, 2000) // no window
	check("10:00:30")
	clk.Set(at("10:02:00"))
	write(1, 30)
	write(2, 45)
	write(3, 5)
	check("10:02:05")
	clk.Set(at("10:02:40")) // mid-bucket: kept from the commits' deltas
	write(2, 7)
	write(4, 2)
	write(6, 9) // no window
	check("10:02:50")
	clk.Set(at("10:03:00"))
	write(0, -20) // a decrement moves counter 0 down
	write(4, 1)
	check("10:03:30")
	check("10:05:00") // the 10:00 bucket has left: 0 and 1 fall without a write
	check("10:07:30") // the 10:02 bucket has left: only 0 and 4 keep a sum... of 10:03
	check("10:08:10") // every bucket gone: all zero, by id
	// The counter without a window, deleted and made again with one,
	// joins; the one with hour buckets, deleted, leaves.
	clk.Set(at("10:09:00"))
	if err := e.DeleteCounter(ctx, p+"6"); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteCounter(ctx, p+"5"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.CreateCounter(ctx, p+"6", shardcounter.CreateOptions{Shards: 1, Window: minute}); err != nil {
		t.Fatal(err)
	}
	write(6, 3)
	fitting = append(fitting, 6)
	check("10:09:30")
}
