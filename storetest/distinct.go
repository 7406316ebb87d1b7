package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// The cases in this file check distinct counters (DESIGN invariant 8,
// issue 14): the value is the number of members present, exactly; adding a
// present member or removing an absent one changes nothing; a member
// lives on shard shard.ForMember(member) mod n, so the shards' values are
// the members counted per shard.

// MustCreateDistinct creates a distinct counter or fails the test.
func MustCreateDistinct(tb testing.TB, s shardcounter.CounterStore, id string, shards int) {
	tb.Helper()
	if _, err := s.CreateCounter(context.Background(), id, shardcounter.Spec{Shards: shards, Kind: shardcounter.KindDistinct}); err != nil {
		tb.Fatalf("CreateCounter(%q, distinct, %d): %v", id, shards, err)
	}
}

// member returns the increment that adds (present) or removes a member.
func member(id, m string, present bool) shardcounter.Increment {
	inc := shardcounter.Increment{Counter: id, Member: m, Delta: 1}
	if !present {
		inc.Delta = -1
	}
	return inc
}

// listMembers pages through every member of a distinct counter, limit at
// a time, checking that each page is in byte order and continues the one
// before.
func listMembers(tb testing.TB, s shardcounter.CounterStore, id string, limit int) []string {
	tb.Helper()
	var all []string
	after := ""
	for {
		page, err := s.ListMembers(context.Background(), id, after, limit)
		if err != nil {
			tb.Fatalf("ListMembers(%q, after %q): %v", id, after, err)
		}
		if len(page) > limit {
			tb.Fatalf("ListMembers returned %d members, limit %d", len(page), limit)
		}
		if len(page) == 0 {
			return all
		}
		for _, m := range page {
			if m <= after {
				tb.Fatalf("ListMembers after %q returned %q: not in byte order", after, m)
			}
			after = m
		}
		all = append(all, page...)
	}
}

// CheckMembers fails the test unless the distinct counter's value, its
// listed members, IsMember and its shards (each the count of its members
// by shard.ForMember(m) mod n) all agree with want (nil: with what is
// listed), and returns the members. Stores use it in their own tests, after
// a crash say.
func CheckMembers(tb testing.TB, s shardcounter.CounterStore, id string, want []string) []string {
	tb.Helper()
	got := listMembers(tb, s, id, 7)
	if want != nil {
		want = slices.Clone(want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			tb.Fatalf("members of %s = %q, want %q", id, got, want)
		}
	}
	if v := MustRead(tb, s, id); v != int64(len(got)) {
		tb.Fatalf("value of %s = %d, but it lists %d members", id, v, len(got))
	}
	vals := MustShards(tb, s, id)
	counts := make([]int64, len(vals))
	for _, m := range got {
		counts[shard.Of(shard.ForMember(m), len(vals))]++
		if ok, err := s.IsMember(context.Background(), id, m); err != nil || !ok {
			tb.Fatalf("IsMember(%q) = %v, %v for a listed member", m, ok, err)
		}
	}
	if !equalShards(vals, counts) {
		tb.Fatalf("shards of %s = %v, but its members count %v per shard ForMember(m) mod %d", id, vals, counts, len(vals))
	}
	return got
}

// testDistinct checks a distinct counter's membership through Apply: adds
// and removals that change it or not, their order in a batch, request ids,
// bad members, reshards and delete. The subtests run in order on one
// counter, each from the members the one before left.
func testDistinct(t *testing.T, s shardcounter.CounterStore) {
	id := prefix(t) + "likes"
	MustCreateDistinct(t, s, id, 4)
	testDistinctMembership(t, s, id)
	t.Run("RequestID", func(t *testing.T) { testDistinctRequestID(t, s, id) })
	t.Run("Errors", func(t *testing.T) { testDistinctErrors(t, s, id) })
	t.Run("Reshard", func(t *testing.T) { testDistinctReshard(t, s, id) })
	t.Run("CreateOtherKind", func(t *testing.T) { testDistinctCreateOtherKind(t, s, id) })
	t.Run("Delete", func(t *testing.T) { testDistinctDelete(t, s, id) })
}

// applyMembers applies incs as one batch and fails the test unless every
// item applied without error.
func applyMembers(t *testing.T, s shardcounter.CounterStore, incs ...shardcounter.Increment) []shardcounter.Outcome {
	t.Helper()
	out, err := s.Apply(context.Background(), incs)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	for i, o := range out {
		if o.Err != nil {
			t.Fatalf("outcome %d of %+v: %v", i, incs[i], o.Err)
		}
	}
	return out
}

// wantMemberOutcomes fails the test unless each outcome is a first
// application that left membership unchanged or not, as unchanged says.
func wantMemberOutcomes(t *testing.T, out []shardcounter.Outcome, unchanged ...bool) {
	t.Helper()
	for i, o := range out {
		if o.Duplicate || o.Unchanged != unchanged[i] {
			t.Fatalf("outcome %d = %+v, want unchanged=%v", i, o, unchanged[i])
		}
	}
}

// testDistinctMembership adds and removes members of the empty counter id,
// leaving bob, carol and erin: adding a present member or removing an
// absent one changes nothing, and items on one member apply in batch
// order.
func testDistinctMembership(t *testing.T, s shardcounter.CounterStore, id string) {
	wantMemberOutcomes(t, applyMembers(t, s, member(id, "alice", true)), false)
	wantMemberOutcomes(t, applyMembers(t, s, member(id, "alice", true)), true) // present: nothing changes
	wantMemberOutcomes(t, applyMembers(t, s, member(id, "bob", true), member(id, "carol", true), member(id, "alice", false)), false, false, false)
	wantMemberOutcomes(t, applyMembers(t, s, member(id, "alice", false)), true) // absent: nothing changes
	CheckMembers(t, s, id, []string{"bob", "carol"})
	if ok, err := s.IsMember(context.Background(), id, "alice"); err != nil || ok {
		t.Fatalf("IsMember(alice) after removing her = %v, %v", ok, err)
	}

	// Items on one member apply in batch order.
	wantMemberOutcomes(t, applyMembers(t, s,
		member(id, "dave", true), member(id, "dave", true),
		member(id, "dave", false), member(id, "dave", false),
		member(id, "erin", true),
	), false, true, false, true, false)
	CheckMembers(t, s, id, []string{"bob", "carol", "erin"})
}

// testDistinctRequestID checks that a request id makes a retry of a member
// write a duplicate, even after a later write changed the member back, and
// that a write which changed nothing still records its id.
func testDistinctRequestID(t *testing.T, s shardcounter.CounterStore, id string) {
	withID := func(inc shardcounter.Increment, rid string) shardcounter.Increment {
		inc.RequestID = rid
		return inc
	}
	wantMemberOutcomes(t, applyMembers(t, s, withID(member(id, "frank", true), "r1")), false)
	wantMemberOutcomes(t, applyMembers(t, s, withID(member(id, "frank", false), "r2")), false)
	if o := applyMembers(t, s, withID(member(id, "frank", true), "r1"))[0]; !o.Duplicate {
		t.Fatalf("retry of an add after a removal: %+v, want duplicate", o)
	}
	// An unchanged write is applied: its request id is recorded.
	wantMemberOutcomes(t, applyMembers(t, s, withID(member(id, "bob", true), "r3")), true)
	if o := applyMembers(t, s, withID(member(id, "bob", false), "r3"))[0]; !o.Duplicate {
		t.Fatalf("a removal reusing an unchanged add's request id: %+v, want duplicate", o)
	}
	CheckMembers(t, s, id, []string{"bob", "carol", "erin"})
}

// testDistinctErrors checks the errors of member reads and writes: a
// missing counter, an empty member, and, item by item in a batch that
// applies its valid items, a delta other than ±1 and members that are not
// valid ids.
func testDistinctErrors(t *testing.T, s shardcounter.CounterStore, id string) {
	ctx := context.Background()
	_, err := s.IsMember(ctx, prefix(t)+"missing", "bob")
	wantCode(t, "IsMember of a missing counter", err, shardcounter.ENOTFOUND)
	_, err = s.ListMembers(ctx, prefix(t)+"missing", "", 10)
	wantCode(t, "ListMembers of a missing counter", err, shardcounter.ENOTFOUND)
	_, err = s.IsMember(ctx, id, "")
	wantCode(t, "IsMember of an empty member", err, shardcounter.EINVALID)
	out, err := s.Apply(ctx, []shardcounter.Increment{
		{Counter: id, Member: "x", Delta: 2},
		{Counter: id, Member: "bad\x00member", Delta: 1},
		{Counter: id, Member: strings.Repeat("m", shardcounter.MaxIDLen+1), Delta: 1},
		member(id, "zoe", true),
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		wantCode(t, fmt.Sprintf("invalid member item %d", i), out[i].Err, shardcounter.EINVALID)
	}
	if out[3].Err != nil {
		t.Fatalf("valid item beside invalid ones: %v", out[3].Err)
	}
	CheckMembers(t, s, id, []string{"bob", "carol", "erin", "zoe"})
}

// testDistinctReshard grows and shrinks the counter: its members move
// with it, each to the shard ForMember puts it on.
func testDistinctReshard(t *testing.T, s shardcounter.CounterStore, id string) {
	for _, n := range []int{7, 2, 16, 1, 3} {
		if _, err := s.ReshardCounter(context.Background(), id, n); err != nil {
			t.Fatal(err)
		}
		CheckMembers(t, s, id, []string{"bob", "carol", "erin", "zoe"})
	}
}

// testDistinctCreateOtherKind checks that members are judged on the
// counter as it is, not on an item's Create, which an existing counter
// ignores: member writes whose Create names an approx counter (a spec
// that does not match) find present members present and absent ones
// absent, also right after a reshard, when a store may have forgotten
// what it knew of the counter (its cache).
func testDistinctCreateOtherKind(t *testing.T, s shardcounter.CounterStore, id string) {
	approx := func(inc shardcounter.Increment) shardcounter.Increment {
		inc.Create = &shardcounter.Spec{Shards: 2, Kind: shardcounter.KindApprox}
		return inc
	}
	reshard := func(n int) {
		if _, err := s.ReshardCounter(context.Background(), id, n); err != nil {
			t.Fatal(err)
		}
	}
	reshard(5)
	wantMemberOutcomes(t, applyMembers(t, s,
		approx(member(id, "bob", true)), approx(member(id, "yves", true)), approx(member(id, "carol", false)),
	), true, false, false)
	CheckMembers(t, s, id, []string{"bob", "erin", "yves", "zoe"})
	reshard(3)
	wantMemberOutcomes(t, applyMembers(t, s,
		approx(member(id, "yves", false)), approx(member(id, "yves", false)), approx(member(id, "erin", true)), approx(member(id, "carol", false)),
	), false, true, true, true)
	CheckMembers(t, s, id, []string{"bob", "erin", "zoe"})
}

// testDistinctDelete deletes the counter and creates it again: no member
// and no request id of the deleted counter is left.
func testDistinctDelete(t *testing.T, s shardcounter.CounterStore, id string) {
	ctx := context.Background()
	if err := s.DeleteCounter(ctx, id); err != nil {
		t.Fatal(err)
	}
	MustCreateDistinct(t, s, id, 2)
	CheckMembers(t, s, id, []string{})
	if ok, err := s.IsMember(ctx, id, "bob"); err != nil || ok {
		t.Fatalf("IsMember(bob) after the counter was deleted and re-created = %v, %v", ok, err)
	}
	// The deleted counter's request ids went with it.
	if o := applyMembers(t, s, shardcounter.Increment{Counter: id, Member: "frank", Delta: 1, RequestID: "r1"})[0]; o.Duplicate || o.Unchanged {
		t.Fatalf("add with an id of the deleted counter: %+v, want applied", o)
	}
}

// testListMembers checks paging: every member once, in byte order, pages
// of at most limit, after a value that is not a member too.
func testListMembers(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "c-a-longer-id"
	MustCreateDistinct(t, s, id, 3)
	members := []string{"b", "a", "A", "é", "a b", "z/1", "ü", "aa", "😀", "B", "a%", "a_", "~", "0"}
	var incs []shardcounter.Increment
	for _, m := range members {
		incs = append(incs, member(id, m, true))
	}
	if _, err := s.Apply(ctx, incs); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(members)
	slices.Sort(want) // byte order
	for _, limit := range []int{1, 3, 100} {
		if got := listMembers(t, s, id, limit); !slices.Equal(got, want) {
			t.Fatalf("members in pages of %d = %q, want %q", limit, got, want)
		}
	}
	page, err := s.ListMembers(ctx, id, "ab", 3)
	if err != nil {
		t.Fatal(err)
	}
	i, _ := slices.BinarySearch(want, "ab")
	if !slices.Equal(page, want[i:i+3]) {
		t.Fatalf("ListMembers after %q = %q, want %q", "ab", page, want[i:i+3])
	}
	CheckMembers(t, s, id, members)

	// After the last member, the next members in the store belong to
	// other counters, here one whose id is short and sorts after: nothing.
	next := prefix(t) + "d"
	MustCreateDistinct(t, s, next, 1)
	if _, err := s.Apply(ctx, []shardcounter.Increment{member(next, "x", true)}); err != nil {
		t.Fatal(err)
	}
	for _, after := range []string{"😀", "😀😀", "\U0010FFFF"} {
		if page, err := s.ListMembers(ctx, id, after, 3); err != nil || len(page) != 0 {
			t.Fatalf("ListMembers after the last member (%q) = %q, %v; want none", after, page, err)
		}
	}
}

// testMembersConcurrent adds and removes the same members from many
// goroutines at once, with and without request ids, while readers check
// that the value never leaves [0, members] and, when reshard is set, a
// resharder changes the shard count up and down. The changes the outcomes
// report must add up to the value: no add or removal is lost or doubled.
// Each goroutine also owns members of its own, whose final state it knows.
func testMembersConcurrent(t *testing.T, s shardcounter.CounterStore, reshard bool) {
	ctx := context.Background()
	id := prefix(t) + "c"
	MustCreateDistinct(t, s, id, 4)
	const writers, pool = 12, 10
	n := scale(10, 30)
	var net atomic.Int64 // adds that changed membership minus removals that did
	owned := make([]map[string]bool, writers)
	done := make(chan struct{})
	var wg, others sync.WaitGroup
	for w := range writers {
		owned[w] = make(map[string]bool)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for i := range n {
				var incs []shardcounter.Increment
				for range 1 + rng.IntN(3) {
					var inc shardcounter.Increment
					if rng.IntN(3) == 0 {
						m := fmt.Sprintf("own-%d-%d", w, rng.IntN(4))
						inc = member(id, m, rng.IntN(2) == 0)
					} else {
						inc = member(id, fmt.Sprintf("shared-%d", rng.IntN(pool)), rng.IntN(2) == 0)
					}
					if rng.IntN(2) == 0 {
						inc.RequestID = fmt.Sprintf("w%d-%d-%d", w, i, len(incs))
					}
					incs = append(incs, inc)
				}
				out, err := s.Apply(ctx, incs)
				if err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
				for j, o := range out {
					switch {
					case o.Err != nil || o.Duplicate:
						t.Errorf("outcome of %+v: %+v, want applied", incs[j], o)
						return
					case !o.Unchanged:
						net.Add(incs[j].Delta)
					}
					if strings.HasPrefix(incs[j].Member, "own-") {
						owned[w][incs[j].Member] = incs[j].Delta > 0
					}
				}
			}
		})
	}
	readUntil(t, &others, s, id, 1, done, monotonic{time.Now()}, func(_, _, v int64) {
		if v < 0 || v > pool+writers*4 {
			t.Errorf("a strong read of the member count = %d, outside [0, %d]", v, pool+writers*4)
		}
	})
	if reshard {
		others.Go(func() { reshardUntil(t, s, []string{id}, done) })
	}
	wg.Wait()
	close(done)
	others.Wait()
	if t.Failed() {
		return
	}

	got := CheckMembers(t, s, id, nil)
	if v := int64(len(got)); v != net.Load() {
		t.Fatalf("%d members, but the outcomes added %d net: a change was lost or doubled", v, net.Load())
	}
	for w := range writers {
		for m, present := range owned[w] {
			if slices.Contains(got, m) != present {
				t.Fatalf("member %s: present %v, but its only writer's last write left it present=%v", m, !present, present)
			}
		}
	}

	// Many adds of one member at once count once.
	var changed atomic.Int64
	var same sync.WaitGroup
	for range 50 {
		same.Go(func() {
			out, err := s.Apply(ctx, []shardcounter.Increment{member(id, "same", true)})
			if err != nil || out[0].Err != nil {
				t.Errorf("add of one member from 50 goroutines: %v %+v", err, out)
				return
			}
			if !out[0].Unchanged {
				changed.Add(1)
			}
		})
	}
	same.Wait()
	if changed.Load() != 1 {
		t.Fatalf("50 concurrent adds of one member: %d changed it, want 1", changed.Load())
	}
	CheckMembers(t, s, id, append(got, "same"))
}
