package http_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/collection"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/storetest"
)

// MustServeCollections starts a server whose collection routes run on a
// bolt store in a temporary directory, and returns its URL and a client.
func MustServeCollections(tb testing.TB) (string, *shttp.Client) {
	tb.Helper()
	store, err := bolt.Open(context.Background(), filepath.Join(tb.TempDir(), "shardcounter.db"), bolt.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	cs, err := store.Collections()
	if err != nil {
		tb.Fatal(err)
	}
	svc, closeSvc := newService(tb, store, serviceOptions{})
	ts := httptest.NewServer(Checked(tb, shttp.NewServer(svc, shttp.ServerOptions{Collections: collection.New(cs, collection.Config{})})))
	tb.Cleanup(func() {
		ts.Close()
		closeSvc()
		store.Close()
	})
	return ts.URL, shttp.NewClient(ts.URL)
}

// TestCollectionsInstruments runs seed 001's example through the client:
// the client is a CollectionService like collection.Service.
func TestCollectionsInstruments(t *testing.T) {
	ctx := context.Background()
	_, client := MustServeCollections(t)
	var svc shardcounter.CollectionService = client
	c := storetest.MustCreateCollection(t, svc, "instruments", shardcounter.CollectionOptions{Shards: 3, Indexes: []string{"exchange", "instrumentType", "price.currency"}})
	if c.Shards != 3 || c.ShardKey != shardcounter.ShardRandom || c.TimestampField != "timestamp" {
		t.Fatalf("created %+v", c)
	}
	refs := storetest.MustPut(t, svc, "instruments", storetest.InstrumentDocuments()...)
	res := storetest.MustQuery(t, svc, "instruments", shardcounter.Query{Where: []shardcounter.Filter{{Field: "price.currency", Op: "==", Value: "USD"}}, Limit: 1})
	if len(res.Documents) != 1 || res.Documents[0].Data["symbol"] != "AAA" || res.NextPageToken == "" {
		t.Fatalf("first page of USD = %+v", res)
	}
	res = storetest.MustQuery(t, svc, "instruments", shardcounter.Query{Where: []shardcounter.Filter{{Field: "price.currency", Op: "==", Value: "USD"}}, Limit: 1, PageToken: res.NextPageToken})
	if len(res.Documents) != 1 || res.Documents[0].Data["symbol"] != "Index1 ETF" || res.NextPageToken != "" {
		t.Fatalf("second page of USD = %+v", res)
	}
	d, err := svc.GetDocument(ctx, "instruments", refs[1].ID)
	if err != nil || d.Data["symbol"] != "BBB" || d.Shard != refs[1].Shard || !d.Timestamp.Equal(refs[1].Timestamp) {
		t.Fatalf("GetDocument = %+v, %v", d, err)
	}
	if c, err = svc.ReshardCollection(ctx, "instruments", 5); err != nil || c.Shards != 5 {
		t.Fatalf("ReshardCollection = %+v, %v", c, err)
	}
	for what, err := range map[string]error{
		"shrink": func() error { _, err := svc.ReshardCollection(ctx, "instruments", 2); return err }(),
		"filter": func() error {
			_, err := svc.QueryDocuments(ctx, "instruments", shardcounter.Query{Where: []shardcounter.Filter{{Field: "symbol", Op: "==", Value: "AAA"}}})
			return err
		}(),
		"token": func() error {
			_, err := svc.QueryDocuments(ctx, "instruments", shardcounter.Query{PageToken: "AAAA"})
			return err
		}(),
	} {
		if shardcounter.ErrorCode(err) != shardcounter.EINVALID {
			t.Errorf("%s: %v, want invalid_argument", what, err)
		}
	}
	if err := svc.DeleteDocument(ctx, "instruments", refs[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.GetDocument(ctx, "instruments", refs[0].ID); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		t.Fatalf("GetDocument after delete: %v", err)
	}
	if err := svc.DeleteCollection(ctx, "instruments"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.GetCollection(ctx, "instruments"); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		t.Fatalf("GetCollection after delete: %v", err)
	}
}

// TestCollectionsRaw sends the requests of docs/COLLECTIONS.md as curl
// would, and checks statuses and bodies.
func TestCollectionsRaw(t *testing.T) {
	url, _ := MustServeCollections(t)
	for _, step := range []struct {
		method, path, body string
		status             int
		contains           string
	}{
		{"PUT", "/v1/collections/instruments", `{"shards":3,"indexes":["exchange","instrumentType","price.currency"]}`, 201, `"shard_key":"random"`},
		{"PUT", "/v1/collections/instruments", `{"shards":3}`, 409, `"already_exists"`},
		{"PUT", "/v1/collections/other", `{"shards":3,"indxes":["a"]}`, 400, `unknown field \"indxes\"`},
		{"PUT", "/v1/collections/other", `{"shards":0}`, 400, `"invalid_argument"`},
		{"PUT", "/v1/collections/other", `{"shard_key":"round_robin"}`, 400, `"invalid_argument"`},
		{"POST", "/v1/collections/instruments/documents", `{"id":"aaa","data":{"symbol":"AAA","exchange":"EXCHG1","timestamp":"2019-01-01T13:45:23.010Z"}}`, 201, `"documents":[{"id":"aaa","shard":`},
		{"POST", "/v1/collections/instruments/documents", `{"documents":[{"data":{"symbol":"BBB","exchange":"EXCHG2","timestamp":"2019-01-01T13:45:23.101Z"}}]}`, 201, `"timestamp":"2019-01-01T13:45:23.101Z"`},
		{"POST", "/v1/collections/instruments/documents", `{"id":"x","documents":[{}]}`, 400, `not both`},
		{"POST", "/v1/collections/instruments/documents", `{"data":{"timestamp":"yesterday"}}`, 400, `RFC 3339`},
		{"POST", "/v1/collections/instruments/documents", `{"documents":[{"datum":{}}]}`, 400, `unknown field`},
		{"POST", "/v1/collections/missing/documents", `{"data":{}}`, 404, `"not_found"`},
		{"GET", "/v1/collections/instruments/documents/aaa", ``, 200, `"data":{"exchange":"EXCHG1"`},
		{"GET", "/v1/collections/instruments/documents/zzz", ``, 404, `"not_found"`},
		{"POST", "/v1/collections/instruments/query", `{"where":[{"field":"exchange","op":"==","value":"EXCHG1"}],"order":"desc","limit":5}`, 200, `"documents":[{"id":"aaa"`},
		{"POST", "/v1/collections/instruments/query", `{"where":[{"field":"exchange","op":"==","value":"NONE"}]}`, 200, `{"documents":[]}`},
		{"POST", "/v1/collections/instruments/query", `{"where":[{"field":"symbol","op":"==","value":"AAA"}]}`, 400, `add \"symbol\" to the collection's indexes`},
		{"POST", "/v1/collections/instruments/query", `{"limit":1001}`, 400, `"invalid_argument"`},
		{"POST", "/v1/collections/instruments/query", `{"after":"noon"}`, 400, `"invalid_argument"`},
		{"POST", "/v1/collections/instruments/query", `{"page_token":"garbage"}`, 400, `page token is invalid`},
		{"POST", "/v1/collections/instruments/query", `{"order":"up"}`, 400, `"invalid_argument"`},
		{"POST", "/v1/collections/instruments/query", ``, 200, `"documents":[{"id":`},
		{"GET", "/v1/collections/instruments/query", ``, 405, `"invalid_argument"`},
		{"PATCH", "/v1/collections/instruments", `{"shards":16}`, 200, `"shards":16`},
		{"PATCH", "/v1/collections/instruments", `{"shards":4}`, 400, `only grows`},
		{"GET", "/v1/collections/instruments", ``, 200, `"indexes":["exchange","instrumentType","price.currency"]`},
		{"DELETE", "/v1/collections/instruments/documents/aaa", ``, 204, ``},
		{"DELETE", "/v1/collections/instruments", ``, 204, ``},
		{"GET", "/v1/collections/instruments", ``, 404, `"not_found"`},
	} {
		req, err := http.NewRequest(step.method, url+step.path, strings.NewReader(step.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != step.status || !strings.Contains(string(b), step.contains) {
			t.Errorf("%s %s %s: %d %s, want %d with %s", step.method, step.path, step.body, resp.StatusCode, b, step.status, step.contains)
		}
	}
}

func FuzzDecodeDocuments(f *testing.F) {
	for _, s := range append(slices.Clone(bodySeeds), `{"id":"a","data":{"x":1}}`, `{"documents":[{"data":{}},{"id":"b"}]}`, `{"documents":[]}`, `{"documents":[{"id":1}]}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		docs, err := shttp.DecodeDocuments(body)
		if err != nil {
			mustInvalid(t, err, shardcounter.EINVALID, shardcounter.ETOOLARGE)
			return
		}
		if len(docs) == 0 || len(docs) > shardcounter.MaxDocumentBatch {
			t.Fatalf("accepted %q with %d documents", body, len(docs))
		}
	})
}

func FuzzDecodeQuery(f *testing.F) {
	for _, s := range append(slices.Clone(bodySeeds), `{"where":[{"field":"a","op":"==","value":"b"}],"limit":5,"order":"asc"}`,
		`{"after":"2019-01-01T00:00:00Z","before":"2019-01-02T00:00:00Z"}`, `{"after":"2019-01-02T00:00:00Z","before":"2019-01-01T00:00:00Z"}`, `{"limit":-1}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		q, err := shttp.DecodeQuery(body)
		if err != nil {
			mustInvalid(t, err, shardcounter.EINVALID)
			return
		}
		if q.Limit < 0 || q.Limit > shardcounter.MaxQueryLimit || len(q.Where) > 1 {
			t.Fatalf("accepted %q as %+v", body, q)
		}
	})
}

func FuzzDecodeCreateCollection(f *testing.F) {
	for _, s := range append(slices.Clone(bodySeeds), `{"shards":3,"indexes":["a","b.c"],"shard_key":"id_hash","timestamp_field":"at"}`, `{"indexes":["a",""]}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		opts, err := shttp.DecodeCreateCollection(body)
		if err != nil {
			mustInvalid(t, err, shardcounter.EINVALID)
			return
		}
		c := &shardcounter.Collection{Name: "c", Shards: opts.Shards, TimestampField: opts.TimestampField, Indexes: opts.Indexes, ShardKey: opts.ShardKey}
		if err := shardcounter.ValidateCollection(c); err != nil {
			t.Fatalf("accepted %q: %v", body, err)
		}
	})
}

// TestDocumentBodyGiven: a document's body goes back to the body budget
// before its store call (doneWithBody), and once only: after documents
// of a pooled buffer's size and of a grown one, stored or refused, the
// bytes in flight are back at zero, not below.
func TestDocumentBodyGiven(t *testing.T) {
	url, _ := MustServeCollections(t)
	do := func(method, path, body string) string {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.Status + " " + string(b)
	}
	do("PUT", "/v1/collections/docs", `{"shards":2}`)
	big := strings.Repeat("x", 200<<10)
	for _, c := range []struct{ body, want string }{
		{`{"data":{"note":"small"}}`, "201"},
		{`{"data":{"note":"` + big + `"}}`, "201"},
		{`{"data":{"timestamp":"yesterday","note":"` + big + `"}}`, "400"},
		{`{"data":{"note":"` + big + `"}`, "400"}, // not JSON: the decoder refuses it
	} {
		if got := do("POST", "/v1/collections/docs/documents", c.body); !strings.HasPrefix(got, c.want) {
			t.Errorf("a %d-byte document: %.200s, want %s", len(c.body), got, c.want)
		}
	}
	if got := do("GET", "/metrics", ""); !strings.Contains(got, "\nshardcounter_http_body_bytes_in_flight 0\n") {
		i := strings.Index(got, "body_bytes_in_flight ")
		t.Errorf("after the documents, the body budget holds %.40q, want 0", got[max(i, 0):])
	}
}
