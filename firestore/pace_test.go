package firestore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	gfs "cloud.google.com/go/firestore"

	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestPaceAcrossServers runs storetest.RunPaceAcrossServers on one
// emulator database, polling the shard documents' update times and
// stamps (sc_by). SHARDCOUNTER_PACE_FIGURES=1 runs the set-up
// (see there) for docs/FIRESTORE.md.
func TestPaceAcrossServers(t *testing.T) {
	ctx := context.Background()
	project := firestoretest.Project(t)
	raw, err := gfs.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	storetest.RunPaceAcrossServers(t, storetest.PaceOptions{
		Open: func(tb testing.TB, interval time.Duration) storetest.PacedStore {
			s, err := firestore.New(ctx, project, "", firestore.Options{ShardWriteInterval: interval})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { s.Close() })
			return s
		},
		Poll: func(ctx context.Context, id string, shards int) ([]storetest.PaceCommit, error) {
			counter := raw.Collection("counters").Doc(firestore.Escape(id))
			var refs []*gfs.DocumentRef
			for i := range shards {
				refs = append(refs, counter.Collection("shards").Doc(fmt.Sprint(i)))
			}
			snaps, err := raw.GetAll(ctx, refs)
			if err != nil {
				return nil, err
			}
			cs := make([]storetest.PaceCommit, len(snaps))
			for i, sn := range snaps {
				cs[i] = storetest.PaceCommit{At: sn.UpdateTime, By: sn.Data()["sc_by"]}
			}
			return cs, nil
		},
	})
}
