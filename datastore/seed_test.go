package datastore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	gds "cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter/datastore"
	"github.com/shardcounter/shardcounter/storetest"
)

// seedEntity is seed 002's CounterShardEntity: key name TARGET_N, target
// and count. Like php-gds, which loads the properties its schema lacks
// (the store's sc_ ones) by their type and writes them back, it keeps
// the others.
type seedEntity struct {
	Target string `datastore:"target"`
	Count  int64  `datastore:"count,noindex"`
	other  []gds.Property
}

func (e *seedEntity) Load(ps []gds.Property) error {
	var known []gds.Property
	for _, p := range ps {
		if p.Name == "target" || p.Name == "count" {
			known = append(known, p)
		} else {
			e.other = append(e.other, p)
		}
	}
	return gds.LoadStruct(e, known)
}

func (e *seedEntity) Save() ([]gds.Property, error) {
	ps, err := gds.SaveStruct(e)
	return append(ps, e.other...), err
}

// seedCounter is seed 002's CounterShardDS, written with Google's Go
// client as the seed writes it with php-gds: getCount sums the shards a
// query on target finds, and increment reads a random shard (1 to n) by
// key name and upserts it with count+1, without a transaction.
type seedCounter struct {
	db     *gds.Client
	kind   string
	target string
	n      int
}

func (c seedCounter) getCount(ctx context.Context) (int64, error) {
	var shards []seedEntity
	if _, err := c.db.GetAll(ctx, gds.NewQuery(c.kind).FilterField("target", "=", c.target), &shards); err != nil {
		return 0, err
	}
	var total int64
	for _, s := range shards {
		total += s.Count
	}
	return total, nil
}

// read is the first half of the seed's increment: the random shard,
// fetched by name (a new one at 0 when there is none).
func (c seedCounter) read(ctx context.Context) (*gds.Key, seedEntity, error) {
	key := gds.NameKey(c.kind, fmt.Sprintf("%s_%d", c.target, 1+rand.IntN(c.n)), nil)
	var e seedEntity
	err := c.db.Get(ctx, key, &e)
	if errors.Is(err, gds.ErrNoSuchEntity) {
		e, err = seedEntity{Target: c.target}, nil
	}
	return key, e, err
}

// write is its second half: count+1, upserted.
func (c seedCounter) write(ctx context.Context, key *gds.Key, e seedEntity) error {
	e.Count++
	_, err := c.db.Put(ctx, key, &e)
	return err
}

func (c seedCounter) increment(ctx context.Context) error {
	if _, err := c.getCount(ctx); err != nil { // the seed returns getCount()+1
		return err
	}
	key, e, err := c.read(ctx)
	if err != nil {
		return err
	}
	return c.write(ctx, key, e)
}

// TestSeedLayout checks that shardcounter and the seed's own code see one
// counter: increments the seed's way show in shardcounter's strong reads,
// and the seed's getCount sums what shardcounter writes.
func TestSeedLayout(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t, datastore.Options{})
	seed := seedCounter{db: s.Client(), kind: "IK_CounterShardEntity", target: "Counter Test_1", n: 20}
	storetest.MustCreate(t, s, seed.target, seed.n)
	for range 25 {
		if err := seed.increment(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := storetest.MustRead(t, s, seed.target); got != 25 {
		t.Fatalf("shardcounter reads %d after 25 increments the seed's way, want 25", got)
	}
	for i := range 10 {
		if err := s.Add(ctx, seed.target, 2, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := seed.getCount(ctx); err != nil || got != 45 {
		t.Fatalf("the seed's getCount = %d, %v after 10 adds of 2 by shardcounter, want 45", got, err)
	}
	// The shards are the seed's entities: key names TARGET_1..TARGET_20.
	var shards []seedEntity
	keys, err := s.Client().GetAll(ctx, gds.NewQuery("IK_CounterShardEntity").FilterField("target", "=", seed.target), &shards)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 20 {
		t.Fatalf("%d shard entities, want 20", len(keys))
	}
	for _, k := range keys {
		var n int
		if _, err := fmt.Sscanf(k.Name[len(seed.target):], "_%d", &n); err != nil || n < 1 || n > 20 || k.Name != fmt.Sprintf("%s_%d", seed.target, n) {
			t.Fatalf("shard key name %q is not %s_N with N from 1 to 20", k.Name, seed.target)
		}
	}
}

// TestSeedLosesUpdates runs seed 002's increment from 16 writers at once
// on a 4-shard counter: each reads its shard, then writes count+1, as the
// seed does without a transaction. The writers read before any writes
// (a barrier between the halves, so the race the seed leaves open happens
// every round instead of now and then): two writers on one shard both
// write what they read plus one, and one increment is lost. The same
// writers through shardcounter lose none.
func TestSeedLosesUpdates(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t, datastore.Options{})
	const writers, rounds, shards = 16, 5, 4
	seed := seedCounter{db: s.Client(), kind: "IK_CounterShardEntity", target: "seed", n: shards}
	storetest.MustCreate(t, s, "seed", shards)
	for range rounds {
		var read, wrote sync.WaitGroup
		read.Add(writers)
		errs := make(chan error, writers)
		for range writers {
			wrote.Add(1)
			go func() {
				defer wrote.Done()
				key, e, err := seed.read(ctx)
				read.Done()
				read.Wait()
				if err == nil {
					err = seed.write(ctx, key, e)
				}
				errs <- err
			}()
		}
		wrote.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := seed.getCount(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// 16 writers on 4 shards: at most 4 of each round's writes survive.
	if got > shards*rounds {
		t.Fatalf("the seed's way kept %d of %d increments; with every writer reading before any writes, at most %d survive", got, writers*rounds, shards*rounds)
	}
	t.Logf("the seed's way: %d of %d increments kept", got, writers*rounds)

	storetest.MustCreate(t, s, "ours", shards)
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				if err := s.Add(ctx, "ours", 1, uint64(g*rounds+i)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	ours := seedCounter{db: s.Client(), kind: "IK_CounterShardEntity", target: "ours", n: shards}
	if got, err := ours.getCount(ctx); err != nil || got != writers*rounds {
		t.Fatalf("shardcounter's way: the seed's getCount = %d, %v; want all %d increments", got, err, writers*rounds)
	}
	if got := storetest.MustRead(t, s, "ours"); got != writers*rounds {
		t.Fatalf("shardcounter's way: strong read %d, want %d", got, writers*rounds)
	}
}
