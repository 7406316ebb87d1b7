package datastore_test

import (
	"context"
	"testing"
	"time"

	gds "cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter/datastore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestPaceAcrossServers runs storetest.RunPaceAcrossServers on one
// emulator database, polling the shard entities' pace stamps (sc_by, and
// sc_at, when the committing server wrote them), with the engines' flush
// timeout raised past the emulator's lock waits.
func TestPaceAcrossServers(t *testing.T) {
	project := firestoretest.Project(t)
	var first *datastore.CounterStore
	storetest.RunPaceAcrossServers(t, storetest.PaceOptions{
		// Two servers' transactions that read one shard entity and both
		// write it hold each other up on the emulator for about 5 s, the
		// engine's default flush timeout: time enough to finish.
		FlushTimeout: 30 * time.Second,
		Open: func(tb testing.TB, interval time.Duration) storetest.PacedStore {
			s := mustOpenProject(tb, project, datastore.Options{ShardWriteInterval: interval})
			if first == nil {
				first = s
			}
			return s
		},
		Poll: func(ctx context.Context, id string, shards int) ([]storetest.PaceCommit, error) {
			keys := make([]*gds.Key, shards)
			for i := range keys {
				keys[i] = first.ShardKey(id, i)
			}
			ents := make([]gds.PropertyList, shards)
			if err := first.Client().GetMulti(ctx, keys, ents); err != nil {
				return nil, err
			}
			cs := make([]storetest.PaceCommit, shards)
			for i, ps := range ents {
				for _, p := range ps {
					switch p.Name {
					case "sc_by":
						cs[i].By = p.Value
					case "sc_at":
						ns, _ := p.Value.(int64)
						cs[i].At = time.Unix(0, ns)
					}
				}
			}
			return cs, nil
		},
	})
}
