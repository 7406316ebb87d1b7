package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/collection"
	"github.com/shardcounter/shardcounter/storetest"
)

func TestCollectionStore(t *testing.T) {
	s := MustOpen(t).Collections()
	storetest.RunCollectionStore(t, func(testing.TB) shardcounter.CollectionStore { return s })
}

// TestCollectionStoreSmallIn runs the suite with chunks of 2 shards, so
// that the chunked statement merges shards and the service merges chunks.
func TestCollectionStoreSmallIn(t *testing.T) {
	s := MustOpen(t).Collections()
	s.MaxIn = 2
	storetest.RunCollectionStore(t, func(testing.TB) shardcounter.CollectionStore { return s })
}

// TestCollectionIndexes checks the seed's rule on the schema itself: every
// index that holds the documents' timestamp holds the shard before it.
func TestCollectionIndexes(t *testing.T) {
	s := MustOpen(t)
	rows, err := s.Pool().Query(context.Background(), `
SELECT i.relname, array_agg(a.attname::text ORDER BY k.n)
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace ns ON ns.oid = t.relnamespace
CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k (attnum, n)
JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
WHERE ns.nspname = 'shardcounter' AND t.relname IN ('documents', 'document_index')
GROUP BY i.relname`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var name string
		var cols []string
		if err := rows.Scan(&name, &cols); err != nil {
			t.Fatal(err)
		}
		seen++
		ts, shard := -1, -1
		for i, c := range cols {
			switch c {
			case "ts":
				ts = i
			case "shard":
				shard = i
			}
		}
		if ts >= 0 && (shard < 0 || shard > ts) {
			t.Errorf("index %s (%s) holds the timestamp without the shard before it", name, strings.Join(cols, ", "))
		}
		if name == "document_index_pkey" && cols[0] != "shard" {
			t.Errorf("index %s (%s) does not start with the shard", name, strings.Join(cols, ", "))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen < 3 {
		t.Fatalf("found %d indexes on documents and document_index, want at least 3", seen)
	}
}

// TestCollectionScanPlan checks that a chunked scan reads each shard's
// range through the index, not the table.
func TestCollectionScanPlan(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	svc := storetest.MustService(t, s.Collections(), collection.Config{})
	storetest.MustCreateCollection(t, svc, "events", shardcounter.CollectionOptions{Shards: 4, Indexes: []string{"kind"}})
	for b := range 4 {
		docs := make([]shardcounter.DocumentInput, 250)
		for i := range docs {
			docs[i] = shardcounter.DocumentInput{ID: fmt.Sprintf("e%d-%d", b, i), Data: map[string]any{"kind": fmt.Sprint(i % 3)}}
		}
		storetest.MustPut(t, svc, "events", docs...)
	}
	if _, err := s.Pool().Exec(ctx, "ANALYZE shardcounter.document_index; ANALYZE shardcounter.documents"); err != nil {
		t.Fatal(err)
	}
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var plan strings.Builder
	rows, err := conn.Query(ctx, `EXPLAIN
SELECT i.ts, i.id FROM unnest('{0,1,2,3}'::int[]) AS s (shard)
CROSS JOIN LATERAL (
	SELECT i.ts, i.id FROM shardcounter.document_index i
	WHERE i.shard = s.shard AND i.collection = 1 AND i.field = 'kind' AND i.value = 's1'
	ORDER BY i.ts DESC, i.id DESC LIMIT 5
) AS i ORDER BY i.ts DESC, i.id DESC LIMIT 5`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		rows.Scan(&line)
		plan.WriteString(line + "\n")
	}
	rows.Close()
	if !strings.Contains(plan.String(), "Index") || strings.Contains(plan.String(), "Seq Scan on document_index") {
		t.Fatalf("plan of a chunked scan does not read the index:\n%s", plan.String())
	}
}
