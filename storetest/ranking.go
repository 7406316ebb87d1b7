package storetest

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

// RunRankingStore runs the cases of the shardcounter.RankingStore
// contract: definitions are created once (also by concurrent creates),
// read back as written, listed by name, and deleted.
func RunRankingStore(t *testing.T, s shardcounter.RankingStore) {
	t.Run("CreateGetListDelete", func(t *testing.T) { testRankingCRUD(t, s) })
	t.Run("ConcurrentCreate", func(t *testing.T) { testRankingConcurrentCreate(t, s) })
}

func newRanking(name, prefix string, last time.Duration) *shardcounter.Ranking {
	return &shardcounter.Ranking{
		Name:           name,
		RankingOptions: shardcounter.RankingOptions{Prefix: prefix, Last: shardcounter.Duration(last)}.WithDefaults(),
		CreatedAt:      time.Now().UTC().Truncate(time.Microsecond),
	}
}

func sameRanking(a, b *shardcounter.Ranking) bool {
	return a.Name == b.Name && a.RankingOptions == b.RankingOptions && a.CreatedAt.Equal(b.CreatedAt)
}

func testRankingCRUD(t *testing.T, s shardcounter.RankingStore) {
	ctx := context.Background()
	p := prefix(t)
	top := newRanking(p+"top", p+"post:", 0)
	trend := newRanking(p+"trending", p+"tag:", time.Hour)
	trend.Size = 7
	for _, r := range []*shardcounter.Ranking{trend, top} {
		got, created, err := s.CreateRanking(ctx, r)
		if err != nil || !created || !sameRanking(got, r) {
			t.Fatalf("CreateRanking(%+v) = %+v, %v, %v; want it created", r, got, created, err)
		}
	}
	again := newRanking(p+"top", p+"other:", 0)
	got, created, err := s.CreateRanking(ctx, again)
	if err != nil || created || !sameRanking(got, top) {
		t.Fatalf("CreateRanking of a taken name = %+v, %v, %v; want the first one, not created", got, created, err)
	}
	got, err = s.GetRanking(ctx, p+"trending")
	if err != nil || !sameRanking(got, trend) {
		t.Fatalf("GetRanking = %+v, %v; want %+v", got, err, trend)
	}
	_, err = s.GetRanking(ctx, p+"missing")
	wantCode(t, "GetRanking of a missing ranking", err, shardcounter.ENOTFOUND)

	mine := listMine(t, s, p)
	if len(mine) != 2 || !sameRanking(mine[0], top) || !sameRanking(mine[1], trend) {
		t.Fatalf("ListRankings: %+v, want [top trending]", mine)
	}
	if err := s.DeleteRanking(ctx, p+"top"); err != nil {
		t.Fatalf("DeleteRanking: %v", err)
	}
	wantCode(t, "DeleteRanking twice", s.DeleteRanking(ctx, p+"top"), shardcounter.ENOTFOUND)
	_, err = s.GetRanking(ctx, p+"top")
	wantCode(t, "GetRanking after delete", err, shardcounter.ENOTFOUND)
	if mine := listMine(t, s, p); len(mine) != 1 || mine[0].Name != p+"trending" {
		t.Fatalf("ListRankings after delete: %+v", mine)
	}
	// A deleted name may be taken again, with other options.
	if _, created, err := s.CreateRanking(ctx, again); err != nil || !created {
		t.Fatalf("CreateRanking after delete = %v, %v; want created", created, err)
	}
	for _, n := range []string{"top", "trending"} {
		if err := s.DeleteRanking(ctx, p+n); err != nil {
			t.Fatalf("DeleteRanking(%s): %v", n, err)
		}
	}
}

// listMine returns the rankings of this test, checking that the whole
// list is in name order.
func listMine(t *testing.T, s shardcounter.RankingStore, p string) []*shardcounter.Ranking {
	t.Helper()
	all, err := s.ListRankings(context.Background())
	if err != nil {
		t.Fatalf("ListRankings: %v", err)
	}
	var mine []*shardcounter.Ranking
	for i, r := range all {
		if i > 0 && all[i-1].Name >= r.Name {
			t.Fatalf("ListRankings not in name order: %q before %q", all[i-1].Name, r.Name)
		}
		if strings.HasPrefix(r.Name, p) {
			mine = append(mine, r)
		}
	}
	return mine
}

func testRankingConcurrentCreate(t *testing.T, s shardcounter.RankingStore) {
	p := prefix(t)
	const n = 8
	var created atomic.Int64
	var wg sync.WaitGroup
	results := make([]*shardcounter.Ranking, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := newRanking(p+"race", p+string(rune('a'+i)), 0)
			got, c, err := s.CreateRanking(context.Background(), r)
			if err != nil {
				t.Errorf("CreateRanking: %v", err)
				return
			}
			if c {
				created.Add(1)
			}
			results[i] = got
		}()
	}
	wg.Wait()
	if created.Load() != 1 {
		t.Fatalf("%d concurrent creates of one name created it %d times, want once", n, created.Load())
	}
	for _, r := range results {
		if r == nil || !sameRanking(r, results[0]) {
			t.Fatalf("concurrent creates saw different rankings: %+v and %+v", r, results[0])
		}
	}
	if err := s.DeleteRanking(context.Background(), p+"race"); err != nil {
		t.Fatal(err)
	}
}
