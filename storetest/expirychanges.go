package storetest

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/expiry"
)

// testExpiryChanges checks deadline changes made in the commit of a
// batch (expiry.Store.ApplyChanges, the engine's EXPIRE): a change after
// an increment of the batch; Redis's NX, XX, GT and LT; a change to a
// name that holds nothing, which changes nothing; a time not in the
// future, which deletes; a change made by one process over another's,
// which the newest wins and the records keep one member of; changes of
// one name committing at once, which leave the deadline the process
// knows; and many changes of a name in one second, which share one index
// entry.
func testExpiryChanges(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	p := prefix(t)
	clk := NewClock(time.Now().UTC().Truncate(time.Second).Add(time.Millisecond))
	x := expiry.Wrap(s, expiry.Options{Now: clk.Now, Refresh: time.Hour})
	y := expiry.Wrap(s, expiry.Options{Now: clk.Now, Refresh: time.Nanosecond}) // another process
	now := clk.Now().UnixMilli()
	spec := &shardcounter.Spec{Shards: 2, Kind: shardcounter.KindSum}

	k := p + "k"
	out, res, err := x.ApplyChanges(ctx, []shardcounter.Increment{{Counter: k, Delta: 1, Create: spec}},
		[]expiry.Change{{Name: k, At: now + 60_000, Known: true}, {Name: p + "missing", At: now + 60_000}})
	if err != nil || out[0].Err != nil || !res[0].Set || res[0].Err != nil || res[1].Set || res[1].Err != nil {
		t.Fatalf("ApplyChanges of an increment with a change: %v, %+v, %+v; want the first change set, the second not", err, out, res)
	}
	if len(out) != 1 {
		t.Fatalf("ApplyChanges returned %d outcomes for 1 increment", len(out))
	}
	wantTTL(t, y, k, true, 60_000)
	if _, err := s.GetCounter(ctx, expiry.RecordID(p+"missing")); !errors.Is(err, shardcounter.ErrNotFound) {
		t.Fatalf("a change to a name that holds nothing left a record: %v", err)
	}

	// Redis's conditions, each against the deadline the one before left.
	for _, c := range []struct {
		cond   string
		at     int64
		set    bool
		remain int64
	}{
		{"nx", now + 1000, false, 60_000},
		{"gt", now + 30_000, false, 60_000},
		{"gt", now + 90_000, true, 90_000},
		{"lt", now + 120_000, false, 90_000},
		{"lt", now + 45_000, true, 45_000},
		{"xx", now + 50_000, true, 50_000},
		{"xx", 0, true, -1}, // PERSIST
		{"gt", now + 10_000, false, -1},
		{"xx", now + 10_000, false, -1},
		{"lt", now + 20_000, true, 20_000},
	} {
		_, res, err := y.ApplyChanges(ctx, nil, []expiry.Change{{Name: k, At: c.at, Cond: c.cond}})
		if err != nil || res[0].Err != nil || res[0].Set != c.set {
			t.Fatalf("change %s to %d: %v, %+v; want set %v", c.cond, c.at-now, err, res, c.set)
		}
		wantTTL(t, y, k, true, c.remain)
	}

	// x changes the deadline knowing a member y has replaced since: the
	// newest change wins, and a read leaves the record one member.
	expiryChange(t, x, k, now+70_000)
	expiryChange(t, y, k, now+80_000)
	expiryChange(t, x, k, now+75_000)
	wantTTL(t, y, k, true, 75_000)
	if ms, err := s.ListMembers(ctx, expiry.RecordID(k), "", 10); err != nil || len(ms) != 1 {
		t.Fatalf("members of %q's record after a read: %q, %v; want one", k, ms, err)
	}

	// Many changes of a name in one second share one index entry.
	before := indexEntries(t, s, k)
	for i := range 5 {
		expiryChange(t, x, k, now+100_000+int64(i))
	}
	if n := indexEntries(t, s, k) - before; n != 1 {
		t.Fatalf("5 changes of %q within one second added %d index entries: want them to share one", k, n)
	}

	expiryConcurrentChanges(t, s, x, y, k, now)

	// A time not in the future deletes, after the batch's increment.
	d := p + "d"
	_, res, err = x.ApplyChanges(ctx, []shardcounter.Increment{{Counter: d, Delta: 1, Create: spec}},
		[]expiry.Change{{Name: d, At: now, Known: true}})
	if err != nil || !res[0].Set || res[0].Err != nil {
		t.Fatalf("a change to now: %v, %+v", err, res)
	}
	if _, err := s.GetCounter(ctx, d); !errors.Is(err, shardcounter.ErrNotFound) {
		t.Fatalf("a deadline that is now did not delete %q: %v", d, err)
	}
	wantTTL(t, y, d, false, -2)

	expiryConditional(t, s, x, y, spec, p, now)
}

// expiryConditional checks changes conditional on a bounded increment of
// their batch (Change.If, INCREX's deadline) on a store that keeps
// bounds: made when it applies, saturated at its bound too; left undone,
// the deadline as it was, when it is skipped or fails.
func expiryConditional(t *testing.T, s shardcounter.CounterStore, x, y *expiry.Store, spec *shardcounter.Spec, p string, now int64) {
	ctx := context.Background()
	b := p + "b"
	upTo5 := &shardcounter.Bound{Lower: math.MinInt64, Upper: 5}
	out, res, err := x.ApplyChanges(ctx, []shardcounter.Increment{{Counter: b, Delta: 3, Create: spec, Bound: upTo5, Total: true}},
		[]expiry.Change{{Name: b, At: now + 60_000, Known: true, If: 1}})
	if err == nil && (shardcounter.IsBoundsUnsupported(out[0].Err) || len(res) > 0 && shardcounter.IsBoundsUnsupported(res[0].Err)) {
		t.Logf("the store does not keep bounded increments, or items conditional on them: no conditional changes")
		return
	}
	if err != nil || out[0].Err != nil || out[0].Skipped || !res[0].Set || res[0].Err != nil {
		t.Fatalf("a change conditional on an applied bounded increment: %v, %+v, %+v; want it set", err, out, res)
	}
	wantTTL(t, y, b, true, 60_000)
	for _, c := range []struct {
		what string
		inc  shardcounter.Increment
		ch   expiry.Change
	}{
		{"a skipped increment's", shardcounter.Increment{Counter: b, Delta: 3, Bound: upTo5}, expiry.Change{Name: b, At: now + 90_000, Known: true, If: 1}},
		{"a skipped increment's PERSIST", shardcounter.Increment{Counter: b, Delta: 3, Bound: upTo5}, expiry.Change{Name: b, Known: true, If: 1}},
		{"a skipped increment's deletion", shardcounter.Increment{Counter: b, Delta: 3, Bound: upTo5}, expiry.Change{Name: b, At: now, Known: true, If: 1}},
		{"a failed increment's", shardcounter.Increment{Counter: b, Member: "m", Delta: 1}, expiry.Change{Name: b, At: now + 90_000, Known: true, If: 1}},
	} {
		out, res, err := x.ApplyChanges(ctx, []shardcounter.Increment{c.inc}, []expiry.Change{c.ch})
		if err != nil || res[0].Set || res[0].Err != nil || (out[0].Err == nil && !out[0].Skipped) {
			t.Fatalf("%s change: %v, %+v, %+v; want the increment skipped or failed and the change not made", c.what, err, out, res)
		}
		wantTTL(t, x, b, true, 60_000)
		wantTTL(t, y, b, true, 60_000)
	}
	out, res, err = x.ApplyChanges(ctx, []shardcounter.Increment{{Counter: b, Delta: 3, Bound: &shardcounter.Bound{Lower: math.MinInt64, Upper: 3, Saturate: true}}},
		[]expiry.Change{{Name: b, At: now + 90_000, Known: true, If: 1}})
	if err != nil || out[0].Err != nil || out[0].Skipped || out[0].Applied == nil || *out[0].Applied != 0 || !res[0].Set {
		t.Fatalf("a change after an increment saturated at its bound: %v, %+v, %+v; want it set", err, out, res)
	}
	wantTTL(t, y, b, true, 90_000)
}

func expiryChange(t *testing.T, x *expiry.Store, name string, at int64) {
	t.Helper()
	if _, res, err := x.ApplyChanges(context.Background(), nil, []expiry.Change{{Name: name, At: at}}); err != nil || !res[0].Set || res[0].Err != nil {
		t.Fatalf("change of %q to %d: %v, %+v", name, at, err, res)
	}
}

// indexEntries counts the index entries of name.
func indexEntries(t *testing.T, s shardcounter.CounterStore, name string) int {
	t.Helper()
	n, after := 0, ""
	for {
		cs, err := s.ListCounters(context.Background(), shardcounter.InternalPrefix+"q", after, shardcounter.MaxListLimit)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if strings.HasSuffix(c.ID, name) && len(c.ID) == len(expiry.IndexID(0, name)) {
				n++
			}
		}
		if len(cs) < shardcounter.MaxListLimit {
			return n
		}
		after = cs[len(cs)-1].ID
	}
}

// expiryConcurrentChanges checks that changes of one name committing at
// once (an engine's flushes side by side) leave the deadline the Store
// knows, the newest planned, and the record one member after a read.
func expiryConcurrentChanges(t *testing.T, s shardcounter.CounterStore, x, y *expiry.Store, k string, now int64) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 5 {
				at := now + 200_000 + int64(g*1000+i)
				if _, res, err := x.ApplyChanges(ctx, nil, []expiry.Change{{Name: k, At: at}}); err != nil || res[0].Err != nil {
					t.Errorf("concurrent change to %d: %v, %+v", at, err, res)
				}
			}
		})
	}
	wg.Wait()
	known, err := x.Deadline(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	wantTTL(t, y, k, true, known-now)
	if ms, err := s.ListMembers(ctx, expiry.RecordID(k), "", 10); err != nil || len(ms) != 1 {
		t.Fatalf("members of %q's record after concurrent changes and a read: %q, %v; want one", k, ms, err)
	}
}
