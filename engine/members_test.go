package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

func changed(res *shardcounter.WriteResult) bool { return res.Changed != nil && *res.Changed }

// TestMembers adds and removes members of a distinct counter that the
// first write creates: each result says whether membership changed, and
// the value is the number of members present.
func TestMembers(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, store shardcounter.CounterStore) {
		e := MustNew(t, store, engine.Config{DefaultShards: 4})
		ctx := context.Background()
		for _, step := range []struct {
			w       shardcounter.Write
			changed bool
		}{
			{shardcounter.AddMember("likes", "alice"), true},
			{shardcounter.AddMember("likes", "alice"), false},
			{shardcounter.AddMember("likes", "bob"), true},
			{shardcounter.RemoveMember("likes", "alice"), true},
			{shardcounter.RemoveMember("likes", "carol"), false},
		} {
			res, err := e.WriteCounter(ctx, step.w)
			if err != nil || !res.Applied || res.Member != step.w.Member || changed(res) != step.changed || res.Changed == nil {
				t.Fatalf("WriteCounter(%s %v) = %+v, %v; want applied, changed %v", step.w.Member, *step.w.Present, res, err, step.changed)
			}
		}
		c, err := e.GetCounter(ctx, "likes")
		if err != nil || c.Kind != shardcounter.KindDistinct || c.Shards != 4 {
			t.Fatalf("GetCounter = %+v, %v; want the distinct counter auto-create made", c, err)
		}
		if got := read(t, e, "likes"); got != 1 {
			t.Fatalf("likes = %d, want 1 (bob)", got)
		}
		for member, want := range map[string]bool{"alice": false, "bob": true} {
			if got, err := e.IsMember(ctx, "likes", member); err != nil || got != want {
				t.Fatalf("IsMember(%s) = %v, %v; want %v", member, got, err, want)
			}
		}

		// Kinds do not mix: an item of the wrong kind fails alone.
		res, err := e.WriteBatch(ctx, []shardcounter.Write{
			{Counter: "likes", Delta: 1},
			shardcounter.AddMember("likes", "dave"),
		})
		if err != nil || res[0].Error == nil || res[0].Error.Code != shardcounter.EINVALID || !res[1].Applied {
			t.Fatalf("WriteBatch(delta to a distinct counter, member) = %+v, %v; want invalid_argument, then applied", res, err)
		}
		if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "views", Delta: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.WriteCounter(ctx, shardcounter.AddMember("views", "x")); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
			t.Fatalf("member write to a sum counter = %v, want invalid_argument", err)
		}
	})
}

// TestMembersInOneBatch checks that writes of one member in one batch
// apply in their order: add, remove, add leaves it present; remove, add,
// remove leaves it absent.
func TestMembersInOneBatch(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, store shardcounter.CounterStore) {
		e := MustNew(t, store, engine.Config{})
		ctx := context.Background()
		res, err := e.WriteBatch(ctx, []shardcounter.Write{
			shardcounter.AddMember("c", "m"), shardcounter.RemoveMember("c", "m"), shardcounter.AddMember("c", "m"),
			shardcounter.RemoveMember("c", "n"), shardcounter.AddMember("c", "n"), shardcounter.RemoveMember("c", "n"),
		})
		if err != nil {
			t.Fatal(err)
		}
		// Removing n before it was added changes nothing; every later write
		// undoes the one before it.
		for i, want := range []bool{true, true, true, false, true, true} {
			if r := res[i]; !r.Applied || changed(&r) != want {
				t.Fatalf("write %d = %+v, want applied, changed %v", i, r, want)
			}
		}
		if got := read(t, e, "c"); got != 1 {
			t.Fatalf("c = %d, want 1: m present, n absent", got)
		}
	})
}

// TestMembersConcurrentAdds adds one member from many goroutines, and
// others once each: the member counts once and exactly one add says it
// changed anything.
func TestMembersConcurrentAdds(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, store shardcounter.CounterStore) {
		e := MustNew(t, store, engine.Config{})
		ctx := context.Background()
		var changes atomic.Int64
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Go(func() {
				res, err := e.WriteCounter(ctx, shardcounter.AddMember("post", "alice"))
				if err != nil {
					t.Error(err)
					return
				}
				if changed(res) {
					changes.Add(1)
				}
				if _, err := e.WriteCounter(ctx, shardcounter.AddMember("post", fmt.Sprint("u", i))); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got := changes.Load(); got != 1 {
			t.Fatalf("%d adds of alice changed membership, want 1", got)
		}
		if got := read(t, e, "post"); got != 101 {
			t.Fatalf("post = %d, want 101", got)
		}
		var all []string
		opts := shardcounter.ListOptions{Limit: 30}
		for {
			page, err := e.ListMembers(ctx, "post", opts)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, page.Members...)
			if page.Next == "" {
				break
			}
			opts.After = page.Next
		}
		if len(all) != 101 || all[0] != "alice" || all[1] != "u0" {
			t.Fatalf("ListMembers paged %d members starting %v, want 101 starting alice, u0", len(all), all[:min(2, len(all))])
		}
	})
}
