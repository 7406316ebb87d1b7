package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/bench"
	"github.com/shardcounter/shardcounter/postgres"
)

func TestCollections(t *testing.T) {
	s := mustStore(t).(*postgres.CounterStore).Collections()
	runs, err := bench.Collections(context.Background(), bench.CollectionsConfig{
		Store: s, StoreName: "postgres", Writers: 4, Duration: 200 * time.Millisecond, Shards: []int{1, 3},
		Documents: 700, QueryClients: 2, QueryDuration: 100 * time.Millisecond, Limits: []int{5},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 4 {
		t.Fatalf("%d runs, want an insert and a query run per shard count", len(runs))
	}
	for _, r := range runs {
		if r.Ops == 0 || r.Errors != 0 || r.P50ms <= 0 || r.P99ms < r.P50ms {
			t.Errorf("run %+v: want operations, no errors, sane latencies", r)
		}
		if r.Phase == "query" && (r.Documents < 700 || r.MinRead != 5+r.Shards || r.ReadPerQuery < 6) {
			t.Errorf("query run %+v: want 700 documents and at least limit+1 read per query", r)
		}
	}
	var out bytes.Buffer
	if err := bench.WriteCollectionsTable(&out, runs); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 5 || !strings.Contains(lines[1], "1.00×") {
		t.Fatalf("table:\n%s", out.String())
	}
}
