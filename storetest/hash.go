package storetest

import (
	"context"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter"
)

// testHashIDs checks that a store holds the counters of hashes
// (shardcounter.HashFieldID) as it holds any other: a hash's marker and
// fields are created on write, written, read one at a time and in a
// batch, listed in byte order right after the hash's name and before any
// longer name, skipped whole by a listing from AfterHash, and deleted,
// each apart from the plain counters whose ids spell the same words.
func testHashIDs(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	p := prefix(t)
	long := strings.Repeat("f", shardcounter.MaxIDLen)
	a, b := p+"a", p+"a:b"
	ids := []string{
		shardcounter.HashFieldID(b, "c"),    // HINCRBY a:b c
		shardcounter.HashFieldID(a, "b:c"),  // HINCRBY a b:c
		p + "a:b:c",                         // INCR a:b:c
		shardcounter.HashMarkerID(a),        // a's marker
		shardcounter.HashFieldID(a, long),   // the longest field
		shardcounter.HashFieldID(a, "пост"), // UTF-8
		p + "a",                             // a name that is also a hash's, as another process may leave it
		p + "a ",                            // the name that sorts right after every id of hash a
	}
	spec := &shardcounter.Spec{Shards: 2, Kind: shardcounter.KindSum}
	incs := make([]shardcounter.Increment, len(ids))
	for i, id := range ids {
		incs[i] = shardcounter.Increment{Counter: id, Delta: int64(i + 1), Pick: uint64(i), Create: spec, Total: true}
	}
	out, err := s.Apply(ctx, incs)
	if err != nil {
		t.Fatalf("Apply to hash fields: %v", err)
	}
	for i, o := range out {
		if o.Err != nil {
			t.Fatalf("Apply to %q: %v", ids[i], o.Err)
		}
	}
	for i, id := range ids {
		if got := MustRead(t, s, id); got != int64(i+1) {
			t.Errorf("ReadCounter(%q) = %d, want %d", id, got, i+1)
		}
	}
	rs, err := s.ReadCounters(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r == nil || r.ID != ids[i] || r.Value != int64(i+1) {
			t.Errorf("ReadCounters: %q read %+v, want %d", ids[i], r, i+1)
		}
	}

	// Listing: a's own counter, then its marker and fields, then "a ",
	// "a:b" and its field, "a:b:c".
	list := func(prefix, after string) []string {
		t.Helper()
		cs, err := s.ListCounters(ctx, prefix, after, 100)
		if err != nil {
			t.Fatalf("ListCounters(%q, %q): %v", prefix, after, err)
		}
		got := make([]string, len(cs))
		for i, c := range cs {
			got[i] = c.ID
		}
		return got
	}
	want := []string{p + "a", shardcounter.HashMarkerID(a), shardcounter.HashFieldID(a, "b:c"), shardcounter.HashFieldID(a, long),
		shardcounter.HashFieldID(a, "пост"), p + "a ", p + "a:b:c"}
	want = append(want[:6], append([]string{shardcounter.HashFieldID(b, "c")}, want[6:]...)...)
	if got := list(p, ""); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("ListCounters(prefix) = %q, want %q", got, want)
	}
	if got := list(shardcounter.HashFieldPrefix(a), ""); len(got) != 4 || got[0] != shardcounter.HashMarkerID(a) {
		t.Errorf("ListCounters(hash a's prefix) = %q, want its marker and 3 fields", got)
	}
	if got := list(p, shardcounter.AfterHash(a)); len(got) != 3 || got[0] != p+"a " {
		t.Errorf("ListCounters after AfterHash(a) = %q, want %q first and 3 in all", got, p+"a ")
	}
	if got := list(p, shardcounter.HashFieldID(a, "b:c")); len(got) != 5 || got[0] != shardcounter.HashFieldID(a, long) {
		t.Errorf("ListCounters after a field = %q, want the next field first", got)
	}

	// Deleting a field leaves the hash's other counters and the plain
	// ones.
	if err := s.DeleteCounter(ctx, shardcounter.HashFieldID(a, "b:c")); err != nil {
		t.Fatal(err)
	}
	_, err = s.ReadCounter(ctx, shardcounter.HashFieldID(a, "b:c"))
	wantCode(t, "ReadCounter of a deleted field", err, shardcounter.ENOTFOUND)
	if got := MustRead(t, s, p+"a:b:c"); got != 3 {
		t.Errorf("INCR a:b:c's counter after HDEL a b:c = %d, want 3", got)
	}
	if got := MustRead(t, s, shardcounter.HashFieldID(b, "c")); got != 1 {
		t.Errorf("HINCRBY a:b c's counter after HDEL a b:c = %d, want 1", got)
	}
}
