package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/resp/server"
)

// TestRankings reads a ranking with SC.TOP and with go-redis's
// ZRevRange and ZRevRangeWithScores, as leaderboard code does, in RESP2
// and RESP3.
func TestRankings(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			ctx := context.Background()
			eng := MustEngine(t)
			_, addr := MustServe(t, eng, server.Options{Engine: eng.Stats()})
			rdb := MustClient(t, addr, proto, "")
			for i, v := range []int64{5, 1000000, 7, 7, -2} {
				if err := rdb.IncrBy(ctx, fmt.Sprintf("post:%d", i), v).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, err := eng.CreateRanking(ctx, "board", shardcounter.RankingOptions{Prefix: "post:", Size: 4}); err != nil {
				t.Fatal(err)
			}
			ids, err := rdb.ZRevRange(ctx, "board", 0, 2).Result()
			if err != nil || fmt.Sprint(ids) != "[post:1 post:2 post:3]" {
				t.Fatalf("ZREVRANGE board 0 2 = %v, %v", ids, err)
			}
			zs, err := rdb.ZRevRangeWithScores(ctx, "board", 0, -1).Result()
			want := []redis.Z{{Member: "post:1", Score: 1000000}, {Member: "post:2", Score: 7}, {Member: "post:3", Score: 7}, {Member: "post:0", Score: 5}}
			if err != nil || fmt.Sprint(zs) != fmt.Sprint(want) {
				t.Fatalf("ZREVRANGE board 0 -1 WITHSCORES = %v, %v; want %v", zs, err, want)
			}
			if ids, err := rdb.ZRevRange(ctx, "board", 2, 100).Result(); err != nil || fmt.Sprint(ids) != "[post:3 post:0]" {
				t.Fatalf("ZREVRANGE board 2 100 = %v, %v", ids, err)
			}
			if ids, err := rdb.ZRevRange(ctx, "nothing", 0, 9).Result(); err != nil || len(ids) != 0 {
				t.Fatalf("ZREVRANGE of no ranking = %v, %v; want empty", ids, err)
			}
			top, err := rdb.Do(ctx, "SC.TOP", "board", 2).Result()
			if err != nil {
				t.Fatal(err)
			}
			if s := fmt.Sprint(top); !strings.Contains(s, "[[post:1 1000000] [post:2 7]]") || !strings.Contains(s, "max_staleness_ms") {
				t.Fatalf("SC.TOP board 2 = %s", s)
			}
			wantPrefix(t, "SC.TOP bad k", rdb.Do(ctx, "SC.TOP", "board", -1).Err(), "ERR k must be")
			wantPrefix(t, "SC.TOP missing", rdb.Do(ctx, "SC.TOP", "nothing").Err(), "ERR ranking \"nothing\" not found")
			wantPrefix(t, "ZREVRANGE bad index", rdb.Do(ctx, "ZREVRANGE", "board", "a", 1).Err(), "ERR value is not an integer")
			wantPrefix(t, "ZREVRANGE bad option", rdb.Do(ctx, "ZREVRANGE", "board", 0, 1, "WITHSCORE").Err(), "ERR syntax error")
		})
	}
}
