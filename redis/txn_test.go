package redis_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/shard"
	"github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/storetest"
)

// txn returns incs as the increments of one transaction.
func txn(t uint64, incs ...shardcounter.Increment) []shardcounter.Increment {
	for i := range incs {
		incs[i].Txn = t
	}
	return incs
}

// mustApply applies incs and fails the test unless every item applied
// (or, where dup says so, was found a duplicate).
func mustApply(t *testing.T, s *redis.CounterStore, incs []shardcounter.Increment, dup ...bool) {
	t.Helper()
	out, err := s.Apply(context.Background(), incs)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	for i, o := range out {
		if o.Err != nil || o.Duplicate != (i < len(dup) && dup[i]) {
			t.Fatalf("item %d (%s %+d): %+v", i, incs[i].Counter, incs[i].Delta, o)
		}
	}
}

// perMaster returns, for each master, the sum of the values of the
// shards of ids that it holds.
func perMaster(t *testing.T, s *redis.CounterStore, ids ...string) map[string]int64 {
	t.Helper()
	sums := make(map[string]int64)
	for _, id := range ids {
		p, err := s.Placement(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, pl := range p.Places {
			sums[pl.Node] += pl.Value
		}
	}
	return sums
}

// TestTxnOneMaster checks that a transaction over several counters on a
// cluster is applied on one master: with a +1 on a and b and a −2 on c in
// each, every master's shards of the three sum to 0 however many ran,
// which writes spread by slot (to shards on several masters) would not
// keep. A store whose cached layout is stale (another client resharded a
// counter) applies each transaction exactly once all the same.
func TestTxnOneMaster(t *testing.T) {
	cl := sharedCluster(t)
	s, other := MustOpen(t, clusterDSN(cl)), MustOpen(t, clusterDSN(cl))
	ctx := context.Background()
	base := t.Name() + runID()
	a, b, c := base+"/a", base+"/b", base+"/c"
	for _, id := range []string{a, b, c} {
		storetest.MustCreate(t, s, id, 16)
	}
	const n = 40
	var before map[string]int64 // per master, when the sums start
	for k := range n {
		if k == n/2 {
			// Resharding moves values between shards: the sums start again
			// from the folded values.
			for _, id := range []string{a, b, c} {
				if _, err := other.ReshardCounter(ctx, id, 8); err != nil {
					t.Fatal(err)
				}
			}
			before = perMaster(t, s, a, b, c)
		}
		mustApply(t, s, txn(uint64(k+1),
			shardcounter.Increment{Counter: a, Delta: 1, Pick: uint64(3 * k)},
			shardcounter.Increment{Counter: b, Delta: 1, Pick: uint64(3*k + 1)},
			shardcounter.Increment{Counter: c, Delta: -2, Pick: uint64(3*k + 2)}))
		if k == n/2-1 || k == n-1 {
			for node, sum := range perMaster(t, s, a, b, c) {
				if sum != before[node] {
					t.Fatalf("after %d transactions master %s holds %d of a+b+c, want %d: a transaction was split", k+1, node, sum, before[node])
				}
			}
		}
	}
	for id, want := range map[string]int64{a: n, b: n, c: -2 * n} {
		if got := storetest.MustRead(t, s, id); got != want {
			t.Errorf("%s = %d, want %d", id, got, want)
		}
	}
}

// TestTxnCrossSlot checks the refusal: two counters of one shard each on
// different masters have no master in common, so a transaction over both
// is refused, every item with a CROSSSLOT error, and changes nothing,
// creating no counter it would have created; over two counters on one
// master it applies.
func TestTxnCrossSlot(t *testing.T) {
	s := MustOpen(t, clusterDSN(sharedCluster(t)))
	ctx := context.Background()
	base := t.Name() + runID()
	byNode := make(map[string][]string) // 1-shard counters by master
	for i := 0; len(byNode) < 2 || len(byNode[anyKey(byNode)]) < 2; i++ {
		id := fmt.Sprintf("%s/%d", base, i)
		storetest.MustCreate(t, s, id, 1)
		p, err := s.Placement(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		byNode[p.Places[0].Node] = append(byNode[p.Places[0].Node], id)
	}
	var x, y string // on different masters
	for _, ids := range byNode {
		if x == "" {
			x = ids[0]
		} else if y == "" {
			y = ids[0]
		}
	}
	fresh := base + "/fresh"
	d := base + "/distinct"
	if _, err := s.CreateCounter(ctx, d, shardcounter.Spec{Shards: 1, Kind: shardcounter.KindDistinct}); err != nil {
		t.Fatal(err)
	}
	for _, tx := range [][]shardcounter.Increment{
		{{Counter: x, Delta: 1}, {Counter: y, Delta: 1}},
		{{Counter: x, Delta: 1}, {Counter: fresh, Delta: 1, Create: &shardcounter.Spec{Shards: 1}}, {Counter: y, Delta: 1}},
		{{Counter: x, Delta: 1, RequestID: "r"}, {Counter: y, Delta: -1}},
		{{Counter: d, Member: "m", Delta: 1}, {Counter: x, Delta: 1}, {Counter: y, Delta: 1}},
	} {
		out, err := s.Apply(ctx, txn(1, tx...))
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range out {
			if !shardcounter.IsCrossSlot(o.Err) {
				t.Errorf("item %d of %v: %+v, want a CROSSSLOT error", i, tx, o)
			}
		}
	}
	for _, id := range []string{x, y, d} {
		if v := storetest.MustRead(t, s, id); v != 0 {
			t.Errorf("%s = %d after refused transactions", id, v)
		}
	}
	if _, err := s.GetCounter(ctx, fresh); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		t.Errorf("a refused transaction created %s: %v", fresh, err)
	}
	// Two counters on one master, and a member written there: one step.
	var z string
	for _, ids := range byNode {
		if len(ids) >= 2 {
			x, z = ids[0], ids[1]
		}
	}
	mustApply(t, s, txn(2, shardcounter.Increment{Counter: x, Delta: 5}, shardcounter.Increment{Counter: z, Delta: 7}))
	if vx, vz := storetest.MustRead(t, s, x), storetest.MustRead(t, s, z); vx != 5 || vz != 7 {
		t.Errorf("x, z = %d, %d; want 5, 7", vx, vz)
	}
}

func anyKey(m map[string][]string) string {
	for k, v := range m {
		if len(v) >= 2 {
			return k
		}
	}
	for k := range m {
		return k
	}
	return ""
}

// TestTxnRequestID checks that an item with a request id stays on the
// shard its id picks (PickFor mod n), where a retry looks for it, inside
// a transaction as outside: the transaction sent again, or its item sent
// alone, finds it a duplicate and counts it once; the other counters of
// the transaction follow it to its master.
func TestTxnRequestID(t *testing.T) {
	cl := sharedCluster(t)
	s := MustOpen(t, clusterDSN(cl))
	ctx := context.Background()
	base := t.Name() + runID()
	a, b := base+"/a", base+"/b"
	storetest.MustCreate(t, s, a, 16)
	storetest.MustCreate(t, s, b, 16)
	tx := func(t uint64) []shardcounter.Increment {
		return txn(t, shardcounter.Increment{Counter: b, Delta: -3, Pick: 5}, shardcounter.Increment{Counter: a, Delta: 3, RequestID: "req-1", Pick: 1})
	}
	mustApply(t, s, tx(1))
	mustApply(t, s, tx(2), false, true)
	mustApply(t, s, []shardcounter.Increment{{Counter: a, Delta: 3, RequestID: "req-1"}}, true)
	if va, vb := storetest.MustRead(t, s, a), storetest.MustRead(t, s, b); va != 3 || vb != -6 {
		t.Fatalf("a, b = %d, %d; want 3, -6", va, vb)
	}
	p, err := s.Placement(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	want := shard.Of(shard.PickFor(a, "req-1"), 16)
	if p.Places[want].Value != 3 {
		t.Errorf("a's shard %d (its request id's) holds %d, want 3: %+v", want, p.Places[want].Value, p.Places)
	}
	node := p.Places[want].Node
	pb, err := s.Placement(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, pl := range pb.Places {
		if pl.Value != 0 && pl.Node != node {
			t.Errorf("b's shard %d on %s holds %d; the transaction's master is %s", pl.Shard, pl.Node, pl.Value, node)
		}
	}
}

// TestTxnNoRoom checks a transaction one of whose items finds its shard
// short of room (a counter near the int64 edge): nothing of it applies
// until the rebalance made room, then all of it, once.
func TestTxnNoRoom(t *testing.T) {
	for name, dsn := range map[string]func() string{
		"server":  func() string { return serverDSN(sharedServer(t)) },
		"cluster": func() string { return clusterDSN(sharedCluster(t)) },
	} {
		t.Run(name, func(t *testing.T) {
			s := MustOpen(t, dsn())
			base := t.Name() + runID()
			x, y := base+"/x", base+"/y"
			storetest.MustCreate(t, s, x, 4)
			storetest.MustCreate(t, s, y, 4)
			// Shard 0 takes all but 10 of the room up; the others share 10.
			mustApply(t, s, []shardcounter.Increment{{Counter: x, Delta: math.MaxInt64 - 10, Pick: 0}})
			for k := range 4 { // the second +2 to one shard finds no room
				mustApply(t, s, txn(uint64(k+1),
					shardcounter.Increment{Counter: y, Delta: 1, Pick: 0},
					shardcounter.Increment{Counter: x, Delta: 2, Pick: 1},
					shardcounter.Increment{Counter: y, Delta: 1, Pick: 2}))
			}
			if r := s.Stats().Rebalances; r < 2 {
				t.Errorf("%d rebalances: no transaction found its shard short of room", r)
			}
			if vx, vy := storetest.MustRead(t, s, x), storetest.MustRead(t, s, y); vx != math.MaxInt64-2 || vy != 8 {
				t.Errorf("x, y = %d, %d; want %d, 8", vx, vy, int64(math.MaxInt64-2))
			}
			out, err := s.Apply(context.Background(), txn(9, shardcounter.Increment{Counter: y, Delta: 1}, shardcounter.Increment{Counter: x, Delta: 3}))
			if err != nil || out[0].Err != nil || shardcounter.ErrorCode(out[1].Err) != shardcounter.EOUTOFRANGE {
				t.Errorf("a transaction past the int64 edge: %+v, %v; want y applied, x out of range", out, err)
			}
		})
	}
}
