package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/bench"
	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
)

// TestShardCommitsPerWrite: on Firestore (the emulator), the naive path
// commits one shard document a write, the engine path (paced, as serve
// is) folds a hot counter's writes into far fewer commits, the counter's
// creation not counted; the table shows the column; a store that is not
// a document store reports none.
func TestShardCommitsPerWrite(t *testing.T) {
	ctx := context.Background()
	e, err := firestoretest.Start(firestoretest.Native) // this package's other tests need none
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	t.Setenv("FIRESTORE_EMULATOR_HOST", e.Addr)
	s, err := firestore.New(ctx, firestoretest.Project(t), "", firestore.Options{ShardWriteInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	runs, err := bench.Paths(ctx, bench.Config{
		Store: s, StoreName: "firestore", Clients: 8, Counters: 1, Duration: time.Second, Shards: []int{4},
	}, bench.PathNaive, bench.PathEngine)
	if err != nil {
		t.Fatal(err)
	}
	naive, eng := runs[0], runs[1]
	if !naive.Verified || naive.Writes == 0 || naive.ShardCommits != naive.Writes || naive.ShardCommitsPerWrite != 1 {
		t.Errorf("naive run = %+v, want verified writes of one shard commit each", naive)
	}
	if !eng.Verified || eng.Writes == 0 || eng.ShardCommits <= 0 || eng.ShardCommits >= eng.Writes {
		t.Errorf("engine run = %+v, want verified writes folded into fewer shard commits", eng)
	}
	var buf bytes.Buffer
	if err := bench.WriteTable(&buf, runs); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(buf.String(), "\n"); !strings.Contains(lines[0], "shard commits/write") || !strings.HasSuffix(strings.TrimSpace(lines[1]), "1.000") {
		t.Errorf("the table lacks shard commits a write:\n%s", buf.String())
	}

	runs, err = bench.Paths(ctx, bench.Config{
		Store: mustStore(t), StoreName: "postgres", Clients: 4, Counters: 1, Duration: 200 * time.Millisecond, Shards: []int{4},
	}, bench.PathNaive)
	if err != nil {
		t.Fatal(err)
	}
	if runs[0].ShardCommits != 0 || runs[0].ShardCommitsPerWrite != 0 {
		t.Errorf("postgres run = %+v: shard commits reported for a store without shard documents", runs[0])
	}
}
