package transfer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/dsn"
	"github.com/shardcounter/shardcounter/expiry"
	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/internal/redistest"
	"github.com/shardcounter/shardcounter/sketch"
	"github.com/shardcounter/shardcounter/storetest"
	"github.com/shardcounter/shardcounter/transfer"
)

func i64(v int64) *int64 { return &v }

// fill writes a bit of everything into s, some of it at past times on
// clock: sum, bounded, windowed (with writes before its retention),
// distinct with more members than one line holds, approx (one with a
// shard that has no sketch), hash fields, a counter at zero, one below
// zero: fillCounters of them.
func fill(t *testing.T, s shardcounter.CounterStore, clock *atomic.Pointer[time.Time], pfx string) {
	t.Helper()
	ctx := context.Background()
	create := func(id string, spec shardcounter.Spec) {
		if _, err := s.CreateCounter(ctx, pfx+id, spec); err != nil {
			t.Fatal(err)
		}
	}
	apply := func(incs ...shardcounter.Increment) {
		outs, err := s.Apply(ctx, incs)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
		}
	}
	create("plain", shardcounter.Spec{Shards: 16})
	apply(shardcounter.Increment{Counter: pfx + "plain", Delta: 41, Pick: 3}, shardcounter.Increment{Counter: pfx + "plain", Delta: 1, Pick: 9})
	create("zero", shardcounter.Spec{Shards: 1})
	create("neg", shardcounter.Spec{Shards: 4})
	apply(shardcounter.Increment{Counter: pfx + "neg", Delta: -7})
	create("bounded", shardcounter.Spec{Shards: 2, Min: i64(-5), Max: i64(100)})
	apply(shardcounter.Increment{Counter: pfx + "bounded", Delta: 99})
	old := time.Now().Add(-11 * 24 * time.Hour)
	clock.Store(&old)
	create("win", shardcounter.Spec{Shards: 8, Window: &shardcounter.Window{Bucket: shardcounter.BucketHour, Retention: shardcounter.Duration(7 * 24 * time.Hour)}})
	now := time.Now()
	for i, ago := range []time.Duration{10 * 24 * time.Hour, 50 * time.Hour, 3 * time.Hour, 0} {
		at := now.Add(-ago)
		clock.Store(&at)
		apply(shardcounter.Increment{Counter: pfx + "win", Delta: int64(10 + i), Pick: uint64(i)})
	}
	clock.Store(nil)
	// A window that holds every write: created within its retention.
	at := now.Add(-5 * time.Hour)
	clock.Store(&at)
	create("win2", shardcounter.Spec{Shards: 3, Window: &shardcounter.Window{Bucket: shardcounter.BucketHour, Retention: shardcounter.Duration(24 * time.Hour)}})
	for i, ago := range []time.Duration{4 * time.Hour, time.Hour, 0} {
		at := now.Add(-ago)
		clock.Store(&at)
		apply(shardcounter.Increment{Counter: pfx + "win2", Delta: int64(-2 - i), Pick: uint64(i)})
	}
	clock.Store(nil)
	create("likes", shardcounter.Spec{Shards: 4, Kind: shardcounter.KindDistinct})
	var incs []shardcounter.Increment
	for i := range 2500 {
		incs = append(incs, shardcounter.Increment{Counter: pfx + "likes", Member: fmt.Sprintf("user-%05d", i), Delta: 1})
		if len(incs) == 500 {
			apply(incs...)
			incs = nil
		}
	}
	create("empty-set", shardcounter.Spec{Shards: 1, Kind: shardcounter.KindDistinct})
	fillApprox(t, s, pfx, apply)
	fillCollection(t, s, pfx+"posts")
	for _, f := range []string{"likes", "views"} {
		id := pfx + shardcounter.HashFieldID("post:1", f)
		apply(shardcounter.Increment{Counter: id, Delta: 5, Create: &shardcounter.Spec{Shards: 1}})
	}
	fillDeadlinesAndRanking(t, s, pfx)
}

// fillCounters is how many counters fill makes.
const fillCounters = 12

// fillApprox makes two approx counters: one of 3 shards with 2,000
// visitors, some added twice (dense sketches and sparse ones), and one
// of 2 shards with a single visitor, so one shard has no sketch.
func fillApprox(t *testing.T, s shardcounter.CounterStore, pfx string, apply func(...shardcounter.Increment)) {
	t.Helper()
	ctx := context.Background()
	for id, n := range map[string]int{"uniques": 3, "uniques-one": 2} {
		if _, err := s.CreateCounter(ctx, pfx+id, shardcounter.Spec{Shards: n, Kind: shardcounter.KindApprox}); err != nil {
			t.Fatal(err)
		}
	}
	var incs []shardcounter.Increment
	for i := range 2500 {
		incs = append(incs, shardcounter.Increment{Counter: pfx + "uniques", Member: fmt.Sprintf("visitor-%d", i%2000), Delta: 1})
		if len(incs) == 500 {
			apply(incs...)
			incs = nil
		}
	}
	apply(shardcounter.Increment{Counter: pfx + "uniques-one", Member: "only", Delta: 1})
}

// fillDeadlinesAndRanking gives a counter and a hash deadlines far
// enough ahead that none passes during a test, and makes a ranking.
func fillDeadlinesAndRanking(t *testing.T, s shardcounter.CounterStore, pfx string) {
	t.Helper()
	ctx := context.Background()
	ex := expiry.Wrap(s, expiry.Options{})
	at := time.Now().Add(48 * time.Hour)
	for _, name := range []string{pfx + "plain", pfx + "post:1"} {
		if ok, err := ex.ExpireCounter(ctx, name, at); err != nil || !ok {
			t.Fatalf("expire %s: %v, %v", name, ok, err)
		}
	}
	r := &shardcounter.Ranking{Name: pfx + "top", RankingOptions: shardcounter.RankingOptions{Prefix: pfx, Size: 5}.WithDefaults(), CreatedAt: time.Now().UTC()}
	if _, _, err := s.CreateRanking(ctx, r); err != nil {
		t.Fatal(err)
	}
}

// fillCollection makes a collection of 3 shards with 25 documents.
func fillCollection(t *testing.T, s shardcounter.CounterStore, name string) {
	t.Helper()
	ctx := context.Background()
	cs, err := dsn.Collections(s)
	if err != nil {
		t.Fatal(err)
	}
	c := &shardcounter.Collection{Name: name, Shards: 3, Indexes: []string{"user"}}
	if err := shardcounter.ValidateCollection(c); err != nil {
		t.Fatal(err)
	}
	c.CreatedAt = shardcounter.TruncateTimestamp(time.Now())
	if err := cs.CreateCollection(ctx, c); err != nil {
		t.Fatal(err)
	}
	var docs []*shardcounter.Document
	base := time.Date(2026, 11, 1, 12, 0, 0, 123456000, time.UTC)
	for i := range 25 {
		ts := base.Add(time.Duration(i%7) * time.Minute)
		docs = append(docs, &shardcounter.Document{ID: fmt.Sprintf("d%02d", i), Shard: i % 3, Timestamp: ts, Data: map[string]any{
			"timestamp": ts.Format(time.RFC3339Nano), "user": fmt.Sprintf("u%d", i%4), "n": float64(i) * 1.5,
			"ok": i%2 == 0, "tags": []any{"a", "b"}, "nested": map[string]any{"x": float64(i)},
		}})
	}
	if err := cs.PutDocuments(ctx, c, docs); err != nil {
		t.Fatal(err)
	}
}

func export(t *testing.T, s shardcounter.CounterStore, prefix string) string {
	t.Helper()
	var buf bytes.Buffer
	if _, err := transfer.Export(context.Background(), s, &buf, transfer.ExportOptions{Prefix: prefix}); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func importInto(t *testing.T, dsn, data string, replace bool) (shardcounter.CounterStore, *transfer.Clock, transfer.Stats) {
	t.Helper()
	clock := &transfer.Clock{}
	s, err := transfer.OpenStore(context.Background(), dsn, clock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	st, err := transfer.Import(context.Background(), s, strings.NewReader(data), transfer.ImportOptions{Clock: clock, Replace: replace})
	if err != nil {
		t.Fatalf("import into %s: %v", dsn, err)
	}
	return s, clock, st
}

// startEmulators starts the Firestore emulator twice for the test, in
// native mode and in Datastore mode, side by side (a cold JVM takes a
// while), and returns the DSNs of a project on each.
func startEmulators(t *testing.T) (firestoreDSN, datastoreDSN string) {
	var native, ds *firestoretest.Emulator
	var errNative, errDS error
	var wg sync.WaitGroup
	wg.Go(func() { native, errNative = firestoretest.Start(firestoretest.Native) })
	wg.Go(func() { ds, errDS = firestoretest.Start(firestoretest.Datastore) })
	wg.Wait()
	for _, e := range []*firestoretest.Emulator{native, ds} {
		if e != nil {
			t.Cleanup(e.Stop)
		}
	}
	if err := errors.Join(errNative, errDS); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FIRESTORE_EMULATOR_HOST", native.Addr)
	t.Setenv("DATASTORE_EMULATOR_HOST", ds.Addr)
	return "firestore://demo-roundtrip", "datastore://demo-roundtrip?shard_write_interval=0"
}

func clusterDSN(c *redistest.Cluster) string {
	a := c.Addrs()
	return "redis+cluster://" + a[0] + "?addr=" + strings.Join(a[1:], "&addr=")
}

// TestRoundTrip moves one export through every store, bolt → Pebble →
// PostgreSQL → Redis → Redis Cluster → Firestore → Datastore mode (the
// emulators) → bolt, and checks that every
// store's export equals the first line for line, and that importing it
// a second time changes nothing.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	var clock atomic.Pointer[time.Time]
	src, err := bolt.Open(context.Background(), filepath.Join(dir, "src.db"), bolt.Options{Now: clockFunc(&clock)})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	first := fillAndExport(t, src, &clock)
	firestoreDSN, datastoreDSN := startEmulators(t)
	roundTrip(t, first, []step{
		{"pebble", "pebble:" + filepath.Join(dir, "pebble")},
		{"postgres", pgtest.MustDatabase(t)},
		{"redis", "redis://" + redistest.MustStart(t).Addr},
		{"redis-cluster", clusterDSN(redistest.MustStartCluster(t, 3))},
		{"firestore", firestoreDSN},
		{"datastore", datastoreDSN},
		{"bolt", "bolt:" + filepath.Join(dir, "dst.db")},
	})
}

// TestRoundTripDocumentStores moves an export taken from Firestore
// through Datastore mode and back into another Firestore project: the
// document stores both ways, which the chain of TestRoundTrip takes in
// one direction only.
func TestRoundTripDocumentStores(t *testing.T) {
	firestoreDSN, datastoreDSN := startEmulators(t)
	var clock atomic.Pointer[time.Time]
	src, err := firestore.New(context.Background(), "demo-roundtrip-src", "", firestore.Options{Now: clockFunc(&clock)})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	first := fillAndExport(t, src, &clock)
	last := roundTrip(t, first, []step{{"datastore", datastoreDSN}, {"firestore", firestoreDSN}})

	// An import merges sketches: registers the target has and the
	// export lacks are kept, as members are.
	ctx := context.Background()
	if out, err := last.Apply(ctx, []shardcounter.Increment{{Counter: "rt/uniques-one", Member: "another", Delta: 1}}); err != nil || out[0].Err != nil {
		t.Fatalf("add to rt/uniques-one: %+v, %v", out, err)
	}
	if st, err := transfer.Import(ctx, last, strings.NewReader(first), transfer.ImportOptions{}); err != nil || st.Conflicts != 0 {
		t.Fatalf("import over it: %+v, %v", st, err)
	}
	if v := storetest.MustRead(t, last, "rt/uniques-one"); v != 2 {
		t.Fatalf("rt/uniques-one after an import of its export over a member more = %d, want 2", v)
	}
}

func clockFunc(clock *atomic.Pointer[time.Time]) func() time.Time {
	return func() time.Time {
		if p := clock.Load(); p != nil {
			return *p
		}
		return time.Now()
	}
}

// fillAndExport fills src, checks it and its export, and returns the
// export.
func fillAndExport(t *testing.T, src shardcounter.CounterStore, clock *atomic.Pointer[time.Time]) string {
	t.Helper()
	pfx := "rt/"
	fill(t, src, clock, pfx)
	first := export(t, src, pfx)
	if n, drifts, err := transfer.Verify(context.Background(), src, transfer.VerifyOptions{Prefix: pfx}); err != nil || n != fillCounters || len(drifts) != 0 {
		t.Fatalf("source: verify: %d counters, drifts %v, %v", n, drifts, err)
	}
	if n := strings.Count(first, "\n"); n < fillCounters {
		t.Fatalf("export has %d lines:\n%s", n, first)
	}
	// The deadlines are on the counter lines of their names (three: the
	// counter and the hash's two fields), not lines of their internal
	// records; the ranking has its own line.
	if n := strings.Count(first, `"expires_at":`); n != 3 || strings.Contains(first, `\u001e`) || !strings.Contains(first, `{"type":"ranking","name":"rt/top","prefix":"rt/","size":5,"max_staleness":"1s"}`) {
		t.Fatalf("export has %d deadlines, or an internal record, or no ranking:\n%s", n, first)
	}
	// An approx counter's line carries a sketch per shard, "" for one
	// with none, and the estimate of their union.
	approx := 0
	for _, line := range strings.Split(first, "\n") {
		var c transfer.Counter
		if !strings.Contains(line, `"kind":"approx"`) || json.Unmarshal([]byte(line), &c) != nil {
			continue
		}
		v, err := sketch.Count(c.Sketches)
		want := map[string]int64{"rt/uniques": 2000, "rt/uniques-one": 1}[c.ID]
		if err != nil || len(c.Sketches) != c.Shards || v != c.Value || math.Abs(float64(v-want)) > 3*sketch.StdError*float64(want)+1 {
			t.Fatalf("approx counter line %s: %d sketches, estimate %d (%v), want about %d", line, len(c.Sketches), v, err, want)
		}
		approx++
	}
	if approx != 2 || !strings.Contains(first, `"sketches":["",`) && !strings.Contains(first, `,""]`) {
		t.Fatalf("export has no approx counter with an empty shard:\n%.2000s", first)
	}
	return first
}

type step struct{ name, dsn string }

// roundTrip imports first into each store of chain in turn, from the
// export of the one before, and checks each store's export, its verify,
// and a second import. It returns the last store.
func roundTrip(t *testing.T, first string, chain []step) shardcounter.CounterStore {
	t.Helper()
	pfx := "rt/"
	data := first
	var s shardcounter.CounterStore
	for _, step := range chain {
		var st transfer.Stats
		s, _, st = importInto(t, step.dsn, data, false)
		if st.Counters != fillCounters || st.Members != 2500 || st.Conflicts != 0 || st.Collections != 1 || st.Documents != 25 || st.Rankings != 1 || st.Deadlines != 2 {
			t.Errorf("%s: import stats %+v", step.name, st)
		}
		got := export(t, s, pfx)
		diffLines(t, step.name, first, got)
		if n, drifts, err := transfer.Verify(context.Background(), s, transfer.VerifyOptions{Prefix: pfx}); err != nil || n != fillCounters || len(drifts) != 0 {
			t.Fatalf("%s: verify: %d counters, drifts %v, %v", step.name, n, drifts, err)
		}
		// Again: nothing changes, and nothing needs the clock.
		if st, err := transfer.Import(context.Background(), s, strings.NewReader(data), transfer.ImportOptions{}); err != nil || st.Counters != fillCounters || st.Conflicts != 0 || st.Deadlines != 0 {
			t.Fatalf("%s: second import: %+v, %v", step.name, st, err)
		}
		diffLines(t, step.name+" (again)", first, export(t, s, pfx))
		data = got
	}
	return s
}

func diffLines(t *testing.T, name, want, got string) {
	t.Helper()
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			t.Fatalf("%s: line %d differs:\n got %.300s\nwant %.300s", name, i+1, b, a)
		}
	}
}
