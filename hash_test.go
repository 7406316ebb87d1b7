package shardcounter_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter"
)

func TestHashIDs(t *testing.T) {
	// The example: three different counters.
	ids := map[string]bool{
		shardcounter.HashFieldID("a:b", "c"): true,
		shardcounter.HashFieldID("a", "b:c"): true,
		"a:b:c":                              true,
	}
	if len(ids) != 3 {
		t.Fatalf("HINCRBY a:b c, HINCRBY a b:c and INCR a:b:c share a counter: %v", ids)
	}
	for id := range ids {
		if err := shardcounter.ValidateID(shardcounter.CounterIDKind, id); err != nil {
			t.Errorf("ValidateID(counter id, %q) = %v", id, err)
		}
	}
	long := strings.Repeat("x", shardcounter.MaxIDLen)
	for _, ok := range []string{
		shardcounter.HashFieldID(long, long),
		shardcounter.HashMarkerID("post:42"),
		shardcounter.AfterHash(long),
	} {
		if err := shardcounter.ValidateID(shardcounter.CounterIDKind, ok); err != nil {
			t.Errorf("ValidateID(counter id, %q) = %v", ok, err)
		}
		if len(ok) > shardcounter.MaxCounterIDLen {
			t.Errorf("%q is %d bytes, over MaxCounterIDLen", ok, len(ok))
		}
	}
	for _, bad := range []string{"\x1f", "\x1fa", "a\x1fb\x1fc", "a\x1f\n", long + "x\x1fa", "a\x1f" + long + "x"} {
		if err := shardcounter.ValidateID(shardcounter.CounterIDKind, bad); !errors.Is(err, shardcounter.ErrInvalid) {
			t.Errorf("ValidateID(counter id, %q) = %v, want ErrInvalid", bad, err)
		}
	}
	// A name, a member or a request id never holds the separator.
	for _, kind := range []string{"member", "request id", "key"} {
		if err := shardcounter.ValidateID(kind, "a\x1fb"); !errors.Is(err, shardcounter.ErrInvalid) {
			t.Errorf("ValidateID(%s, a␟b) = %v, want ErrInvalid", kind, err)
		}
	}
	if err := shardcounter.ValidateName(shardcounter.CounterIDKind, "a\x1fb"); !errors.Is(err, shardcounter.ErrInvalid) {
		t.Errorf("ValidateName(counter id, a␟b) = %v, want ErrInvalid", err)
	}
	if h, f, ok := shardcounter.SplitHashID(shardcounter.HashFieldID("post:42", "likes")); !ok || h != "post:42" || f != "likes" {
		t.Errorf("SplitHashID = %q, %q, %v", h, f, ok)
	}
	if _, _, ok := shardcounter.SplitHashID("post:42:likes"); ok {
		t.Error("SplitHashID of a plain id says it is a hash's")
	}
}

// FuzzHashIDs checks that the mapping of names and (hash, field) pairs to
// counter ids is injective: two different pairs, or a pair and a name,
// never share an id; a field's id splits back into its pair; and every id
// ValidateID accepts as a counter id is a name, a field's id or a marker.
func FuzzHashIDs(f *testing.F) {
	f.Add("a:b", "c", "a", "b:c", "a:b:c")
	f.Add("post:42", "likes", "post:42", "likes", "post:42\x1flikes")
	f.Add("h", "", "h", "f", "h\x1f")
	f.Fuzz(func(t *testing.T, h1, f1, h2, f2, id string) {
		name := func(s string) bool { return shardcounter.ValidateName("name", s) == nil }
		if name(h1) && name(f1) {
			id1 := shardcounter.HashFieldID(h1, f1)
			if err := shardcounter.ValidateID(shardcounter.CounterIDKind, id1); err != nil {
				t.Fatalf("the id of field %q of %q is refused: %v", f1, h1, err)
			}
			if h, f, ok := shardcounter.SplitHashID(id1); !ok || h != h1 || f != f1 {
				t.Fatalf("SplitHashID(%q) = %q, %q, %v; want %q, %q", id1, h, f, ok, h1, f1)
			}
			if name(id1) {
				t.Fatalf("the id of field %q of %q is also a name", f1, h1)
			}
			if name(h2) && name(f2) && id1 == shardcounter.HashFieldID(h2, f2) && (h1 != h2 || f1 != f2) {
				t.Fatalf("(%q, %q) and (%q, %q) share id %q", h1, f1, h2, f2, id1)
			}
			if name(h2) && id1 == shardcounter.HashMarkerID(h2) {
				t.Fatalf("field %q of %q has the id of %q's marker", f1, h1, h2)
			}
		}
		if shardcounter.ValidateID(shardcounter.CounterIDKind, id) != nil {
			return
		}
		if shardcounter.IsInternalID(id) {
			// An internal record's id: stores hold it, callers never
			// write it, and it is no name.
			w := shardcounter.Write{Counter: id, Delta: 1}
			if name(id) || shardcounter.ValidateWrite(w) == nil {
				t.Fatalf("internal id %q is a name, or a client may write it", id)
			}
			return
		}
		h, f, ok := shardcounter.SplitHashID(id)
		switch {
		case !ok && !name(id):
			t.Fatalf("counter id %q is accepted but is not a name", id)
		case ok && (!name(h) || (f != "" && !name(f))):
			t.Fatalf("counter id %q is accepted but its parts %q, %q are not names", id, h, f)
		case ok && f == "" && id != shardcounter.HashMarkerID(h):
			t.Fatalf("counter id %q is not its hash's marker", id)
		case ok && f != "" && id != shardcounter.HashFieldID(h, f):
			t.Fatalf("counter id %q does not join back from %q, %q", id, h, f)
		}
	})
}
