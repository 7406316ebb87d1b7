package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"cloud.google.com/go/firestore"
	"golang.org/x/sync/errgroup"

	sfirestore "github.com/shardcounter/shardcounter/firestore"
)

// firestorePeer is seed 000's distributed counter written the seed's way,
// straight from each client to Firestore: counters/{id} with num_shards,
// counters/{id}/shards/{n} with count, each write one Increment transform
// on a random shard document (its own commit), each read the sum of the
// shard documents. It is what an app built on the seed does, and what the
// engine's group commit and pacing are measured against. Its shard count
// is the largest of Config.Shards; the target is a firestore:// DSN,
// served by the emulator that FIRESTORE_EMULATOR_HOST names or by Google
// Cloud.
type firestorePeer struct {
	client  *firestore.Client
	prefix  string
	shards  int
	written []atomic.Bool
}

func firestoreDirectPeer(ctx context.Context, cfg Config, p Peer, run *Run) (target, error) {
	c, err := sfirestore.ParseDSN(p.Target)
	if err != nil {
		return target{}, fmt.Errorf("bench: peer %s: %w", p.Kind, err)
	}
	if c.Database == "" {
		c.Database = firestore.DefaultDatabaseID
	}
	client, err := firestore.NewClientWithDatabase(ctx, c.Project, c.Database)
	if err != nil {
		return target{}, fmt.Errorf("bench: peer %s: %w", p.Kind, err)
	}
	f := &firestorePeer{client: client, prefix: fmt.Sprintf("bench-%x-", time.Now().UnixNano()),
		shards: slices.Max(cfg.Shards), written: make([]atomic.Bool, cfg.Counters)}
	run.Store, run.Shards = "firestore", f.shards
	run.Name = fmt.Sprintf("peer/%s/shards=%d", p.Kind, f.shards)
	return target{
		do:      oneByOne(f.write, func(ctx context.Context, op *operation) error { _, err := f.read(ctx, op.counter); return err }, f.readMany),
		prefill: f.prefill,
		total:   f.total,
		touched: func() int64 { return countSet(f.written) },
		cleanup: func(context.Context) error { return client.Close() },
	}, nil
}

func (f *firestorePeer) counter(i int) *firestore.DocumentRef {
	return f.client.Collection("counters").Doc(f.prefix + fmt.Sprint(i))
}

// create makes counter i the seed's way (createCounter): the counter
// document with num_shards and every shard at 0, in one batch.
func (f *firestorePeer) create(ctx context.Context, i int) error {
	if f.written[i].Swap(true) {
		return nil
	}
	ref := f.counter(i)
	b := f.client.BulkWriter(ctx)
	if _, err := b.Set(ref, map[string]any{"num_shards": f.shards}); err != nil {
		return err
	}
	for n := range f.shards {
		if _, err := b.Set(ref.Collection("shards").Doc(fmt.Sprint(n)), map[string]any{"count": 0}); err != nil {
			return err
		}
	}
	b.End()
	return nil
}

// write is the seed's incrementCounter: an Increment on a random shard.
func (f *firestorePeer) write(ctx context.Context, op *operation) error {
	if err := f.create(ctx, op.counter); err != nil {
		return err
	}
	shard := f.counter(op.counter).Collection("shards").Doc(fmt.Sprint(rand.IntN(f.shards)))
	_, err := shard.Update(ctx, []firestore.Update{{Path: "count", Value: firestore.Increment(op.delta)}})
	op.changed = err == nil
	return err
}

// read is the seed's getCount: the sum of the shard documents.
func (f *firestorePeer) read(ctx context.Context, i int) (int64, error) {
	docs, err := f.counter(i).Collection("shards").Documents(ctx).GetAll()
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, d := range docs {
		n, _ := d.Data()["count"].(int64)
		sum += n
	}
	return sum, nil
}

func (f *firestorePeer) readMany(ctx context.Context, op *operation) error {
	for _, i := range op.counters {
		if _, err := f.read(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

func (f *firestorePeer) prefill(ctx context.Context, is []int) (int64, error) {
	for _, i := range is {
		if err := f.create(ctx, i); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

// total sums every written counter, 32 reads at a time: a read is a
// round trip, and a Zipf run writes tens of thousands of counters.
func (f *firestorePeer) total(ctx context.Context) (int64, error) {
	var sum atomic.Int64
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range f.written {
		if !f.written[i].Load() {
			continue
		}
		g.Go(func() error {
			n, err := f.read(ctx, i)
			sum.Add(n)
			return err
		})
	}
	err := g.Wait()
	return sum.Load(), err
}
