package datastore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// propBy and propAt are a shard entity's pace stamp, written with each
// commit of it by this store: the store's random stamp and the
// committing server's time in Unix ns (both unindexed). The Go client
// gives no entity's update time or version, so the entity carries its
// own.
const (
	propBy = docstore.PropBy
	propAt = "sc_at"
)

// notDue is an attempt that read a shard entity another server committed
// less than an interval ago: it rolled back, and the batch waits this
// long before reading again.
type notDue time.Duration

func (d notDue) Error() string {
	return fmt.Sprintf("datastore: a shard entity is due in %v", time.Duration(d))
}

// paceWait is how long the batch must wait before it commits: until
// every shard entity it read that another store committed last (its
// propBy stamp is not this store's; the seed's entities have none) was
// committed at least an interval ago, by its propAt. This store's own
// commits are the engine's to pace. The transaction read those entities,
// so a commit of one by another server since aborts it, and the batch
// reads again and waits from the new stamp: no shard entity takes two
// commits by two servers within an interval (the servers' clocks taken
// to agree).
func (b *batch) paceWait() time.Duration {
	if b.s.ShardWriteInterval() <= 0 {
		return 0
	}
	var p docstore.Pace
	for _, id := range b.order {
		for _, se := range b.targets[id].shards {
			if se.exists && se.By != "" && se.By != b.s.stamp {
				p.Saw(time.Unix(0, se.At))
			}
		}
	}
	return p.Wait(b.s.ShardWriteInterval(), time.Now())
}

// applyPaced runs applyOnce (in txCtx) until the batch is due: an attempt
// not due rolls back and sleeps (until ctx ends) outside its
// transaction, since Datastore holds a lock on what a transaction reads
// until it ends, and one kept open across the wait would hold every
// other writer of those entities back with it.
func (s *CounterStore) applyPaced(ctx, txCtx context.Context, incs []shardcounter.Increment, out []shardcounter.Outcome, m *marker, limit int, mayCommit func() bool) (int, error) {
	for {
		n, err := s.applyOnce(txCtx, incs, out, m, limit, mayCommit)
		var wait notDue
		if !errors.As(err, &wait) {
			return n, err
		}
		if err := docstore.PaceSleep(ctx, "datastore", time.Duration(wait)); err != nil {
			return 0, err
		}
	}
}
