package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// recorder is a CommitObserver that logs what it hears and checks the
// contract: each AfterCommit follows the BeforeCommit of the same commit,
// with the context that BeforeCommit returned, and with the commit
// complete.
type recorder struct {
	name string
	mu   *sync.Mutex
	log  *[]string // shared by the recorders of one engine: the order of calls
	open map[*shardcounter.Commit]bool
	done []*shardcounter.Commit
	// parent is, for each commit heard within another's store call, that
	// one (found in the context, as a tracer finds its parent span).
	parent map[*shardcounter.Commit]*shardcounter.Commit
	errs   []string
}

type recorderKey struct{ name string }

func newRecorders(names ...string) []*recorder {
	mu, log := &sync.Mutex{}, &[]string{}
	var rs []*recorder
	for _, n := range names {
		rs = append(rs, &recorder{name: n, mu: mu, log: log, open: map[*shardcounter.Commit]bool{}, parent: map[*shardcounter.Commit]*shardcounter.Commit{}})
	}
	return rs
}

func (r *recorder) BeforeCommit(ctx context.Context, c *shardcounter.Commit) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.log = append(*r.log, fmt.Sprintf("%s before %s", r.name, describe(c)))
	if !c.Start.IsZero() || !c.End.IsZero() || c.Outcomes != nil || c.Err != nil {
		r.errs = append(r.errs, "BeforeCommit of a commit already made: "+describe(c))
	}
	if p, ok := ctx.Value(recorderKey{r.name}).(*shardcounter.Commit); ok {
		r.parent[c] = p
	}
	r.open[c] = true
	return context.WithValue(ctx, recorderKey{r.name}, c)
}

func (r *recorder) AfterCommit(ctx context.Context, c *shardcounter.Commit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.log = append(*r.log, fmt.Sprintf("%s after %s", r.name, describe(c)))
	switch {
	case !r.open[c]:
		r.errs = append(r.errs, "AfterCommit without BeforeCommit: "+describe(c))
	case ctx.Value(recorderKey{r.name}) != c:
		r.errs = append(r.errs, "AfterCommit without the context its BeforeCommit returned: "+describe(c))
	case c.Start.IsZero() || c.End.Before(c.Start):
		r.errs = append(r.errs, fmt.Sprintf("%s: start %v, end %v", describe(c), c.Start, c.End))
	case c.Op == shardcounter.CommitBatch && len(c.Outcomes) != len(c.Incs):
		r.errs = append(r.errs, fmt.Sprintf("%s: %d outcomes", describe(c), len(c.Outcomes)))
	}
	delete(r.open, c)
	r.done = append(r.done, c)
}

// take returns the commits heard since the last call, and fails the test
// on a broken rule.
func (r *recorder) take(t *testing.T) []*shardcounter.Commit {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) > 0 {
		t.Fatalf("observer %s: %s", r.name, strings.Join(r.errs, "; "))
	}
	if len(r.open) > 0 {
		t.Fatalf("observer %s: %d commits begun and not ended once the call returned", r.name, len(r.open))
	}
	d := r.done
	r.done = nil
	return d
}

func describe(c *shardcounter.Commit) string {
	if c.Op != shardcounter.CommitBatch {
		return fmt.Sprintf("op%d %s", c.Op, c.Counter)
	}
	var ids []string
	for _, inc := range c.Incs {
		ids = append(ids, inc.Counter)
	}
	return "batch " + strings.Join(ids, ",")
}

func describeAll(cs []*shardcounter.Commit) string {
	var ds []string
	for _, c := range cs {
		ds = append(ds, describe(c))
	}
	return "[" + strings.Join(ds, "; ") + "]"
}

// TestObserversHearEveryCommit checks Config.Observers: every store call
// of the engine that changes counters is heard, before any of its writers
// is answered — a flush with its increments and their outcomes, a create,
// a reset, a reshard, a merge, a delete, and a deletion of an expired
// name by package expiry, heard within the commit of the write that made
// it (its context holds the write's); observers are called in order
// before the call and in reverse order after it.
func TestObserversHearEveryCommit(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
	rs := newRecorders("a", "b")
	e := MustNew(t, MustOpenStore(t), engine.Config{Now: clk.Now, Observers: []shardcounter.CommitObserver{rs[0], rs[1]}})
	a := rs[0]
	one := func(what string, op shardcounter.CommitOp, counter string) {
		t.Helper()
		got := a.take(t)
		if len(got) != 1 || got[0].Op != op || got[0].Counter != counter || got[0].Err != nil {
			t.Fatalf("%s: heard %s, want op%d of %s", what, describeAll(got), op, counter)
		}
	}

	if _, _, err := e.CreateCounter(ctx, "c", shardcounter.CreateOptions{Shards: 2}); err != nil {
		t.Fatal(err)
	}
	one("create", shardcounter.CommitCreate, "c")

	for _, dup := range []bool{false, true} {
		if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "c", Delta: 2, RequestID: "r1"}); err != nil {
			t.Fatal(err)
		}
		got := a.take(t) // heard before the writer was answered
		if len(got) != 1 || got[0].Op != shardcounter.CommitBatch || len(got[0].Incs) != 1 || got[0].Writes != 1 ||
			got[0].Incs[0].Counter != "c" || got[0].Incs[0].Delta != 2 || got[0].Outcomes[0].Err != nil || got[0].Outcomes[0].Duplicate != dup {
			t.Fatalf("write (a duplicate: %v): heard %s", dup, describeAll(got))
		}
	}

	if _, err := e.ReshardCounter(ctx, "c", 4); err != nil {
		t.Fatal(err)
	}
	one("reshard", shardcounter.CommitReshard, "c")
	if _, err := e.ResetCounter(ctx, "c", shardcounter.Reset{Value: 7}); err != nil {
		t.Fatal(err)
	}
	one("reset", shardcounter.CommitReset, "c")

	if _, err := e.WriteCounter(ctx, addApprox("h1", "x")); err != nil {
		t.Fatal(err)
	}
	a.take(t)
	if _, err := e.MergeSketches(ctx, "h2", []string{"h1"}); err != nil {
		t.Fatal(err)
	}
	got := a.take(t)
	if len(got) != 2 || got[0].Op != shardcounter.CommitCreate || got[0].Counter != "h2" ||
		got[1].Op != shardcounter.CommitBatch || got[1].Incs[0].Counter != "h2" || got[1].Incs[0].Sketch == nil {
		t.Fatalf("merge: heard %s, want the create of h2 and its sketches' batch", describeAll(got))
	}

	// A write to an expired name: expiry deletes it within the write's
	// commit, and says so.
	if ok, err := e.ExpireCounter(ctx, "c", clk.Now().Add(time.Minute)); err != nil || !ok {
		t.Fatal(ok, err)
	}
	a.take(t)
	clk.advance(2 * time.Minute)
	if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "c", Delta: 1}); err != nil {
		t.Fatal(err)
	}
	got = a.take(t)
	if len(got) != 2 || got[0].Op != shardcounter.CommitDelete || got[0].Counter != "c" || got[1].Op != shardcounter.CommitBatch {
		t.Fatalf("write to an expired name: heard %s, want its deletion, then the batch", describeAll(got))
	}
	if p := a.parent[got[0]]; p != got[1] {
		t.Fatalf("the deletion of the expired name was heard within %v, not within the write's commit", p)
	}
	if v := read(t, e, "c"); v != 1 {
		t.Fatalf("the write after the deadline started a counter at %d, want 1", v)
	}

	if err := e.DeleteCounter(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	one("delete", shardcounter.CommitDelete, "c")

	// Observers in order before, in reverse order after: b's calls lie
	// within a's.
	a.mu.Lock()
	log := slices.Clone(*a.log)
	a.mu.Unlock()
	depth := 0
	for _, l := range log {
		switch {
		case strings.HasPrefix(l, "a before"), strings.HasPrefix(l, "b after"):
			if depth%2 != 0 {
				t.Fatalf("calls out of order at %q:\n%s", l, strings.Join(log, "\n"))
			}
		default:
			if depth%2 != 1 {
				t.Fatalf("calls out of order at %q:\n%s", l, strings.Join(log, "\n"))
			}
		}
		if strings.Contains(l, " before ") {
			depth++
		} else {
			depth--
		}
	}
	rs[1].take(t)
}

// TestRankingHearsExpiredName checks that a ranking learns of a counter
// package expiry deleted on its own: a write to an expired name starts
// it anew, and the ranking must read it again rather than add the write
// to the value it held.
func TestRankingHearsExpiredName(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
	e := MustNew(t, MustOpenStore(t), engine.Config{Now: clk.Now})
	for id, d := range map[string]int64{"p:a": 10, "p:b": 5} {
		if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: id, Delta: d}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := e.CreateRanking(ctx, "all", shardcounter.RankingOptions{Prefix: "p:", Size: 2}); err != nil {
		t.Fatal(err)
	}
	top := func(want ...shardcounter.RankingEntry) {
		t.Helper()
		clk.advance(2 * time.Second) // past the list's staleness bound
		got, err := e.Top(ctx, "all", 0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Entries, want) {
			t.Fatalf("top %v, want %v", got.Entries, want)
		}
	}
	top(shardcounter.RankingEntry{ID: "p:a", Value: 10}, shardcounter.RankingEntry{ID: "p:b", Value: 5})
	if ok, err := e.ExpireCounter(ctx, "p:a", clk.Now().Add(time.Minute)); err != nil || !ok {
		t.Fatal(ok, err)
	}
	clk.advance(2 * time.Minute)
	if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "p:a", Delta: 1}); err != nil {
		t.Fatal(err)
	}
	top(shardcounter.RankingEntry{ID: "p:b", Value: 5}, shardcounter.RankingEntry{ID: "p:a", Value: 1})
}
