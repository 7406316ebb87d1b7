package collection_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/collection"
	"github.com/shardcounter/shardcounter/storetest"
)

func mustBolt(tb testing.TB) *bolt.CollectionStore {
	tb.Helper()
	s, err := bolt.Open(context.Background(), filepath.Join(tb.TempDir(), "c.db"), bolt.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	cs, err := s.Collections()
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

// TestMergeReadsOnDemand checks that a query reads about limit + 2n
// documents from the store, not n × limit: the merge asks a shard for more
// only when it needs it.
func TestMergeReadsOnDemand(t *testing.T) {
	const n = 16
	svc := storetest.MustService(t, mustBolt(t), collection.Config{})
	storetest.MustCreateCollection(t, svc, "events", shardcounter.CollectionOptions{Shards: n})
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for b := range 4 {
		docs := make([]shardcounter.DocumentInput, 400)
		for i := range docs {
			at := base.Add(time.Duration(b*400+i) * time.Millisecond) // monotonic, as the seed's hot index
			docs[i] = shardcounter.DocumentInput{ID: fmt.Sprintf("e%04d", b*400+i), Data: map[string]any{"timestamp": at.Format(time.RFC3339Nano)}}
		}
		storetest.MustPut(t, svc, "events", docs...)
	}
	for _, limit := range []int{1, 5, 20, 100} {
		for _, order := range []shardcounter.Order{shardcounter.Desc, shardcounter.Asc} {
			before := svc.Stats().DocumentsRead.Load()
			res := storetest.MustQuery(t, svc, "events", shardcounter.Query{Limit: limit, Order: order})
			read := svc.Stats().DocumentsRead.Load() - before
			if len(res.Documents) != limit {
				t.Fatalf("limit %d: %d documents", limit, len(res.Documents))
			}
			if bound := int64(2*(limit+1) + 2*n); read > bound {
				t.Errorf("limit %d %s over %d shards read %d documents, want at most %d (n × limit would be %d)", limit, order, n, read, bound, n*limit)
			}
			t.Logf("limit %d %s: %d read for %d returned", limit, order, read, limit)
		}
	}
}

// Example runs seed 001's worked example: the instruments collection on 3
// shards, its three documents, and its three queries, newest first.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "instruments-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := bolt.Open(context.Background(), filepath.Join(dir, "example.db"), bolt.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	store, err := s.Collections()
	if err != nil {
		panic(err)
	}
	svc := collection.New(store, collection.Config{})
	_, err = svc.CreateCollection(ctx, "instruments", shardcounter.CollectionOptions{
		Shards:  3,
		Indexes: []string{"exchange", "instrumentType", "price.currency"},
	})
	if err != nil {
		panic(err)
	}
	if _, err := svc.PutDocuments(ctx, "instruments", storetest.InstrumentDocuments()); err != nil {
		panic(err)
	}
	for _, q := range []struct{ field, value string }{
		{"instrumentType", "commonstock"},
		{"exchange", "EXCHG1"},
		{"price.currency", "USD"},
	} {
		res, err := svc.QueryDocuments(ctx, "instruments", shardcounter.Query{
			Where: []shardcounter.Filter{{Field: q.field, Op: "==", Value: q.value}},
			Order: shardcounter.Desc,
			Limit: 5,
		})
		if err != nil {
			panic(err)
		}
		fmt.Printf("--- %s == %s\n", q.field, q.value)
		for _, d := range res.Documents {
			fmt.Println(d.Timestamp.Format(time.RFC3339Nano), d.Data["symbol"])
		}
	}
	// Output:
	// --- instrumentType == commonstock
	// 2019-01-01T13:45:23.101Z BBB
	// 2019-01-01T13:45:23.01Z AAA
	// --- exchange == EXCHG1
	// 2019-01-01T13:45:23.01Z AAA
	// 2019-01-01T13:45:23.001Z Index1 ETF
	// --- price.currency == USD
	// 2019-01-01T13:45:23.01Z AAA
	// 2019-01-01T13:45:23.001Z Index1 ETF
}

// misorder is a store that returns each scan's documents in reverse.
type misorder struct{ shardcounter.CollectionStore }

func (m misorder) ScanDocuments(ctx context.Context, c *shardcounter.Collection, r shardcounter.ScanRange) ([]*shardcounter.Document, error) {
	docs, err := m.CollectionStore.ScanDocuments(ctx, c, r)
	slices.Reverse(docs)
	return docs, err
}

// TestStoreContractChecked checks that a store returning a scan out of
// order makes the query fail as internal, rather than give a wrong page.
func TestStoreContractChecked(t *testing.T) {
	store := mustBolt(t)
	good := storetest.MustService(t, store, collection.Config{})
	storetest.MustCreateCollection(t, good, "c", shardcounter.CollectionOptions{Shards: 2})
	for i := range 10 {
		storetest.MustPut(t, good, "c", shardcounter.DocumentInput{ID: fmt.Sprint(i)})
	}
	bad := collection.New(misorder{store}, collection.Config{})
	_, err := bad.QueryDocuments(context.Background(), "c", shardcounter.Query{Limit: 5})
	if shardcounter.ErrorCode(err) != shardcounter.EINTERNAL {
		t.Fatalf("query over a store that misorders = %v, want internal", err)
	}
}

// TestRangeBounds checks that after and before are exclusive at the
// microsecond, also when they fall between two microseconds.
func TestRangeBounds(t *testing.T) {
	svc := storetest.MustService(t, mustBolt(t), collection.Config{})
	storetest.MustCreateCollection(t, svc, "c", shardcounter.CollectionOptions{Shards: 3})
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, id := range []string{"a", "b", "c"} {
		at := t0.Add(time.Duration(i) * time.Microsecond).Format(time.RFC3339Nano)
		storetest.MustPut(t, svc, "c", shardcounter.DocumentInput{ID: id, Data: map[string]any{"timestamp": at}})
	}
	us := time.Microsecond
	for _, c := range []struct {
		after, before time.Time
		want          string
	}{
		{after: t0, want: "c b"},
		{after: t0.Add(us / 2), want: "c b"},
		{after: t0.Add(us), want: "c"},
		{before: t0.Add(2 * us), want: "b a"},
		{before: t0.Add(us + us/2), want: "b a"},
		{before: t0.Add(us), want: "a"},
		{after: t0, before: t0.Add(2 * us), want: "b"},
		{after: t0.Add(us / 2), before: t0.Add(us + us/2), want: "b"},
		{after: t0.Add(us / 4), before: t0.Add(us / 2), want: ""},
	} {
		got := storetest.MustQueryAll(t, svc, "c", shardcounter.Query{After: c.after, Before: c.before})
		var ids []string
		for _, d := range got {
			ids = append(ids, d.ID)
		}
		if strings.Join(ids, " ") != c.want {
			t.Errorf("after %v before %v = %v, want %q", c.after, c.before, ids, c.want)
		}
	}
}
