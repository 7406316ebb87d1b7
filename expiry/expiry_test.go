package expiry

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

// FuzzIndexID checks that an index entry's id gives back its deadline and
// name, that it is a valid counter id for stores, and that parseIndexID
// refuses what is not an entry's id without panicking.
func FuzzIndexID(f *testing.F) {
	f.Add(int64(1764087062500), "rate:u1", "\x1eq000001")
	f.Add(int64(0), "a", "")
	f.Fuzz(func(t *testing.T, ms int64, name, other string) {
		parseIndexID(other) // must not panic
		if ms < 0 || shardcounter.ValidateName("name", name) != nil {
			return
		}
		id := IndexID(ms, name)
		got, n, ok := parseIndexID(id)
		if !ok || got != ms || n != name {
			t.Fatalf("parseIndexID(IndexID(%d, %q)) = %d, %q, %v", ms, name, got, n, ok)
		}
		if err := shardcounter.ValidateID(shardcounter.CounterIDKind, id); err != nil {
			t.Fatalf("IndexID(%d, %q) is no counter id: %v", ms, name, err)
		}
		if err := shardcounter.ValidateID(shardcounter.CounterIDKind, RecordID(name)); err != nil {
			t.Fatalf("RecordID(%q) is no counter id: %v", name, err)
		}
		if !strings.HasPrefix(id, shardcounter.InternalPrefix) || id >= skipInternal {
			t.Fatalf("IndexID(%d, %q) = %q does not sort among the internal ids", ms, name, id)
		}
	})
}

// TestIndexOrder checks that index entries sort by deadline, the order
// the sweep reads them in.
func TestIndexOrder(t *testing.T) {
	if !(IndexID(9, "z") < IndexID(10, "a") && IndexID(10, "a") < IndexID(1<<40, "")) {
		t.Fatal("index ids do not sort by deadline")
	}
}

// TestCache checks that the cache forgets what it read after refresh.
func TestCache(t *testing.T) {
	c := newCache(50 * time.Millisecond)
	c.put("a", entry{deadline: 7})
	if d, ok := c.get("a"); !ok || d.deadline != 7 {
		t.Fatalf("get after put: %d, %v", d.deadline, ok)
	}
	time.Sleep(60 * time.Millisecond)
	if _, ok := c.get("a"); ok {
		t.Fatal("an entry older than refresh was trusted")
	}
	c.put("b", entry{deadline: 1}) // turns the generations
	c.put("c", entry{deadline: 2})
	if _, ok := c.get("a"); ok {
		t.Fatal("an entry of a dropped generation was kept")
	}
}

// TestMember checks a record's member against its format, %016x of the
// stamp's complement and %016x of the deadline, which stored records
// hold and parseMember reads back.
func TestMember(t *testing.T) {
	for _, c := range [][2]int64{{1, 1}, {1764087062500123456, 1764087062500}, {0, 0}, {math.MaxInt64, math.MaxInt64}} {
		got := member(c[0], c[1])
		if want := fmt.Sprintf("%016x%016x", math.MaxInt64-c[0], c[1]); got != want {
			t.Errorf("member(%d, %d) = %q, want %q", c[0], c[1], got, want)
		}
		if d, ok := parseMember(got); !ok || d != c[1] {
			t.Errorf("parseMember(member(%d, %d)) = %d, %v", c[0], c[1], d, ok)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = member(42, 1764087062500) }); n > 1 {
		t.Errorf("member made %.0f allocations, want 1", n)
	}
}
