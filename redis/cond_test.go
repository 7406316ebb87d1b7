package redis_test

import (
	"context"
	"math"
	"testing"

	"github.com/shardcounter/shardcounter"
)

// TestConditional checks items conditional on an earlier one
// (Increment.If, INCREX's deadline records) on one server, where the
// script decides them with their condition, and on a cluster, where an
// item in another slot than its condition waits for it: applied when
// the condition applied (a saturated 0 too), Skipped (nothing applied,
// its counter not created, no total) when it was skipped, failed, or
// skipped itself, and refused in a transaction or before its condition.
func TestConditional(t *testing.T) {
	ctx := context.Background()
	for _, where := range []string{"server", "cluster"} {
		t.Run(where, func(t *testing.T) {
			dsn := serverDSN(sharedServer(t))
			if where == "cluster" {
				dsn = clusterDSN(sharedCluster(t))
			}
			s := MustOpen(t, dsn)
			b, c, m := "condb"+runID(), "condc"+runID(), "condm"+runID()
			one := &shardcounter.Spec{Shards: 1}
			upTo := func(hi int64, sat bool) *shardcounter.Bound {
				return &shardcounter.Bound{Lower: math.MinInt64, Upper: hi, Saturate: sat}
			}
			check := func(what string, incs []shardcounter.Increment, want []shardcounter.Outcome) {
				t.Helper()
				out, err := s.Apply(ctx, incs)
				if err != nil || len(out) != len(want) {
					t.Fatalf("%s: %v, %+v", what, err, out)
				}
				for i, o := range out {
					w := want[i]
					if shardcounter.ErrorCode(o.Err) != shardcounter.ErrorCode(w.Err) || o.Skipped != w.Skipped || (w.Applied != nil) != (o.Applied != nil) || w.Applied != nil && *w.Applied != *o.Applied {
						t.Fatalf("%s: item %d: %+v; want %+v", what, i, o, w)
					}
				}
			}
			value := func(id string, want int64) {
				t.Helper()
				r, err := s.ReadCounter(ctx, id)
				if want < 0 {
					if shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
						t.Fatalf("%s: %+v, %v; want not found", id, r, err)
					}
					return
				}
				if err != nil || r.Value != want {
					t.Fatalf("%s: %+v, %v; want %d", id, r, err, want)
				}
			}
			n := func(v int64) *int64 { return &v }
			applied := shardcounter.Outcome{}
			skipped := shardcounter.Outcome{Skipped: true}

			// Skipped with its condition: the other counter is not created.
			check("a skipped condition", []shardcounter.Increment{
				{Counter: b, Delta: 9, Bound: upTo(5, false), Create: one},
				{Counter: c, Delta: 1, Create: one, If: 1, Total: true},
				{Counter: m, Member: "x", Delta: 1, Create: &shardcounter.Spec{Shards: 2, Kind: shardcounter.KindDistinct}, If: 2},
			}, []shardcounter.Outcome{{Applied: n(0), Skipped: true}, skipped, skipped})
			value(c, -1)
			value(m, -1)
			check("an applied condition", []shardcounter.Increment{
				{Counter: b, Delta: 3, Bound: upTo(5, false), Create: one},
				{Counter: c, Delta: 1, Create: one, If: 1},
				{Counter: m, Member: "x", Delta: 1, Create: &shardcounter.Spec{Shards: 2, Kind: shardcounter.KindDistinct}, If: 2},
			}, []shardcounter.Outcome{{Applied: n(3)}, applied, applied})
			value(c, 1)
			value(m, 1)
			check("a saturated 0 is not skipped", []shardcounter.Increment{
				{Counter: b, Delta: 3, Bound: upTo(3, true)},
				{Counter: c, Delta: 1, If: 1},
			}, []shardcounter.Outcome{{Applied: n(0)}, applied})
			value(c, 2)
			check("a failed condition", []shardcounter.Increment{
				{Counter: b, Member: "x", Delta: 1},
				{Counter: c, Delta: 1, If: 1},
				{Counter: c, Delta: 1},
			}, []shardcounter.Outcome{{Err: shardcounter.ErrInvalid}, skipped, applied})
			value(c, 3)
			check("a missing counter is skipped before not found", []shardcounter.Increment{
				{Counter: b, Delta: 9, Bound: upTo(5, false)},
				{Counter: "condnone" + runID(), Delta: 1, If: 1},
			}, []shardcounter.Outcome{{Applied: n(0), Skipped: true}, skipped})
			check("in a transaction, before its condition", []shardcounter.Increment{
				{Counter: c, Delta: 1, Txn: 1, If: 2},
				{Counter: c, Delta: 1, If: 2},
				{Counter: c, Delta: 1, If: 3},
			}, []shardcounter.Outcome{{Err: shardcounter.ErrInvalid}, {Err: shardcounter.ErrInvalid}, {Err: shardcounter.ErrInvalid}})
			value(c, 3)
		})
	}
}
