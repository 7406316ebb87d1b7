package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// TestCreateIdempotent checks that a retried create of an existing
// counter with the same options succeeds with created false, and with
// other options is ErrExists; shard counts derived by the policy are
// compared once resolved.
func TestCreateIdempotent(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, store shardcounter.CounterStore) {
		e := MustNew(t, store, engine.Config{})
		ctx := context.Background()
		followers := func(n int64) *int64 { return &n }
		zero := int64(0)
		hour := shardcounter.Duration(time.Hour)
		for _, tc := range []struct {
			name        string
			first, then shardcounter.CreateOptions
			exists      bool
		}{
			{"SameShards", shardcounter.CreateOptions{Shards: 4}, shardcounter.CreateOptions{Shards: 4}, false},
			{"Default", shardcounter.CreateOptions{}, shardcounter.CreateOptions{Shards: engine.DefaultShards}, false},
			{"KindSumIsDefault", shardcounter.CreateOptions{Shards: 2}, shardcounter.CreateOptions{Shards: 2, Kind: shardcounter.KindSum}, false},
			// 10 million public followers resolve to 32 shards.
			{"PolicyResolved", shardcounter.CreateOptions{FollowersCount: followers(10_000_000)}, shardcounter.CreateOptions{Shards: 32}, false},
			{"OtherShards", shardcounter.CreateOptions{Shards: 4}, shardcounter.CreateOptions{Shards: 5}, true},
			{"SameBoundsAndWindow", shardcounter.CreateOptions{Shards: 4, Min: &zero, Window: &shardcounter.Window{Bucket: hour, Retention: 24 * hour}},
				shardcounter.CreateOptions{Shards: 4, Min: &zero, Window: &shardcounter.Window{Bucket: hour, Retention: 24 * hour}}, false},
			{"OtherBounds", shardcounter.CreateOptions{Shards: 4}, shardcounter.CreateOptions{Shards: 4, Min: &zero}, true},
			{"OtherKind", shardcounter.CreateOptions{Shards: 4}, shardcounter.CreateOptions{Shards: 4, Kind: shardcounter.KindDistinct}, true},
			{"OtherWindow", shardcounter.CreateOptions{Shards: 4, Window: &shardcounter.Window{Bucket: hour, Retention: 24 * hour}},
				shardcounter.CreateOptions{Shards: 4, Window: &shardcounter.Window{Bucket: hour, Retention: 48 * hour}}, true},
			{"OtherPolicy", shardcounter.CreateOptions{Shards: 4}, shardcounter.CreateOptions{FollowersCount: followers(10_000_000)}, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c, created, err := e.CreateCounter(ctx, tc.name, tc.first)
				if err != nil || !created {
					t.Fatalf("first CreateCounter = %+v, %v, %v; want created", c, created, err)
				}
				again, created, err := e.CreateCounter(ctx, tc.name, tc.then)
				if tc.exists {
					if !errors.Is(err, shardcounter.ErrExists) || again != nil || created {
						t.Fatalf("CreateCounter with other options = %+v, %v, %v; want ErrExists", again, created, err)
					}
					return
				}
				if err != nil || created || again == nil || !again.CreatedAt.Equal(c.CreatedAt) || !again.Spec.Equal(c.Spec) {
					t.Fatalf("CreateCounter with the same options = %+v, %v, %v; want the first counter %+v, created false", again, created, err, c)
				}
			})
		}
	})
}

// TestPlacement returns each shard's value and where it lives.
func TestPlacement(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, store shardcounter.CounterStore) {
		e := MustNew(t, store, engine.Config{})
		ctx := context.Background()
		if _, _, err := e.CreateCounter(ctx, "c", shardcounter.CreateOptions{Shards: 3}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "c", Delta: 5}); err != nil {
			t.Fatal(err)
		}
		p, err := e.Placement(ctx, "c")
		if err != nil || p.ID != "c" || p.Shards != 3 || len(p.Places) != 3 {
			t.Fatalf("Placement = %+v, %v; want 3 shards of c", p, err)
		}
		var sum int64
		for i, sp := range p.Places {
			if sp.Shard != i || sp.Node == "" {
				t.Fatalf("shard %d = %+v, want its index and a node", i, sp)
			}
			sum += sp.Value
		}
		if sum != 5 {
			t.Fatalf("shard values sum to %d, want 5", sum)
		}
	})
}
