package redis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/redistest"
	"github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestKeySlot checks the client-side slot computation against the server.
func TestKeySlot(t *testing.T) {
	c := sharedCluster(t)
	for _, key := range []string{"", "a", "foo", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{}x", "x{", "пост{❤}", "shardcounter:{3a}00ff:12"} {
		got := redis.KeySlot(key)
		reply, err := c.Masters[0].Do("CLUSTER", "KEYSLOT", key)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := strconv.Atoi(reply[1:]); got != want {
			t.Errorf("KeySlot(%q) = %d, server says %d", key, got, want)
		}
	}
}

// TestSpread checks that the 16 shards of one counter live on all three
// masters, as the cluster itself reports, and that writes reach them.
func TestSpread(t *testing.T) {
	cl := sharedCluster(t)
	ctx := context.Background()
	s := MustOpen(t, clusterDSN(cl))
	for n := range 5 {
		id := fmt.Sprintf("%s%s/%d", t.Name(), runID(), n)
		storetest.MustCreate(t, s, id, 16)
		for i := range 16 {
			if err := s.Add(ctx, id, int64(i+1), uint64(i)); err != nil {
				t.Fatal(err)
			}
		}
		p, err := s.Placement(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		nodes := map[string]int{}
		for i, pl := range p.Places {
			key := redis.ShardKey(t, s, id, i)
			if pl.Shard != i || pl.Slot == nil || redis.KeySlot(key) != *pl.Slot || pl.Node == "" || pl.Value != int64(i+1) {
				t.Fatalf("placement %d = %+v", i, pl)
			}
			nodes[pl.Node]++
			// The key is where the placement map says: that master has it.
			m := goredis.NewClient(&goredis.Options{Addr: pl.Node})
			v, err := m.HGet(ctx, key, "v").Result()
			m.Close()
			if err != nil || v != strconv.Itoa(i+1) {
				t.Fatalf("shard %d on %s: HGET = %q, %v; want %d", i, pl.Node, v, err, i+1)
			}
		}
		if len(nodes) != 3 {
			t.Fatalf("the 16 shards of %s are on %d masters (%v), want 3", id, len(nodes), nodes)
		}
	}
}

// TestMasterDown kills one master of a cluster (SIGKILL, no replica to
// take over): writes to its slots must fail with ErrUnavailable in bounded
// time, and with cluster-require-full-coverage no the other masters' slots
// keep taking writes and reads.
func TestMasterDown(t *testing.T) {
	cl := redistest.MustStartCluster(t, 3)
	ctx := context.Background()
	s := MustOpen(t, clusterDSN(cl))

	// 1-shard counters whose metadata and shard both sit on one master.
	onMaster := func(m int) string {
		lo, hi := m*16384/3, (m+1)*16384/3-1
		in := func(slot int) bool { return slot >= lo && slot <= hi }
		for n := 0; n < 1000; n++ {
			id := fmt.Sprintf("%s%s/%d", t.Name(), runID(), n)
			if !in(redis.MetaSlot(s, id)) {
				continue
			}
			if in(redis.ShardSlot(s, id, 0)) {
				storetest.MustCreate(t, s, id, 1)
				return id
			}
		}
		t.Fatalf("no counter found on master %d", m)
		return ""
	}
	dead, alive := onMaster(0), onMaster(1)
	// A 16-shard counter has shards on every master; its metadata is on a
	// live one.
	wide := ""
	for n := 0; wide == ""; n++ {
		id := fmt.Sprintf("%s%s/wide%d", t.Name(), runID(), n)
		if redis.MetaSlot(s, id) >= 16384/3 {
			wide = id
		}
	}
	storetest.MustCreate(t, s, wide, 16)
	p, err := s.Placement(ctx, wide)
	if err != nil {
		t.Fatal(err)
	}
	ps := p.Places
	for _, id := range []string{dead, alive} {
		if err := s.Add(ctx, id, 5, 0); err != nil {
			t.Fatal(err)
		}
	}

	cl.Masters[0].Kill()

	for i := range 3 {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		start := time.Now()
		err := s.Add(ctx, dead, 1, 0)
		cancel()
		if !errors.Is(err, shardcounter.ErrUnavailable) {
			t.Fatalf("write %d to a counter on the dead master: %v, want ErrUnavailable", i, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("write %d to a counter on the dead master took %v to fail", i, d)
		}
	}
	// A batch that spans the dead master gets per-item results: the items
	// on live masters apply, the others are unavailable.
	var batch []shardcounter.Increment
	for i := range 16 {
		batch = append(batch, shardcounter.Increment{Counter: wide, Delta: 1, Pick: uint64(i)})
	}
	out, err := s.Apply(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		onDead := ps[i].Node == cl.Masters[0].Addr
		if onDead && !errors.Is(o.Err, shardcounter.ErrUnavailable) || !onDead && o.Err != nil {
			t.Fatalf("item %d (shard on %s, dead %v): %+v", i, ps[i].Node, onDead, o)
		}
	}

	for i := range 20 {
		if err := s.Add(ctx, alive, 1, 0); err != nil {
			t.Fatalf("write %d to a counter on a live master: %v", i, err)
		}
	}
	if got := storetest.MustRead(t, s, alive); got != 25 {
		t.Fatalf("counter on a live master = %d, want 25", got)
	}
	fresh := MustOpen(t, clusterDSN(&redistest.Cluster{Masters: cl.Masters[1:]}))
	if got := storetest.MustRead(t, fresh, alive); got != 25 {
		t.Fatalf("counter on a live master, read by a new client = %d, want 25", got)
	}
}

// TestMasterDownCreates kills one master of three, with no replica to
// take over — the one that held the global index of counters before the
// index was spread over slots — and checks that counters whose keys live
// on the other two keep taking creates, writes and reads, that those with
// a key on the dead master fail fast with ErrUnavailable, and that
// counters listed by a merge of the index's buckets still page in order
// once the master is back.
func TestMasterDownCreates(t *testing.T) {
	cl := redistest.MustStartCluster(t, 3)
	ctx := context.Background()
	s := MustOpen(t, clusterDSN(cl))
	deadMaster := redis.KeySlot(redis.DefaultPrefix+"index") * 3 / redis.NumSlots
	onDead := func(slot int) bool { return slot*3/redis.NumSlots == deadMaster }
	// ids whose metadata and single shard are both on live masters, and
	// ids with the metadata on the dead one.
	var live, dead []string
	for n := 0; len(live) < 8 || len(dead) < 6; n++ {
		id := fmt.Sprintf("%s%s/%d", t.Name(), runID(), n)
		switch meta, shard := redis.MetaSlot(s, id), redis.ShardSlot(s, id, 0); {
		case !onDead(meta) && !onDead(shard) && len(live) < 8:
			live = append(live, id)
		case onDead(meta) && len(dead) < 6:
			dead = append(dead, id)
		}
	}
	dead, deadNew := dead[:3], dead[3:] // created before the kill, and after
	for _, id := range slices.Concat(live[:4], dead) {
		storetest.MustCreate(t, s, id, 1)
	}

	cl.Masters[deadMaster].Kill()

	failsFast := func(what string, f func(context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		start := time.Now()
		if err := f(ctx); !errors.Is(err, shardcounter.ErrUnavailable) {
			t.Fatalf("%s with its master down: %v, want ErrUnavailable", what, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("%s with its master down took %v to fail", what, d)
		}
	}
	for _, id := range live[4:] {
		storetest.MustCreate(t, s, id, 1)
	}
	for i, id := range live {
		if err := s.Add(ctx, id, int64(i+1), 0); err != nil {
			t.Fatalf("Add to %s, on live masters: %v", id, err)
		}
		if got := storetest.MustRead(t, s, id); got != int64(i+1) {
			t.Fatalf("%s = %d, want %d", id, got, i+1)
		}
	}
	for i, id := range dead {
		failsFast("CreateCounter", func(ctx context.Context) error {
			_, err := s.CreateCounter(ctx, deadNew[i], shardcounter.Spec{Shards: 1})
			return err
		})
		failsFast("Add", func(ctx context.Context) error { return MustOpen(t, clusterDSN(cl)).Add(ctx, id, 1, 0) })
		failsFast("ReadCounter", func(ctx context.Context) error {
			_, err := MustOpen(t, clusterDSN(cl)).ReadCounter(ctx, id)
			return err
		})
	}

	// Back up (its data is gone: no persistence), the index pages in order.
	if err := cl.Masters[deadMaster].Restart(); err != nil {
		t.Fatal(err)
	}
	var got []string
	after := ""
	for {
		cs, err := s.ListCounters(ctx, t.Name(), after, 3)
		if err != nil {
			if errors.Is(err, shardcounter.ErrUnavailable) {
				time.Sleep(100 * time.Millisecond) // the restarted master is joining
				continue
			}
			t.Fatal(err)
		}
		if len(cs) == 0 {
			break
		}
		for _, c := range cs {
			got = append(got, c.ID)
		}
		after = cs[len(cs)-1].ID
	}
	want := slices.Sorted(slices.Values(live))
	if !slices.Equal(got, want) {
		t.Fatalf("ListCounters after the restart = %v, want %v", got, want)
	}
}
