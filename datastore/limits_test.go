package datastore_test

import (
	"context"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/datastore/apiv1/datastorepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/datastore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestLookupLimit reshards a counter to 1,024 shards and back, reads it
// and writes a bounded one of 1,024 shards (whose writes read every
// shard), and checks that no Lookup asked for more than the 1,000 keys
// Datastore takes in one.
func TestLookupLimit(t *testing.T) {
	var most, lookups atomic.Int64
	count := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*datastorepb.LookupRequest); ok {
			lookups.Add(1)
			for n := int64(len(r.Keys)); ; {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	ctx := context.Background()
	s, err := datastore.NewWith(ctx, firestoretest.Project(t), datastore.Options{}, option.WithGRPCDialOption(count))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id, bounded := t.Name()+"/c", t.Name()+"/bounded"
	storetest.MustCreate(t, s, id, 3)
	for i := range 3 {
		if err := s.Add(ctx, id, int64(10+i), uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ReshardCounter(ctx, id, shardcounter.MaxShards); err != nil {
		t.Fatal(err)
	}
	if got := storetest.MustRead(t, s, id); got != 33 {
		t.Errorf("after a reshard to %d shards: %d, want 33", shardcounter.MaxShards, got)
	}
	if _, vals, err := s.ReadShards(ctx, id); err != nil || len(vals) != shardcounter.MaxShards {
		t.Errorf("ReadShards: %d shards, %v", len(vals), err)
	}
	if _, err := s.ReshardCounter(ctx, id, 2); err != nil {
		t.Fatal(err)
	}
	if got := storetest.MustRead(t, s, id); got != 33 {
		t.Errorf("after a reshard back to 2 shards: %d, want 33", got)
	}
	if _, err := s.CreateCounter(ctx, bounded, shardcounter.Spec{Shards: shardcounter.MaxShards, Max: new(int64(5))}); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		if err := s.Add(ctx, bounded, 1, 7); err != nil && shardcounter.ErrorCode(err) != shardcounter.EOUTOFRANGE {
			t.Fatal(err)
		}
	}
	if got := storetest.MustRead(t, s, bounded); got != 5 {
		t.Errorf("bounded counter of %d shards: %d, want 5", shardcounter.MaxShards, got)
	}
	if lookups.Load() == 0 || most.Load() > 1000 {
		t.Errorf("%d lookups, the largest of %d keys: want none over 1,000", lookups.Load(), most.Load())
	}
	t.Logf("%d lookups, the largest of %d keys", lookups.Load(), most.Load())
}
