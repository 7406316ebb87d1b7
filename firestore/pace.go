package firestore

import (
	"context"
	"time"

	"github.com/shardcounter/shardcounter/internal/docstore"
)

// pace waits until every shard document the batch read that another
// writer (another server, by its fieldBy stamp) committed last was committed at least an
// interval ago, by the document's own update time; the engine paces this
// store's own commits. So the pace holds across servers: the commit
// states each shard's update time as its precondition, so a commit by
// another server since (a cached update time out of date) fails it, and
// the attempt reads the shard again and waits from its new update time.
// No shard document takes two commits within an interval, by the
// service's clock and this one's (the two are taken to agree).
func (s *CounterStore) pace(ctx context.Context, targets map[string]*target, order []string) error {
	var p docstore.Pace
	for _, id := range order {
		t := targets[id]
		if t.st == nil {
			continue
		}
		for i := range t.shards {
			if sh := t.st.shards[i]; !sh.mine {
				p.Saw(sh.ut)
			}
		}
	}
	if wait := p.Wait(s.ShardWriteInterval(), time.Now()); wait > 0 {
		return docstore.PaceSleep(ctx, "firestore", wait)
	}
	return nil
}
