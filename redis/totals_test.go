package redis_test

import (
	"context"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestTotalsAndCollects checks which counters get their total with the
// commit, and how many collects a strong read of them takes: on one
// server every counter gets its total and a read is one collect; on a
// cluster a counter of one shard gets its total too (its shard is one
// key, read in one step on its master) and one collect reads it, while a
// counter of four shards gets none (the engine reads it) and takes the
// double collect. Storetest's Linearizable case checks the values, under
// reshards that move counters to and from one shard.
func TestTotalsAndCollects(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		cluster := strings.HasPrefix(dsn, "redis+cluster:")
		s := MustOpen(t, dsn)
		ctx := context.Background()
		one, four := "totals"+runID(), "totals"+runID()
		storetest.MustCreate(t, s, one, 1)
		storetest.MustCreate(t, s, four, 4)
		out, err := s.Apply(ctx, []shardcounter.Increment{
			{Counter: one, Delta: 3, Total: true},
			{Counter: four, Delta: 5, Pick: 2, Total: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		if o := out[0]; o.Err != nil || o.Total == nil || *o.Total != 3 {
			t.Errorf("one shard: %+v, want a total of 3", o)
		}
		switch o := out[1]; {
		case o.Err != nil:
			t.Errorf("four shards: %v", o.Err)
		case cluster && o.Total != nil:
			t.Errorf("four shards on a cluster: total %d, want none", *o.Total)
		case !cluster && (o.Total == nil || *o.Total != 5):
			t.Errorf("four shards on one server: %+v, want a total of 5", o)
		}

		for _, c := range []struct {
			id       string
			collects int64
		}{{one, 1}, {four, 2}} {
			if !cluster {
				c.collects = 1
			}
			before := s.Stats().Collects
			storetest.MustRead(t, s, c.id)
			if got := s.Stats().Collects - before; got != c.collects {
				t.Errorf("a strong read of %s took %d collects, want %d", c.id, got, c.collects)
			}
		}
	})
}
