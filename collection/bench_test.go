package collection_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/collection"
	"github.com/shardcounter/shardcounter/storetest"
)

// BenchmarkQuery times one page of a merged query — the per-shard reads
// and the streaming k-way merge of their sorted streams — over a bolt
// store of 10,000 documents with monotonically increasing timestamps, for
// a few shard counts and page sizes. read/op is the documents the merge
// asked the store for, against limit + n at the least.
func BenchmarkQuery(b *testing.B) {
	for _, n := range []int{1, 3, 16} {
		svc := storetest.MustService(b, mustBolt(b), collection.Config{})
		storetest.MustCreateCollection(b, svc, "events", shardcounter.CollectionOptions{Shards: n})
		base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		for batch := range 20 {
			docs := make([]shardcounter.DocumentInput, 500)
			for i := range docs {
				k := batch*500 + i
				docs[i] = shardcounter.DocumentInput{ID: fmt.Sprintf("e%05d", k), Data: map[string]any{"timestamp": base.Add(time.Duration(k) * time.Millisecond).Format(time.RFC3339Nano)}}
			}
			storetest.MustPut(b, svc, "events", docs...)
		}
		for _, limit := range []int{5, 100} {
			b.Run(fmt.Sprintf("shards=%d/limit=%d", n, limit), func(b *testing.B) {
				b.ReportAllocs()
				before := svc.Stats().DocumentsRead.Load()
				for b.Loop() {
					res := storetest.MustQuery(b, svc, "events", shardcounter.Query{Limit: limit})
					if len(res.Documents) != limit {
						b.Fatalf("%d documents, want %d", len(res.Documents), limit)
					}
				}
				b.ReportMetric(float64(svc.Stats().DocumentsRead.Load()-before)/float64(b.N), "read/op")
			})
		}
	}
}
