package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

func testCreate(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "likes"
	before := time.Now().Add(-time.Minute)
	c := MustCreate(t, s, id, 8)
	if c.ID != id || c.Shards != 8 || c.CreatedAt.Before(before) || c.CreatedAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("CreateCounter = %+v, want id %q, 8 shards, created now", c, id)
	}
	got, err := s.GetCounter(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != c.ID || got.Shards != c.Shards || !got.CreatedAt.Equal(c.CreatedAt) {
		t.Fatalf("GetCounter = %+v, want %+v", got, c)
	}
	if got, want := MustShards(t, s, id), make([]int64, 8); !equalShards(got, want) {
		t.Fatalf("shards of a new counter = %v, want %v", got, want)
	}
	r, err := s.ReadCounter(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.Value != 0 || r.Shards != 8 || r.Consistency != shardcounter.Strong || r.AsOf.IsZero() {
		t.Fatalf("ReadCounter of a new counter = %+v, want 0 over 8 shards, strong, with as_of", r)
	}

	t.Run("ErrExists", func(t *testing.T) {
		if err := s.Add(ctx, id, 3, 0); err != nil {
			t.Fatal(err)
		}
		_, err := s.CreateCounter(ctx, id, shardcounter.Spec{Shards: 4})
		wantCode(t, "second CreateCounter", err, shardcounter.EEXISTS)
		if !errors.Is(err, shardcounter.ErrExists) {
			t.Fatalf("errors.Is(%v, ErrExists) = false", err)
		}
		if got := MustRead(t, s, id); got != 3 {
			t.Fatalf("value after a refused create = %d, want 3", got)
		}
		if got := MustShards(t, s, id); len(got) != 8 {
			t.Fatalf("shards after a refused create = %d, want 8", len(got))
		}
	})
	t.Run("Unicode", func(t *testing.T) {
		for _, id := range []string{prefix(t) + "пост/42 ❤", prefix(t) + "a b%2F?#&=", prefix(t) + strings.Repeat("x", shardcounter.MaxIDLen-len(prefix(t)))} {
			MustCreate(t, s, id, 1)
			if err := s.Add(ctx, id, 1, 0); err != nil {
				t.Fatalf("Add(%q): %v", id, err)
			}
			if got := MustRead(t, s, id); got != 1 {
				t.Fatalf("ReadCounter(%q) = %d, want 1", id, got)
			}
		}
	})
}

func testNotFound(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "missing"
	_, err := s.GetCounter(ctx, id)
	wantCode(t, "GetCounter", err, shardcounter.ENOTFOUND)
	if !errors.Is(err, shardcounter.ErrNotFound) {
		t.Fatalf("errors.Is(%v, ErrNotFound) = false", err)
	}
	_, err = s.ReadCounter(ctx, id)
	wantCode(t, "ReadCounter", err, shardcounter.ENOTFOUND)
	_, _, err = s.ReadShards(ctx, id)
	wantCode(t, "ReadShards", err, shardcounter.ENOTFOUND)
	wantCode(t, "Add", s.Add(ctx, id, 1, 0), shardcounter.ENOTFOUND)
	_, err = s.ReshardCounter(ctx, id, 4)
	wantCode(t, "ReshardCounter", err, shardcounter.ENOTFOUND)
	wantCode(t, "DeleteCounter", s.DeleteCounter(ctx, id), shardcounter.ENOTFOUND)

	// In a batch, a missing counter fails its own item only.
	ok := prefix(t) + "present"
	MustCreate(t, s, ok, 2)
	out, err := s.Apply(ctx, []shardcounter.Increment{
		{Counter: ok, Delta: 5, Pick: 0},
		{Counter: id, Delta: 7, Pick: 0},
		{Counter: ok, Delta: 11, Pick: 1},
	})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if len(out) != 3 {
		t.Fatalf("Apply returned %d outcomes, want 3", len(out))
	}
	if out[0].Err != nil || out[2].Err != nil {
		t.Fatalf("Apply outcomes %+v: want items 0 and 2 applied", out)
	}
	wantCode(t, "Apply item on a missing counter", out[1].Err, shardcounter.ENOTFOUND)
	if got := MustRead(t, s, ok); got != 16 {
		t.Fatalf("value = %d, want 16", got)
	}
	if _, err := s.GetCounter(ctx, id); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		t.Fatalf("a failed item created its counter: GetCounter = %v", err)
	}
}

func testInvalid(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "c"
	for _, n := range []int{0, -1, shardcounter.MaxShards + 1} {
		_, err := s.CreateCounter(ctx, id, shardcounter.Spec{Shards: n})
		wantCode(t, fmt.Sprintf("CreateCounter with %d shards", n), err, shardcounter.EINVALID)
	}
	for _, bad := range []string{"", strings.Repeat("x", shardcounter.MaxIDLen+1), "a\x00b", "a\nb", "\xff\xfe"} {
		_, err := s.CreateCounter(ctx, bad, shardcounter.Spec{Shards: 1})
		wantCode(t, fmt.Sprintf("CreateCounter(%q)", bad), err, shardcounter.EINVALID)
	}
	if _, err := s.GetCounter(ctx, id); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		t.Fatalf("a refused create left a counter behind: %v", err)
	}

	MustCreate(t, s, id, 4)
	if err := s.Add(ctx, id, 9, 1); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "Add of 0", s.Add(ctx, id, 0, 0), shardcounter.EINVALID)
	for _, n := range []int{0, shardcounter.MaxShards + 1} {
		_, err := s.ReshardCounter(ctx, id, n)
		wantCode(t, fmt.Sprintf("ReshardCounter to %d", n), err, shardcounter.EINVALID)
	}
	out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 0}, {Counter: id, Delta: 1, RequestID: "a\x01"}})
	if err == nil {
		for i, o := range out {
			wantCode(t, fmt.Sprintf("Apply invalid item %d", i), o.Err, shardcounter.EINVALID)
		}
	} else {
		wantCode(t, "Apply of invalid items", err, shardcounter.EINVALID)
	}
	if got := MustShards(t, s, id); !equalShards(got, []int64{0, 9, 0, 0}) {
		t.Fatalf("shards after refused calls = %v, want [0 9 0 0]", got)
	}
}

func testDelete(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "c"
	MustCreate(t, s, id, 4)
	out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 5, RequestID: "r1"}})
	if err != nil || out[0].Err != nil {
		t.Fatalf("Apply: %v %+v", err, out)
	}
	if err := s.DeleteCounter(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetCounter(ctx, id)
	wantCode(t, "GetCounter after delete", err, shardcounter.ENOTFOUND)
	wantCode(t, "Add after delete", s.Add(ctx, id, 1, 0), shardcounter.ENOTFOUND)

	// A new counter under the same id starts from zero, with no memory of
	// the old one's request ids.
	MustCreate(t, s, id, 2)
	if got := MustShards(t, s, id); !equalShards(got, []int64{0, 0}) {
		t.Fatalf("shards of a re-created counter = %v, want [0 0]", got)
	}
	out, err = s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 5, RequestID: "r1"}})
	if err != nil || out[0].Err != nil || out[0].Duplicate {
		t.Fatalf("Apply on a re-created counter: %v %+v, want applied", err, out)
	}
	if got := MustRead(t, s, id); got != 5 {
		t.Fatalf("value = %d, want 5", got)
	}
}

func testList(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	p := prefix(t)
	names := []string{"a", "b", "b/1", "c", "d", "e"}
	for i := len(names) - 1; i >= 0; i-- { // created out of order
		MustCreate(t, s, p+names[i], i+1)
	}
	MustCreate(t, s, prefix(t)[:len(p)-1]+"-other", 1) // shares a shorter prefix only

	var got []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > len(names) {
			t.Fatalf("paging did not end: %v", got)
		}
		cs, err := s.ListCounters(ctx, p, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) > 2 {
			t.Fatalf("ListCounters returned %d counters, limit 2", len(cs))
		}
		if len(cs) == 0 {
			break
		}
		for _, c := range cs {
			got = append(got, strings.TrimPrefix(c.ID, p))
			if want := 1 + indexOf(names, strings.TrimPrefix(c.ID, p)); c.Shards != want {
				t.Fatalf("listed %q with %d shards, want %d", c.ID, c.Shards, want)
			}
		}
		after = cs[len(cs)-1].ID
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("listed %v, want %v", got, names)
	}
	cs, err := s.ListCounters(ctx, p+"b", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].ID != p+"b" || cs[1].ID != p+"b/1" {
		t.Fatalf("ListCounters(prefix %q) = %v, want b and b/1", p+"b", ids(cs))
	}
	// A prefix that holds LIKE or glob metacharacters matches literally.
	for _, meta := range []string{"%", "_", "*", "?", "[a]", "\\"} {
		MustCreate(t, s, p+"m"+meta+"x", 1)
		MustCreate(t, s, p+"mZ"+meta+"x", 1)
		cs, err := s.ListCounters(ctx, p+"m"+meta, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].ID != p+"m"+meta+"x" {
			t.Fatalf("ListCounters(prefix %q) = %v, want only %q", p+"m"+meta, ids(cs), p+"m"+meta+"x")
		}
	}
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if x == y {
			return i
		}
	}
	return -100
}

func ids(cs []*shardcounter.Counter) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}
