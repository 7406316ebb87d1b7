package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/expiry"
)

// testExpiry checks deadlines (package expiry) over the store: a counter
// created with a ttl, or given a deadline, reads as absent past it on
// every read, through this wrapper and another over the same store (as
// another process sees it); a write to it starts a new counter without a
// deadline; a hash expires whole; PERSIST keeps a counter; a deadline in
// the past deletes at once; internal records are neither listed nor
// reachable; and writes reclaim expired names nobody touches again.
func testExpiry(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	p := prefix(t)
	clk := NewClock(time.Now().UTC().Truncate(time.Millisecond))
	x := expiry.Wrap(s, expiry.Options{Now: clk.Now, Refresh: time.Hour})
	y := expiry.Wrap(s, expiry.Options{Now: clk.Now, Refresh: time.Nanosecond}) // another process, caching nothing

	a := p + "a"
	c, err := x.CreateCounter(ctx, a, shardcounter.Spec{Shards: 3, TTL: shardcounter.Duration(10 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if want := clk.Now().Add(10 * time.Second); c.ExpiresAt == nil || !c.ExpiresAt.Equal(want) {
		t.Fatalf("CreateCounter with ttl 10s: expires_at %v, want %v", c.ExpiresAt, want)
	}
	expiryApply(t, x, a, 5, 5)
	if g, err := y.GetCounter(ctx, a); err != nil || g.ExpiresAt == nil || !g.ExpiresAt.Equal(*c.ExpiresAt) {
		t.Fatalf("GetCounter through another wrapper: %+v, %v; want expires_at %v", g, err, c.ExpiresAt)
	}
	wantTTL(t, x, a, true, 10000)

	clk.Advance(10 * time.Second)
	for _, w := range []*expiry.Store{x, y} {
		wantGone(t, w, p, a)
	}
	wantTTL(t, x, a, false, -2)
	expiryApply(t, x, a, 3, 3) // a new counter, not 5+3
	if g, err := y.GetCounter(ctx, a); err != nil || g.ExpiresAt != nil {
		t.Fatalf("GetCounter of the counter written after expiry: %+v, %v; want no deadline", g, err)
	}
	wantTTL(t, y, a, true, -1)

	// A hash expires whole, and EXPIRE on a missing name changes nothing.
	h := p + "h"
	expiryApply(t, x, shardcounter.HashFieldID(h, "f1"), 1, 1)
	expiryApply(t, x, shardcounter.HashFieldID(h, "f2"), 2, 2)
	expiryExpire(t, x, h, clk.Now().Add(5*time.Second), true)
	expiryExpire(t, x, p+"missing", clk.Now().Add(5*time.Second), false)
	clk.Advance(5 * time.Second)
	for _, w := range []*expiry.Store{x, y} {
		wantGone(t, w, p, shardcounter.HashFieldID(h, "f1"), shardcounter.HashFieldID(h, "f2"))
	}
	expiryApply(t, y, shardcounter.HashFieldID(h, "f2"), 7, 7)
	if v := MustRead(t, x, shardcounter.HashFieldID(h, "f2")); v != 7 {
		t.Fatalf("field written after its hash expired: %d, want 7", v)
	}

	// PERSIST keeps a counter past its old deadline; a deadline now deletes.
	b := p + "b"
	expiryApply(t, x, b, 4, 4)
	expiryExpire(t, x, b, clk.Now().Add(time.Second), true)
	if ok, err := y.PersistCounter(ctx, b); !ok || err != nil {
		t.Fatalf("PersistCounter: %v, %v; want true", ok, err)
	}
	if ok, err := y.PersistCounter(ctx, b); ok || err != nil {
		t.Fatalf("PersistCounter without a deadline: %v, %v; want false", ok, err)
	}
	clk.Advance(2 * time.Second)
	if v := MustRead(t, y, b); v != 4 {
		t.Fatalf("persisted counter: %d, want 4", v)
	}
	expiryExpire(t, y, b, clk.Now(), true)
	if _, err := s.GetCounter(ctx, b); !errors.Is(err, shardcounter.ErrNotFound) {
		t.Fatalf("a deadline that is now did not delete %q from the store: %v", b, err)
	}

	// Internal records are not reachable through the wrapper.
	_, err = x.ReadCounter(ctx, expiry.RecordID(a))
	wantCode(t, "ReadCounter of a deadline record", err, shardcounter.EINVALID)
	cs, err := x.ListCounters(ctx, "", "", shardcounter.MaxListLimit)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if shardcounter.IsInternalID(c.ID) {
			t.Fatalf("ListCounters lists internal record %q", c.ID)
		}
	}
	testExpiryReclaim(t, s, x, clk)
}

// testExpiryReclaim checks that expired names nobody reads or writes
// again are deleted from the store, with their records, by the sweeps
// that other writes start.
func testExpiryReclaim(t *testing.T, s shardcounter.CounterStore, x *expiry.Store, clk *Clock) {
	p := prefix(t) + "r/"
	names := []string{p + "0", p + "1", p + "2", shardcounter.HashFieldID(p+"3", "f")}
	for _, id := range names {
		expiryApply(t, x, id, 1, 1)
		expiryExpire(t, x, shardcounter.NameOf(id), clk.Now().Add(time.Second), true)
	}
	clk.Advance(2 * time.Second)
	other := prefix(t) + "other"
	stop := time.Now().Add(30 * time.Second)
	for {
		left := expiryLeft(t, s, names)
		if len(left) == 0 {
			return
		}
		if time.Now().After(stop) {
			t.Fatalf("writes did not reclaim what expired: %q", left)
		}
		expiryApplyAny(t, x, other) // a write starts a sweep when one is due
		time.Sleep(20 * time.Millisecond)
	}
}

// expiryLeft returns what the store still holds of the names of ids: the
// counters, their deadline records and their index entries.
func expiryLeft(t *testing.T, s shardcounter.CounterStore, ids []string) []string {
	ctx := context.Background()
	var left []string
	for _, id := range ids {
		for _, rec := range []string{id, expiry.RecordID(shardcounter.NameOf(id))} {
			if _, err := s.GetCounter(ctx, rec); err == nil {
				left = append(left, rec)
			} else if !errors.Is(err, shardcounter.ErrNotFound) {
				t.Fatal(err)
			}
		}
	}
	cs, err := s.ListCounters(ctx, shardcounter.InternalPrefix+"q", "", shardcounter.MaxListLimit)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		for _, id := range ids {
			if strings.HasSuffix(c.ID, shardcounter.NameOf(id)) {
				left = append(left, c.ID)
			}
		}
	}
	return left
}

// expiryApply adds delta to id (created when missing) and checks the
// total when the store gives one.
func expiryApply(t *testing.T, s shardcounter.CounterStore, id string, delta, want int64) {
	t.Helper()
	spec := &shardcounter.Spec{Shards: 2, Kind: shardcounter.KindSum}
	out, err := s.Apply(context.Background(), []shardcounter.Increment{{Counter: id, Delta: delta, Create: spec, Total: true}})
	if err != nil || out[0].Err != nil {
		t.Fatalf("Apply %+d to %q: %v, %+v", delta, id, err, out)
	}
	if out[0].Total != nil && *out[0].Total != want {
		t.Fatalf("Apply %+d to %q: total %d, want %d", delta, id, *out[0].Total, want)
	}
	if v := MustRead(t, s, id); v != want {
		t.Fatalf("after Apply %+d to %q: read %d, want %d", delta, id, v, want)
	}
}

// expiryApplyAny writes 1 to id without checking its value.
func expiryApplyAny(t *testing.T, s shardcounter.CounterStore, id string) {
	t.Helper()
	spec := &shardcounter.Spec{Shards: 1, Kind: shardcounter.KindSum}
	if out, err := s.Apply(context.Background(), []shardcounter.Increment{{Counter: id, Delta: 1, Create: spec}}); err != nil || out[0].Err != nil {
		t.Fatalf("Apply to %q: %v, %+v", id, err, out)
	}
}

func expiryExpire(t *testing.T, x *expiry.Store, name string, at time.Time, want bool) {
	t.Helper()
	if ok, err := x.ExpireCounter(context.Background(), name, at); err != nil || ok != want {
		t.Fatalf("ExpireCounter(%q): %v, %v; want %v", name, ok, err, want)
	}
}

func wantTTL(t *testing.T, x *expiry.Store, name string, exists bool, ms int64) {
	t.Helper()
	got, err := x.CounterTTL(context.Background(), name)
	if err != nil || got.Exists != exists || got.RemainingMS != ms {
		t.Fatalf("CounterTTL(%q) = %+v, %v; want exists %v, remaining %d ms", name, got, err, exists, ms)
	}
}

// wantGone checks that every read reads the counters as absent.
func wantGone(t *testing.T, x *expiry.Store, p string, ids ...string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		_, err := x.ReadCounter(ctx, id)
		wantCode(t, "ReadCounter of an expired counter", err, shardcounter.ENOTFOUND)
		_, err = x.GetCounter(ctx, id)
		wantCode(t, "GetCounter of an expired counter", err, shardcounter.ENOTFOUND)
		_, _, err = x.ReadShards(ctx, id)
		wantCode(t, "ReadShards of an expired counter", err, shardcounter.ENOTFOUND)
	}
	rs, err := x.ReadCounters(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r != nil {
			t.Fatalf("ReadCounters read expired %q: %+v", ids[i], r)
		}
	}
	cs, err := x.ListCounters(ctx, p, "", shardcounter.MaxListLimit)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		for _, id := range ids {
			if c.ID == id {
				t.Fatalf("ListCounters lists expired %q", id)
			}
		}
	}
}
