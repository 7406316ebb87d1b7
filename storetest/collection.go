package storetest

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/collection"
)

// CollectionOpenFunc returns a collection store for a test. It may return
// the same store to every caller; the suite never closes it.
type CollectionOpenFunc func(tb testing.TB) shardcounter.CollectionStore

// RunCollectionStore runs every test of the CollectionStore contract,
// through a collection.Service so that the merge, paging and validation
// are exercised on the store's own indexes. Each subtest uses collections
// named under its own unique prefix, so the store need not be empty.
func RunCollectionStore(t *testing.T, open CollectionOpenFunc) {
	t.Run("Create", func(t *testing.T) { testCollectionCreate(t, open(t)) })
	t.Run("Documents", func(t *testing.T) { testDocuments(t, open(t)) })
	t.Run("Replace", func(t *testing.T) { testReplace(t, open(t)) })
	t.Run("Delete", func(t *testing.T) { testCollectionDelete(t, open(t)) })
	t.Run("Invalid", func(t *testing.T) { testQueryInvalid(t, open(t)) })
	t.Run("Instruments", func(t *testing.T) { testInstruments(t, open(t)) })
	t.Run("Property", func(t *testing.T) { testProperty(t, open(t), false) })
	t.Run("PropertyGrowing", func(t *testing.T) { testProperty(t, open(t), true) })
	t.Run("PagingUnderWrites", func(t *testing.T) { testPagingUnderWrites(t, open(t)) })
}

// MustService returns a collection service over s whose document
// timestamps default to a clock the test controls (starting at now), and
// whose random shards come from a seeded source, so runs repeat.
func MustService(tb testing.TB, s shardcounter.CollectionStore, cfg collection.Config) *collection.Service {
	tb.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	var mu sync.Mutex
	if cfg.Shard == nil {
		cfg.Shard = func(n int) int { mu.Lock(); defer mu.Unlock(); return rng.IntN(n) }
	}
	return collection.New(s, cfg)
}

// MustCreateCollection creates a collection or fails the test.
func MustCreateCollection(tb testing.TB, svc shardcounter.CollectionService, name string, opts shardcounter.CollectionOptions) *shardcounter.Collection {
	tb.Helper()
	c, err := svc.CreateCollection(context.Background(), name, opts)
	if err != nil {
		tb.Fatalf("CreateCollection(%q): %v", name, err)
	}
	return c
}

// MustPut writes documents or fails the test.
func MustPut(tb testing.TB, svc shardcounter.CollectionService, name string, docs ...shardcounter.DocumentInput) []shardcounter.DocumentRef {
	tb.Helper()
	refs, err := svc.PutDocuments(context.Background(), name, docs)
	if err != nil {
		tb.Fatalf("PutDocuments(%q, %d documents): %v", name, len(docs), err)
	}
	if len(refs) != len(docs) {
		tb.Fatalf("PutDocuments returned %d refs for %d documents", len(refs), len(docs))
	}
	return refs
}

// MustQuery runs one query or fails the test.
func MustQuery(tb testing.TB, svc shardcounter.CollectionService, name string, q shardcounter.Query) *shardcounter.QueryResult {
	tb.Helper()
	res, err := svc.QueryDocuments(context.Background(), name, q)
	if err != nil {
		tb.Fatalf("QueryDocuments(%q, %+v): %v", name, q, err)
	}
	return res
}

// MustQueryAll pages through a query to its end and returns every
// document, failing the test if paging does not end.
func MustQueryAll(tb testing.TB, svc shardcounter.CollectionService, name string, q shardcounter.Query) []*shardcounter.Document {
	tb.Helper()
	var all []*shardcounter.Document
	for range 100_000 {
		res := MustQuery(tb, svc, name, q)
		all = append(all, res.Documents...)
		if res.NextPageToken == "" {
			return all
		}
		q.PageToken = res.NextPageToken
	}
	tb.Fatalf("paging %+v did not end", q)
	return nil
}

func docIDs(docs []*shardcounter.Document) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.ID
	}
	return out
}

func ts(s string) time.Time {
	t, err := shardcounter.ParseTimestamp(s)
	if err != nil {
		panic(err)
	}
	return t
}

func testCollectionCreate(t *testing.T, s shardcounter.CollectionStore) {
	ctx := context.Background()
	svc := MustService(t, s, collection.Config{})
	name := prefix(t) + "events"
	before := time.Now().Add(-time.Minute)
	c := MustCreateCollection(t, svc, name, shardcounter.CollectionOptions{Shards: 3, Indexes: []string{"kind", "price.currency"}, ShardKey: shardcounter.ShardIDHash})
	if c.Name != name || c.Shards != 3 || c.TimestampField != "timestamp" || c.ShardKey != shardcounter.ShardIDHash ||
		!slices.Equal(c.Indexes, []string{"kind", "price.currency"}) || c.CreatedAt.Before(before) {
		t.Fatalf("CreateCollection = %+v", c)
	}
	got, err := svc.GetCollection(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != c.Name || got.Shards != 3 || got.TimestampField != c.TimestampField || got.ShardKey != c.ShardKey ||
		!slices.Equal(got.Indexes, c.Indexes) || !got.CreatedAt.Equal(c.CreatedAt) {
		t.Fatalf("GetCollection = %+v, want %+v", got, c)
	}
	t.Run("ErrExists", func(t *testing.T) {
		_, err := svc.CreateCollection(ctx, name, shardcounter.CollectionOptions{Shards: 5})
		wantCode(t, "second CreateCollection", err, shardcounter.EEXISTS)
		if got, _ := svc.GetCollection(ctx, name); got.Shards != 3 {
			t.Fatalf("a refused create changed the collection: %+v", got)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		missing := prefix(t) + "missing"
		_, err := svc.GetCollection(ctx, missing)
		wantCode(t, "GetCollection", err, shardcounter.ENOTFOUND)
		_, err = svc.ReshardCollection(ctx, missing, 4)
		wantCode(t, "ReshardCollection", err, shardcounter.ENOTFOUND)
		wantCode(t, "DeleteCollection", svc.DeleteCollection(ctx, missing), shardcounter.ENOTFOUND)
		_, err = svc.PutDocuments(ctx, missing, []shardcounter.DocumentInput{{Data: map[string]any{}}})
		wantCode(t, "PutDocuments", err, shardcounter.ENOTFOUND)
		_, err = svc.QueryDocuments(ctx, missing, shardcounter.Query{})
		wantCode(t, "QueryDocuments", err, shardcounter.ENOTFOUND)
		_, err = svc.GetDocument(ctx, name, "no-such-document")
		wantCode(t, "GetDocument", err, shardcounter.ENOTFOUND)
		wantCode(t, "DeleteDocument", svc.DeleteDocument(ctx, name, "no-such-document"), shardcounter.ENOTFOUND)
	})
	t.Run("Grow", func(t *testing.T) {
		c, err := svc.ReshardCollection(ctx, name, 8)
		if err != nil || c.Shards != 8 {
			t.Fatalf("ReshardCollection(8) = %+v, %v", c, err)
		}
		if c, err = svc.ReshardCollection(ctx, name, 8); err != nil || c.Shards != 8 {
			t.Fatalf("ReshardCollection to the same count = %+v, %v", c, err)
		}
		_, err = svc.ReshardCollection(ctx, name, 2)
		wantCode(t, "ReshardCollection down", err, shardcounter.EINVALID)
		_, err = s.GrowCollection(ctx, name, 4)
		wantCode(t, "store GrowCollection down", err, shardcounter.EINVALID)
		for _, n := range []int{0, shardcounter.MaxShards + 1} {
			_, err = svc.ReshardCollection(ctx, name, n)
			wantCode(t, fmt.Sprintf("ReshardCollection(%d)", n), err, shardcounter.EINVALID)
		}
		if got, _ := svc.GetCollection(ctx, name); got.Shards != 8 {
			t.Fatalf("shards after refused reshards = %d, want 8", got.Shards)
		}
	})
	t.Run("Invalid", func(t *testing.T) {
		for _, opts := range []shardcounter.CollectionOptions{
			{Shards: -1}, {Shards: shardcounter.MaxShards + 1}, {ShardKey: "hash"},
			{Indexes: []string{"a..b"}}, {Indexes: []string{"timestamp"}}, {TimestampField: "."},
		} {
			_, err := svc.CreateCollection(ctx, prefix(t)+"bad", opts)
			wantCode(t, fmt.Sprintf("CreateCollection(%+v)", opts), err, shardcounter.EINVALID)
		}
		for _, bad := range []string{"", strings.Repeat("x", shardcounter.MaxIDLen+1), "a\x00b", "a\nb", "\xff"} {
			_, err := svc.CreateCollection(ctx, bad, shardcounter.CollectionOptions{})
			wantCode(t, fmt.Sprintf("CreateCollection(%q)", bad), err, shardcounter.EINVALID)
		}
		_, err := svc.GetCollection(ctx, prefix(t)+"bad")
		wantCode(t, "GetCollection after refused creates", err, shardcounter.ENOTFOUND)
	})
}

func testDocuments(t *testing.T, s shardcounter.CollectionStore) {
	ctx := context.Background()
	now := ts("2024-05-06T07:08:09.123456Z")
	svc := MustService(t, s, collection.Config{Now: func() time.Time { return now.Add(789 * time.Nanosecond) }})
	name := prefix(t) + "c"
	MustCreateCollection(t, svc, name, shardcounter.CollectionOptions{Shards: 4, TimestampField: "meta.at", Indexes: []string{"kind"}})

	refs := MustPut(t, svc, name,
		shardcounter.DocumentInput{ID: "explicit", Data: map[string]any{"kind": "a", "meta": map[string]any{"at": "2019-01-01T15:45:23.0101239+02:00"}, "n": 1.5}},
		shardcounter.DocumentInput{Data: map[string]any{"kind": "b", "nested": map[string]any{"x": []any{"y", 2.0}}}},
	)
	if refs[0].ID != "explicit" || !refs[0].Timestamp.Equal(ts("2019-01-01T13:45:23.010123Z")) {
		t.Fatalf("ref of a document with a timestamp = %+v, want it kept to the microsecond in UTC", refs[0])
	}
	if len(refs[1].ID) != 20 || !refs[1].Timestamp.Equal(now) {
		t.Fatalf("ref of a document with neither id nor timestamp = %+v, want a 20-character id and the clock's time %v", refs[1], now)
	}
	for _, r := range refs {
		if r.Shard < 0 || r.Shard >= 4 {
			t.Fatalf("document %q on shard %d of 4", r.ID, r.Shard)
		}
	}
	d, err := svc.GetDocument(ctx, name, "explicit")
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "explicit" || d.Shard != refs[0].Shard || !d.Timestamp.Equal(refs[0].Timestamp) || d.Data["kind"] != "a" || fmt.Sprint(d.Data["n"]) != "1.5" {
		t.Fatalf("GetDocument = %+v, want the document as written", d)
	}
	d, err = svc.GetDocument(ctx, name, refs[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := shardcounter.Lookup(d.Data, "meta.at"); got != now.Format(time.RFC3339Nano) {
		t.Fatalf("timestamp field of a document written without one = %v, want the server time %s", got, now.Format(time.RFC3339Nano))
	}
	if got, _ := shardcounter.Lookup(d.Data, "nested.x"); fmt.Sprint(got) != "[y 2]" {
		t.Fatalf("nested data read back as %v", got)
	}

	t.Run("IDHash", func(t *testing.T) {
		name := prefix(t) + "h"
		MustCreateCollection(t, svc, name, shardcounter.CollectionOptions{Shards: 7, ShardKey: shardcounter.ShardIDHash})
		for i := range 20 {
			id := fmt.Sprintf("doc-%d", i)
			ref := MustPut(t, svc, name, shardcounter.DocumentInput{ID: id})[0]
			if want := collection.HashShard(id, 7); ref.Shard != want {
				t.Fatalf("document %q went to shard %d, want fnv64a(id) mod 7 = %d", id, ref.Shard, want)
			}
		}
	})
	t.Run("Invalid", func(t *testing.T) {
		for _, in := range []shardcounter.DocumentInput{
			{ID: "a\x01", Data: map[string]any{}},
			{ID: strings.Repeat("x", shardcounter.MaxIDLen+1)},
			{Data: map[string]any{"meta": map[string]any{"at": "yesterday"}}},
			{Data: map[string]any{"meta": map[string]any{"at": 1546350323}}},
			{Data: map[string]any{"meta": "not an object"}},
			{Data: map[string]any{"kind": strings.Repeat("k", shardcounter.MaxIndexValueLen)}},
		} {
			_, err := svc.PutDocuments(ctx, name, []shardcounter.DocumentInput{{ID: "fine"}, in})
			wantCode(t, fmt.Sprintf("PutDocuments(%+v)", in), err, shardcounter.EINVALID)
		}
		_, err := svc.PutDocuments(ctx, name, []shardcounter.DocumentInput{{ID: "twice"}, {ID: "twice"}})
		wantCode(t, "PutDocuments with a repeated id", err, shardcounter.EINVALID)
		_, err = svc.PutDocuments(ctx, name, nil)
		wantCode(t, "PutDocuments of nothing", err, shardcounter.EINVALID)
		_, err = svc.PutDocuments(ctx, name, make([]shardcounter.DocumentInput, shardcounter.MaxDocumentBatch+1))
		wantCode(t, "PutDocuments over the batch limit", err, shardcounter.ETOOLARGE)
		for _, id := range []string{"fine", "twice"} {
			_, err = svc.GetDocument(ctx, name, id)
			wantCode(t, "GetDocument of a document in a refused batch", err, shardcounter.ENOTFOUND)
		}
	})
	t.Run("Delete", func(t *testing.T) {
		if err := svc.DeleteDocument(ctx, name, "explicit"); err != nil {
			t.Fatal(err)
		}
		_, err := svc.GetDocument(ctx, name, "explicit")
		wantCode(t, "GetDocument after delete", err, shardcounter.ENOTFOUND)
		wantCode(t, "second DeleteDocument", svc.DeleteDocument(ctx, name, "explicit"), shardcounter.ENOTFOUND)
		for _, q := range []shardcounter.Query{{}, {Where: []shardcounter.Filter{{Field: "kind", Op: "==", Value: "a"}}}} {
			if got := docIDs(MustQueryAll(t, svc, name, q)); slices.Contains(got, "explicit") {
				t.Fatalf("query %+v after delete = %v, still has the deleted document", q, got)
			}
		}
	})
}

// testReplace writes a document twice under one id with another
// timestamp, index value and shard: every index must drop the old entry.
func testReplace(t *testing.T, s shardcounter.CollectionStore) {
	ctx := context.Background()
	svc := MustService(t, s, collection.Config{})
	name := prefix(t) + "c"
	MustCreateCollection(t, svc, name, shardcounter.CollectionOptions{Shards: 2, Indexes: []string{"kind"}, ShardKey: shardcounter.ShardIDHash})
	MustPut(t, svc, name,
		shardcounter.DocumentInput{ID: "x", Data: map[string]any{"kind": "old", "timestamp": "2020-01-01T00:00:00Z"}},
		shardcounter.DocumentInput{ID: "y", Data: map[string]any{"kind": "old", "timestamp": "2020-01-02T00:00:00Z"}},
	)
	// Growing changes x's id-hash shard for some counts; find one that does.
	old := collection.HashShard("x", 2)
	n := 3
	for collection.HashShard("x", n) == old {
		n++
	}
	if _, err := svc.ReshardCollection(ctx, name, n); err != nil {
		t.Fatal(err)
	}
	ref := MustPut(t, svc, name, shardcounter.DocumentInput{ID: "x", Data: map[string]any{"kind": "new", "timestamp": "2021-01-01T00:00:00Z"}})[0]
	if ref.Shard == old {
		t.Fatalf("rewritten document stayed on shard %d", old)
	}
	where := func(v string) shardcounter.Query {
		return shardcounter.Query{Where: []shardcounter.Filter{{Field: "kind", Op: "==", Value: v}}}
	}
	for _, c := range []struct {
		q    shardcounter.Query
		want []string
	}{
		{shardcounter.Query{}, []string{"x", "y"}},
		{shardcounter.Query{Order: shardcounter.Asc}, []string{"y", "x"}},
		{where("old"), []string{"y"}},
		{where("new"), []string{"x"}},
		{shardcounter.Query{Before: ts("2020-12-31T00:00:00Z")}, []string{"y"}},
	} {
		if got := docIDs(MustQueryAll(t, svc, name, c.q)); !slices.Equal(got, c.want) {
			t.Errorf("query %+v after rewriting x = %v, want %v", c.q, got, c.want)
		}
	}
	d, err := svc.GetDocument(ctx, name, "x")
	if err != nil || d.Shard != ref.Shard || d.Data["kind"] != "new" || !d.Timestamp.Equal(ts("2021-01-01T00:00:00Z")) {
		t.Fatalf("GetDocument after rewrite = %+v, %v", d, err)
	}
}

func testCollectionDelete(t *testing.T, s shardcounter.CollectionStore) {
	ctx := context.Background()
	svc := MustService(t, s, collection.Config{})
	name := prefix(t) + "c"
	other := prefix(t) + "c2" // a collection whose name extends the first
	for _, n := range []string{name, other} {
		MustCreateCollection(t, svc, n, shardcounter.CollectionOptions{Shards: 3, Indexes: []string{"k"}})
		for i := range 10 {
			MustPut(t, svc, n, shardcounter.DocumentInput{ID: fmt.Sprint(i), Data: map[string]any{"k": "v"}})
		}
	}
	res := MustQuery(t, svc, name, shardcounter.Query{Limit: 2})
	old, err := svc.GetCollection(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteCollection(ctx, name); err != nil {
		t.Fatal(err)
	}
	_, err = svc.GetCollection(ctx, name)
	wantCode(t, "GetCollection after delete", err, shardcounter.ENOTFOUND)
	_, err = svc.GetDocument(ctx, name, "1")
	wantCode(t, "GetDocument after delete", err, shardcounter.ENOTFOUND)

	// Made again, the collection is empty and refuses the old page tokens.
	MustCreateCollection(t, svc, name, shardcounter.CollectionOptions{Shards: 3, Indexes: []string{"k"}})
	for _, q := range []shardcounter.Query{{}, {Where: []shardcounter.Filter{{Field: "k", Op: "==", Value: "v"}}}} {
		if got := MustQueryAll(t, svc, name, q); len(got) != 0 {
			t.Fatalf("query %+v of a re-created collection = %v, want nothing", q, docIDs(got))
		}
	}
	_, err = svc.GetDocument(ctx, name, "1")
	wantCode(t, "GetDocument in a re-created collection", err, shardcounter.ENOTFOUND)
	// A writer that read the old collection must not write into the new.
	stale := []*shardcounter.Document{{ID: "late", Shard: 0, Timestamp: old.CreatedAt, Data: map[string]any{"k": "v"}}}
	wantCode(t, "PutDocuments with the deleted collection's metadata", s.PutDocuments(ctx, old, stale), shardcounter.ENOTFOUND)
	_, err = svc.GetDocument(ctx, name, "late")
	wantCode(t, "GetDocument of a stale writer's document", err, shardcounter.ENOTFOUND)
	_, err = svc.QueryDocuments(ctx, name, shardcounter.Query{Limit: 2, PageToken: res.NextPageToken})
	wantCode(t, "page token of the deleted collection", err, shardcounter.EINVALID)
	if got := MustQueryAll(t, svc, other, shardcounter.Query{}); len(got) != 10 {
		t.Fatalf("the other collection has %d documents after the delete, want 10", len(got))
	}
}

func testQueryInvalid(t *testing.T, s shardcounter.CollectionStore) {
	ctx := context.Background()
	svc := MustService(t, s, collection.Config{})
	name := prefix(t) + "c"
	MustCreateCollection(t, svc, name, shardcounter.CollectionOptions{Shards: 3, Indexes: []string{"exchange"}})
	for i := range 9 {
		MustPut(t, svc, name, shardcounter.DocumentInput{ID: fmt.Sprint(i), Data: map[string]any{"exchange": "E"}})
	}
	t0 := ts("2019-01-01T00:00:00Z")
	for what, q := range map[string]shardcounter.Query{
		"limit -1":            {Limit: -1},
		"limit 1001":          {Limit: shardcounter.MaxQueryLimit + 1},
		"order":               {Order: "up"},
		"empty range":         {After: t0, Before: t0},
		"inverted range":      {After: t0.Add(time.Hour), Before: t0},
		"two filters":         {Where: []shardcounter.Filter{{Field: "exchange", Op: "==", Value: "E"}, {Field: "exchange", Op: "==", Value: "F"}}},
		"unindexed field":     {Where: []shardcounter.Filter{{Field: "symbol", Op: "==", Value: "AAA"}}},
		"operator":            {Where: []shardcounter.Filter{{Field: "exchange", Op: ">=", Value: "E"}}},
		"object value":        {Where: []shardcounter.Filter{{Field: "exchange", Op: "==", Value: map[string]any{"a": 1}}}},
		"timestamp filter":    {Where: []shardcounter.Filter{{Field: "timestamp", Op: "==", Value: "2019-01-01T00:00:00Z"}}},
		"token not base64":    {PageToken: "!!!"},
		"token too short":     {PageToken: "AQ"},
		"token random base64": {PageToken: base64.RawURLEncoding.EncodeToString([]byte("0123456789abcdefghijklmnopqrstuvwxyz"))},
	} {
		_, err := svc.QueryDocuments(ctx, name, q)
		wantCode(t, what, err, shardcounter.EINVALID)
	}

	res := MustQuery(t, svc, name, shardcounter.Query{Limit: 2})
	if res.NextPageToken == "" {
		t.Fatal("no next page token on a page of 2 of 9 documents")
	}
	raw, err := base64.RawURLEncoding.DecodeString(res.NextPageToken)
	if err != nil {
		t.Fatalf("page token %q is not base64url: %v", res.NextPageToken, err)
	}
	for i := range raw {
		for _, bit := range []byte{0x01, 0x80} {
			b := slices.Clone(raw)
			b[i] ^= bit
			tampered := base64.RawURLEncoding.EncodeToString(b)
			_, err := svc.QueryDocuments(ctx, name, shardcounter.Query{Limit: 2, PageToken: tampered})
			wantCode(t, fmt.Sprintf("token with byte %d flipped", i), err, shardcounter.EINVALID)
		}
	}
	for what, q := range map[string]shardcounter.Query{
		"token of another order":  {Order: shardcounter.Asc, PageToken: res.NextPageToken},
		"token of another filter": {Where: []shardcounter.Filter{{Field: "exchange", Op: "==", Value: "E"}}, PageToken: res.NextPageToken},
		"token of another range":  {After: t0, PageToken: res.NextPageToken},
	} {
		_, err := svc.QueryDocuments(ctx, name, q)
		wantCode(t, what, err, shardcounter.EINVALID)
	}
	other := prefix(t) + "other"
	MustCreateCollection(t, svc, other, shardcounter.CollectionOptions{Shards: 3})
	_, err = svc.QueryDocuments(ctx, other, shardcounter.Query{Limit: 2, PageToken: res.NextPageToken})
	wantCode(t, "token of another collection", err, shardcounter.EINVALID)
	// The limit may change between pages.
	if got := MustQuery(t, svc, name, shardcounter.Query{Limit: 5, PageToken: res.NextPageToken}); len(got.Documents) != 5 {
		t.Fatalf("second page with a new limit of 5 has %d documents", len(got.Documents))
	}
}

// testInstruments is the seed's worked example: three instruments on three
// shards, and its three queries, newest first, limit 5.
func testInstruments(t *testing.T, s shardcounter.CollectionStore) {
	svc := MustService(t, s, collection.Config{})
	name := prefix(t) + "instruments"
	MustCreateCollection(t, svc, name, shardcounter.CollectionOptions{Shards: 3, Indexes: []string{"exchange", "instrumentType", "price.currency"}})
	MustPut(t, svc, name, InstrumentDocuments()...)
	for _, c := range []struct {
		field, value string
		want         []string
	}{
		{"instrumentType", "commonstock", []string{"BBB", "AAA"}},
		{"exchange", "EXCHG1", []string{"AAA", "Index1 ETF"}},
		{"price.currency", "USD", []string{"AAA", "Index1 ETF"}},
	} {
		res := MustQuery(t, svc, name, shardcounter.Query{Where: []shardcounter.Filter{{Field: c.field, Op: "==", Value: c.value}}, Limit: 5})
		var got []string
		for _, d := range res.Documents {
			got = append(got, d.Data["symbol"].(string))
		}
		if !slices.Equal(got, c.want) || res.NextPageToken != "" {
			t.Errorf("%s == %s: %v (next %q), want %v", c.field, c.value, got, res.NextPageToken, c.want)
		}
	}
}

// InstrumentDocuments returns the three documents of seed 001's example.
func InstrumentDocuments() []shardcounter.DocumentInput {
	return []shardcounter.DocumentInput{
		{Data: map[string]any{
			"symbol": "AAA", "price": map[string]any{"currency": "USD", "micros": 34790000},
			"exchange": "EXCHG1", "instrumentType": "commonstock", "timestamp": "2019-01-01T13:45:23.010Z",
		}},
		{Data: map[string]any{
			"symbol": "BBB", "price": map[string]any{"currency": "JPY", "micros": 64272000000},
			"exchange": "EXCHG2", "instrumentType": "commonstock", "timestamp": "2019-01-01T13:45:23.101Z",
		}},
		{Data: map[string]any{
			"symbol": "Index1 ETF", "price": map[string]any{"currency": "USD", "micros": 473000000},
			"exchange": "EXCHG1", "instrumentType": "etf", "timestamp": "2019-01-01T13:45:23.001Z",
		}},
	}
}
