package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/collection"
)

// model is the unsharded reference: every document in one list, filtered
// and sorted by (timestamp, id) for each query.
type model map[string]*shardcounter.Document

func (m model) query(c *shardcounter.Collection, q shardcounter.Query) []*shardcounter.Document {
	var out []*shardcounter.Document
	for _, d := range m {
		if len(q.Where) == 1 {
			want, _ := shardcounter.IndexValue(q.Where[0].Value)
			v, ok := shardcounter.Lookup(d.Data, q.Where[0].Field)
			if !ok {
				continue
			}
			if iv, ok := shardcounter.IndexValue(v); !ok || iv != want {
				continue
			}
		}
		if (!q.After.IsZero() && !d.Timestamp.After(q.After)) || (!q.Before.IsZero() && !d.Timestamp.Before(q.Before)) {
			continue
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *shardcounter.Document) int {
		if q.Order == shardcounter.Asc {
			return a.Position().Compare(b.Position())
		}
		return b.Position().Compare(a.Position())
	})
	return out
}

var propertyIndexes = []string{"kind", "price.currency", "n"}

// randomDocs returns documents whose timestamps fall on few distinct
// microseconds, so that many share one and the id decides their order.
func randomDocs(rng *rand.Rand, base time.Time, count int, idPrefix string) []shardcounter.DocumentInput {
	docs := make([]shardcounter.DocumentInput, count)
	for i := range docs {
		data := map[string]any{
			"timestamp": base.Add(time.Duration(rng.IntN(40)) * time.Millisecond).Format(time.RFC3339Nano),
			"kind":      []string{"a", "b", "c"}[rng.IntN(3)],
			"n":         float64(rng.IntN(3)),
		}
		if rng.IntN(5) > 0 { // some documents lack the nested field
			data["price"] = map[string]any{"currency": []string{"USD", "JPY"}[rng.IntN(2)]}
		}
		docs[i] = shardcounter.DocumentInput{ID: fmt.Sprintf("%s%03d", idPrefix, rng.IntN(1000)), Data: data}
	}
	// Ids repeat by chance; a batch must not repeat one.
	seen := make(map[string]bool)
	out := docs[:0]
	for _, d := range docs {
		if !seen[d.ID] {
			seen[d.ID] = true
			out = append(out, d)
		}
	}
	return out
}

func randomQuery(rng *rand.Rand, base time.Time) shardcounter.Query {
	var q shardcounter.Query
	switch rng.IntN(4) {
	case 1:
		q.Where = []shardcounter.Filter{{Field: "kind", Op: "==", Value: []string{"a", "b", "c", "zzz"}[rng.IntN(4)]}}
	case 2:
		q.Where = []shardcounter.Filter{{Field: "price.currency", Op: "==", Value: []string{"USD", "JPY"}[rng.IntN(2)]}}
	case 3:
		q.Where = []shardcounter.Filter{{Field: "n", Op: "==", Value: rng.IntN(3)}}
	}
	if rng.IntN(3) == 0 {
		q.After = base.Add(time.Duration(rng.IntN(20)) * time.Millisecond)
	}
	if rng.IntN(3) == 0 {
		q.Before = base.Add(time.Duration(20+rng.IntN(21)) * time.Millisecond)
	}
	if rng.IntN(2) == 0 {
		q.Order = shardcounter.Asc
	}
	q.Limit = 1 + rng.IntN(10)
	return q
}

// testProperty puts random documents (many with equal timestamps) into a
// sharded collection and checks that random queries, paged with random
// page sizes, return exactly the pages of the same query on the unsharded
// model. With grow, documents are written under three shard counts, and
// the count grows again between pages.
func testProperty(t *testing.T, s shardcounter.CollectionStore, grow bool) {
	ctx := context.Background()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	base := ts("2024-01-01T00:00:00Z")
	// Chunks of one shard, of two, and of the default size, as far as the
	// store takes them (a chunk never exceeds MaxScanShards).
	var chunks []int
	for _, c := range []int{1, 2, collection.DefaultChunkSize} {
		if c = min(c, s.MaxScanShards()); !slices.Contains(chunks, c) {
			chunks = append(chunks, c)
		}
	}
	for _, chunk := range chunks {
		t.Run(fmt.Sprintf("Chunk%d", chunk), func(t *testing.T) {
			svc := MustService(t, s, collection.Config{ChunkSize: chunk})
			name := prefix(t) + "c"
			shards := 1 + rng.IntN(6)
			MustCreateCollection(t, svc, name, shardcounter.CollectionOptions{Shards: shards, Indexes: propertyIndexes})
			m := model{}
			put := func(docs []shardcounter.DocumentInput) {
				for _, ref := range MustPut(t, svc, name, docs...) {
					d, err := svc.GetDocument(ctx, name, ref.ID)
					if err != nil {
						t.Fatal(err)
					}
					m[d.ID] = d
				}
			}
			put(randomDocs(rng, base, scale(60, 150), "d"))
			if grow {
				for _, step := range []string{"g", "h"} {
					shards += 1 + rng.IntN(4)
					if _, err := svc.ReshardCollection(ctx, name, shards); err != nil {
						t.Fatal(err)
					}
					put(randomDocs(rng, base, scale(20, 60), step))
				}
			}
			c, err := svc.GetCollection(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			for range scale(8, 24) {
				q := randomQuery(rng, base)
				want := m.query(c, q)
				var got []*shardcounter.Document
				for page := 0; ; page++ {
					res := MustQuery(t, svc, name, q)
					end := min(len(got)+q.Limit, len(want))
					if !slices.Equal(docIDs(res.Documents), docIDs(want[len(got):end])) {
						t.Fatalf("query %+v page %d = %v, want %v (shards %d)", q, page, docIDs(res.Documents), docIDs(want[len(got):end]), shards)
					}
					for i, d := range res.Documents {
						w := want[len(got)+i]
						if !d.Timestamp.Equal(w.Timestamp) || d.Shard != w.Shard {
							t.Fatalf("document %q = (%v, shard %d), want (%v, shard %d)", d.ID, d.Timestamp, d.Shard, w.Timestamp, w.Shard)
						}
					}
					got = append(got, res.Documents...)
					if (res.NextPageToken == "") != (len(got) == len(want)) {
						t.Fatalf("query %+v page %d: next token %q with %d of %d documents returned", q, page, res.NextPageToken, len(got), len(want))
					}
					if res.NextPageToken == "" {
						break
					}
					q.PageToken = res.NextPageToken
					q.Limit = 1 + rng.IntN(10)
					if grow && rng.IntN(3) == 0 && shards < 24 {
						shards++
						if _, err := svc.ReshardCollection(ctx, name, shards); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		})
	}
}

// testPagingUnderWrites pages through a collection while writers add
// documents and the shard count grows. Every document present before the
// paging began comes back exactly once, nothing comes back twice, and the
// order never goes backwards; documents added during the paging come back
// at most once.
func testPagingUnderWrites(t *testing.T, s shardcounter.CollectionStore) {
	ctx := context.Background()
	svc := MustService(t, s, collection.Config{})
	name := prefix(t) + "c"
	MustCreateCollection(t, svc, name, shardcounter.CollectionOptions{Shards: 3, Indexes: propertyIndexes})
	base := ts("2024-01-01T00:00:00Z")
	rng := rand.New(rand.NewPCG(3, 4))
	before := make(map[string]bool)
	for _, ref := range MustPut(t, svc, name, randomDocs(rng, base, scale(80, 200), "a")...) {
		before[ref.ID] = true
	}
	for _, order := range []shardcounter.Order{shardcounter.Desc, shardcounter.Asc} {
		t.Run(string(order), func(t *testing.T) {
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(5, uint64(len(order))))
				// Bounded, so that paging ends even on a store slow enough
				// for the writers to keep ahead of the reader.
				for i := range scale(60, 150) {
					select {
					case <-stop:
						return
					default:
					}
					docs := randomDocs(rng, base, 3, fmt.Sprintf("w%s%d-", order, i))
					if _, err := svc.PutDocuments(ctx, name, docs); err != nil {
						t.Errorf("PutDocuments during paging: %v", err)
						return
					}
					if i%5 == 4 {
						c, err := svc.GetCollection(ctx, name)
						if err == nil && c.Shards < 16 {
							_, err = svc.ReshardCollection(ctx, name, c.Shards+1)
						}
						if err != nil {
							t.Errorf("growing during paging: %v", err)
							return
						}
					}
				}
			})
			q := shardcounter.Query{Order: order, Limit: 7}
			seen := make(map[string]bool)
			var last *shardcounter.Position
			for page := 0; ; page++ {
				res, err := svc.QueryDocuments(ctx, name, q)
				if err != nil {
					close(stop)
					wg.Wait()
					t.Fatal(err)
				}
				for _, d := range res.Documents {
					if seen[d.ID] {
						t.Errorf("document %q returned twice", d.ID)
					}
					seen[d.ID] = true
					pos := d.Position()
					if last != nil && ((order == shardcounter.Desc && pos.Compare(*last) >= 0) || (order == shardcounter.Asc && pos.Compare(*last) <= 0)) {
						t.Errorf("document %q at %v comes after %v out of %s order", d.ID, pos, *last, order)
					}
					last = &pos
				}
				if res.NextPageToken == "" || t.Failed() {
					break
				}
				q.PageToken = res.NextPageToken
			}
			close(stop)
			wg.Wait()
			for id := range before {
				if !seen[id] {
					t.Errorf("document %q, present before the paging, was not returned", id)
				}
			}
		})
	}
}
