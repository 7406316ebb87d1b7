package transfer

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/datastore"
	"github.com/shardcounter/shardcounter/dsn"
	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/pebble"
	"github.com/shardcounter/shardcounter/postgres"
	"github.com/shardcounter/shardcounter/redis"
)

// Clock is a store clock an import can hold at a past time.
//
// A store puts a windowed counter's write in the bucket of its commit
// time, by its clock (Options.Now of every store). To give each imported
// bucket its own start, the importer opens the store on a Clock and
// applies each bucket's delta while the clock reads that start; the rest
// of the time it reads time.Now. Only the importer writes through such a
// store, one batch at a time, so no other write sees the held time.
// Stores opened by other processes keep their own clocks.
type Clock struct {
	at atomic.Pointer[time.Time]
}

// Now is the clock's time: the held time, or time.Now.
func (c *Clock) Now() time.Time {
	if t := c.at.Load(); t != nil {
		return *t
	}
	return time.Now()
}

// hold makes the clock read t until release.
func (c *Clock) hold(t time.Time) { c.at.Store(&t) }

func (c *Clock) release() { c.at.Store(nil) }

// OpenStore opens the store a DSN names, as dsn.Open does, on clock.
func OpenStore(ctx context.Context, name string, clock *Clock) (shardcounter.CounterStore, error) {
	kind, err := dsn.Scheme(name)
	if err != nil {
		return nil, err
	}
	now := clock.Now
	switch kind {
	case dsn.Bolt:
		return bolt.Open(ctx, name[len("bolt:"):], bolt.Options{Now: now})
	case dsn.Pebble:
		return pebble.Open(ctx, name[len("pebble:"):], pebble.Options{Now: now})
	case dsn.Postgres:
		return postgres.Open(ctx, name, postgres.Options{Now: now})
	case dsn.Redis, dsn.RedisCluster:
		return redis.Open(ctx, name, redis.Options{Now: now})
	case dsn.Firestore:
		c, err := firestore.ParseDSN(name)
		if err != nil {
			return nil, err
		}
		c.Options.Now = now
		return firestore.New(ctx, c.Project, c.Database, c.Options)
	case dsn.Datastore:
		c, err := datastore.ParseDSN(name)
		if err != nil {
			return nil, err
		}
		c.Options.Now = now
		return datastore.New(ctx, c.Project, c.Options)
	}
	return dsn.Open(ctx, name)
}
