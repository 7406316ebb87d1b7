package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/postgres"
)

// TestBatchPlansIgnoreTableSize checks that a batch's statements do not
// read more of a table as it grows: their plans are made once per
// connection (generic plans), the first while the tables are small, and
// kept until an ANALYZE. A presence check of members became a hashed
// subplan reading every member of the counter, growing with them.
// On a private server with pg_stat_statements and no autovacuum (so that
// the only ANALYZE is the test's, early, as autovacuum's first one is),
// batches of 64 adds run first on a new counter and then after 300,000
// members were added behind the store's back; the buffers each batch's
// member statements (the presence read and the write) read must stay in
// proportion to its items.
func TestBatchPlansIgnoreTableSize(t *testing.T) {
	srv := pgtest.StartServer(t, "shared_preload_libraries=pg_stat_statements", "autovacuum=off")
	ctx := context.Background()
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "1") // one connection, one cached plan
	u.RawQuery = q.Encode()
	s, err := postgres.Open(ctx, u.String(), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec("CREATE EXTENSION pg_stat_statements")
	spec := shardcounter.Spec{Shards: 16, Kind: shardcounter.KindDistinct}
	batch := func(round int) {
		t.Helper()
		incs := make([]shardcounter.Increment, 64)
		for i := range incs {
			incs[i] = shardcounter.Increment{Counter: "likes", Member: fmt.Sprintf("r%d-%d", round, i), Delta: 1, Create: &spec}
		}
		out, err := s.Apply(ctx, incs)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
		}
	}
	// The tables as autovacuum sees them early on: analysed while small.
	for round := range 4 {
		batch(round)
	}
	exec("ANALYZE")
	for round := 4; round < 12; round++ { // past the first runs, so the plans are cached
		batch(round)
	}
	exec(`INSERT INTO shardcounter.members (counter, member, hash)
SELECT 'likes', 'bulk-' || g, g FROM generate_series(1, 300000) AS g`)
	exec("SELECT pg_stat_statements_reset()")
	for round := 12; round < 16; round++ {
		batch(round)
	}
	// The statement that reads the members' presence, and the one that
	// writes them.
	for _, like := range []string{"%SELECT i.counter, i.member%shardcounter.members m%", "%INSERT INTO shardcounter.members%"} {
		var calls, hits int64
		err = s.Pool().QueryRow(ctx, `
SELECT calls, shared_blks_hit + shared_blks_read FROM pg_stat_statements WHERE query LIKE $1`, like).Scan(&calls, &hits)
		if err != nil {
			t.Fatalf("%s: %v", like, err)
		}
		if perItem := hits / calls / 64; perItem > 20 {
			t.Fatalf("%s read %d buffers a batch of 64 adds (%d an item) with 300,000 members in: it reads the table, not the members it writes", like, hits/calls, perItem)
		}
		if got := calls; got != 4 {
			t.Fatalf("%s ran %d times, want 4", like, got)
		}
	}
}
