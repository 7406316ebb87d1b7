package transfer_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/expiry"
	"github.com/shardcounter/shardcounter/transfer"
)

// TestDeadlinesAndRankings checks what export and import do with
// deadlines and rankings on bolt: deadlines travel on their counters'
// lines and their internal records never do, an expired name is left
// out, rankings are created idempotently and a differing one is
// reported unless Replace, and a version 1 export still imports.
// exportDeadlines makes a bolt store of three counters and a hash, with
// deadlines (one past) and a ranking, exports it, checks the export and
// returns it with the deadline's stamp, the deadline and the time it
// was made.
func exportDeadlines(t *testing.T) (exp, stamp string, at, now time.Time) {
	t.Helper()
	ctx := context.Background()
	src := openBolt(t)
	for _, id := range []string{"a", "b", "c", shardcounter.HashFieldID("h", "f")} {
		if out, err := src.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 3, Create: &shardcounter.Spec{Shards: 2}}}); err != nil || out[0].Err != nil {
			t.Fatal(err, out)
		}
	}
	now = time.Now()
	at = now.Add(time.Hour).Truncate(time.Millisecond).UTC()
	ex := expiry.Wrap(src, expiry.Options{})
	for _, name := range []string{"a", "h"} {
		if ok, err := ex.ExpireCounter(ctx, name, at); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	// A deadline already past: set through a wrapper whose clock is
	// behind, so that the record stays for the export to find.
	behind := expiry.Wrap(src, expiry.Options{Now: func() time.Time { return now.Add(-2 * time.Hour) }})
	if ok, err := behind.ExpireCounter(ctx, "b", now.Add(-time.Hour)); err != nil || !ok {
		t.Fatal(ok, err)
	}
	rs := src
	if _, _, err := rs.CreateRanking(ctx, &shardcounter.Ranking{Name: "top", RankingOptions: shardcounter.RankingOptions{Size: 3}.WithDefaults(), CreatedAt: now}); err != nil {
		t.Fatal(err)
	}

	var buf bytes.Buffer
	st, err := transfer.Export(ctx, src, &buf, transfer.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exp = buf.String()
	stamp = at.Format(time.RFC3339Nano)
	want := `{"type":"counter","id":"a","kind":"sum","shards":2,"value":3,"expires_at":"` + stamp + `"}`
	if st.Counters != 3 || st.Deadlines != 2 || st.Rankings != 1 || !strings.Contains(exp, want) || strings.Contains(exp, `"id":"b"`) ||
		strings.Contains(exp, `\u001e`) || !strings.Contains(exp, `{"type":"ranking","name":"top","prefix":"","size":3,"max_staleness":"1s"}`) {
		t.Fatalf("export (stats %+v):\n%s\nwant a line %s, no b, no internal record, the ranking", st, exp, want)
	}
	// The same export through the wrapper the engine uses.
	buf.Reset()
	if _, err := transfer.Export(ctx, ex, &buf, transfer.ExportOptions{}); err != nil || buf.String() != exp {
		t.Fatalf("export through expiry.Wrap: %v\n%s", err, buf.String())
	}

	return exp, stamp, at, now
}

func TestDeadlinesAndRankings(t *testing.T) {
	ctx := context.Background()
	exp, stamp, at, now := exportDeadlines(t)
	dst := openBolt(t)
	var conflicts []string
	imp := func(data string, replace bool) transfer.Stats {
		t.Helper()
		st, err := transfer.Import(ctx, dst, strings.NewReader(data), transfer.ImportOptions{Replace: replace,
			RankingConflict: func(name string, have, want shardcounter.RankingOptions) { conflicts = append(conflicts, name) }})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := imp(exp, false); st.Deadlines != 2 || st.Rankings != 1 || st.Conflicts != 0 {
		t.Fatalf("import: %+v", st)
	}
	dex := expiry.Wrap(dst, expiry.Options{})
	for _, name := range []string{"a", "h"} {
		if ttl, err := dex.CounterTTL(ctx, name); err != nil || ttl.ExpiresAt == nil || !ttl.ExpiresAt.Equal(at) {
			t.Fatalf("ttl of %s after import: %+v, %v; want %s", name, ttl, err, at)
		}
	}
	// A deadline the target has and the export not goes; nothing else
	// changes on a second import.
	if ok, err := dex.ExpireCounter(ctx, "c", now.Add(time.Hour)); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if st := imp(exp, false); st.Deadlines != 0 || st.Conflicts != 0 {
		t.Fatalf("second import: %+v", st)
	}
	if ttl, err := expiry.Wrap(dst, expiry.Options{}).CounterTTL(ctx, "c"); err != nil || ttl.ExpiresAt != nil {
		t.Fatalf("ttl of c after the second import: %+v, %v", ttl, err)
	}
	var buf bytes.Buffer
	if _, err := transfer.Export(ctx, dst, &buf, transfer.ExportOptions{}); err != nil || buf.String() != exp {
		t.Fatalf("export of the copy: %v\n%s\nwant\n%s", err, buf.String(), exp)
	}

	// A ranking of the same name with other options: reported, kept,
	// then replaced with Replace.
	drs := dst
	if err := drs.DeleteRanking(ctx, "top"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := drs.CreateRanking(ctx, &shardcounter.Ranking{Name: "top", RankingOptions: shardcounter.RankingOptions{Size: 7}.WithDefaults(), CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if st := imp(exp, false); st.Conflicts != 1 || len(conflicts) != 1 || conflicts[0] != "top" {
		t.Fatalf("import over another ranking: %+v, conflicts %q", st, conflicts)
	}
	if r, _ := drs.GetRanking(ctx, "top"); r.Size != 7 {
		t.Fatalf("ranking after a conflict: %+v", r)
	}
	if st := imp(exp, true); st.Replaced != 1 || st.Conflicts != 0 {
		t.Fatalf("import --replace: %+v", st)
	}
	if r, _ := drs.GetRanking(ctx, "top"); r.Size != 3 {
		t.Fatalf("ranking after --replace: %+v", r)
	}

	// A deadline that passed before the import deletes the name.
	past := strings.Replace(exp, stamp, now.Add(-time.Minute).UTC().Format(time.RFC3339), 1)
	imp(past, false)
	if ttl, err := expiry.Wrap(dst, expiry.Options{}).CounterTTL(ctx, "a"); err != nil || ttl.Exists {
		t.Fatalf("a after importing a past deadline: %+v, %v", ttl, err)
	}

	// Version 1 still reads.
	v1 := header + `{"type":"counter","id":"v1","kind":"sum","shards":1,"value":4}` + "\n" + `{"type":"end","counters":1,"members":0}` + "\n"
	if st := imp(v1, false); st.Counters != 1 {
		t.Fatalf("version 1 import: %+v", st)
	}
}
