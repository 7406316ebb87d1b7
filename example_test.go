package shardcounter_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/collection"
	"github.com/shardcounter/shardcounter/dsn"
	"github.com/shardcounter/shardcounter/engine"
)

// Example is a tour of the library: it opens the embedded store in a
// temporary directory, starts the engine over it (group commit, durable
// acknowledgements), and then counts likes, counts each liker once, keeps
// stock above a floor, counts views per hour, and pages through a
// time-ordered collection, each step a function below.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "shardcounter-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, svc, err := open(ctx, dir)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	defer svc.Close(ctx) // first: it commits the writes still queued

	for _, step := range []func(context.Context, shardcounter.CounterService) error{likes, likers, stock, views} {
		if err := step(ctx, svc); err != nil {
			log.Fatal(err)
		}
	}
	// The collections of the same database, served by package collection.
	posts, err := dsn.Collections(store)
	if err != nil {
		log.Fatal(err)
	}
	if err := timeline(ctx, collection.New(posts, collection.Config{})); err != nil {
		log.Fatal(err)
	}
	// Output:
	// likes: applied=true duplicate=false
	// likes: applied=false duplicate=true
	// likes 4 over 16 shards
	// read likes: 4
	// read nope: not_found
	// add alice: changed true
	// add alice: changed false
	// add bob: changed true
	// remove alice: changed true
	// post:1:likes 1, bob likes it: true, members [bob]
	// stock +2: applied
	// stock -1: applied
	// stock -5: out_of_range
	// stock -1: applied
	// stock 0
	// views 3 over the last 24h0m0s
	// 3 buckets of 1h summing to 3
	// page 1: p4 at 9:03AM
	// page 1: p3 at 9:02AM
	// page 2: p1 at 9:00AM
}

// open opens the store, in dir, and starts the engine over it. Its first
// line is the one that names the store: another DSN there (postgres://...,
// redis://..., as package dsn lists them) runs the tour on that store.
func open(ctx context.Context, dir string) (shardcounter.CounterStore, *engine.Engine, error) {
	store, err := dsn.Open(ctx, "pebble:"+filepath.Join(dir, "pebble"))
	if err != nil {
		return nil, nil, err
	}
	svc, err := engine.New(store, engine.Config{})
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	return store, svc, nil
}

// likes creates a counter, writes to it with and without a request id,
// and reads it back, alone and with another in one batch read.
func likes(ctx context.Context, svc shardcounter.CounterService) error {
	if _, _, err := svc.CreateCounter(ctx, "likes", shardcounter.CreateOptions{Shards: 16}); err != nil {
		return err
	}
	for range 3 {
		if _, err := svc.WriteCounter(ctx, shardcounter.Write{Counter: "likes", Delta: 1}); err != nil {
			return err
		}
	}
	// A client that retries a write with the same request id counts it once.
	for range 2 {
		res, err := svc.WriteCounter(ctx, shardcounter.Write{Counter: "likes", Delta: 1, RequestID: "like-u42-p7"})
		if err != nil {
			return err
		}
		fmt.Printf("likes: applied=%v duplicate=%v\n", res.Applied, res.Duplicate)
	}
	r, err := svc.ReadCounter(ctx, "likes", shardcounter.Strong)
	if err != nil {
		return err
	}
	fmt.Println("likes", r.Value, "over", r.Shards, "shards")

	// A timeline's counters in one read; a missing one has its own error.
	ids := []string{"likes", "nope"}
	results, err := svc.ReadCounters(ctx, ids, shardcounter.Strong)
	if err != nil {
		return err
	}
	for i, res := range results {
		if res.Err != nil {
			fmt.Printf("read %s: %s\n", ids[i], shardcounter.ErrorCode(res.Err))
		} else {
			fmt.Printf("read %s: %d\n", ids[i], res.Reading.Value)
		}
	}
	return nil
}

// likers counts members, each once: a like per user, which the user can
// take back, and "did I like this?".
func likers(ctx context.Context, svc shardcounter.CounterService) error {
	const id = "post:1:likes"
	if _, _, err := svc.CreateCounter(ctx, id, shardcounter.CreateOptions{Kind: shardcounter.KindDistinct}); err != nil {
		return err
	}
	for _, w := range []shardcounter.Write{
		shardcounter.AddMember(id, "alice"),
		shardcounter.AddMember(id, "alice"), // already in: no change
		shardcounter.AddMember(id, "bob"),
		shardcounter.RemoveMember(id, "alice"),
	} {
		res, err := svc.WriteCounter(ctx, w)
		if err != nil {
			return err
		}
		op := "remove"
		if *w.Present {
			op = "add"
		}
		fmt.Printf("%s %s: changed %v\n", op, w.Member, *res.Changed) // Changed is set on a member write
	}
	r, err := svc.ReadCounter(ctx, id, shardcounter.Strong)
	if err != nil {
		return err
	}
	liked, err := svc.IsMember(ctx, id, "bob")
	if err != nil {
		return err
	}
	members, err := svc.ListMembers(ctx, id, shardcounter.ListOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("%s %d, bob likes it: %v, members %v\n", id, r.Value, liked, members.Members)
	return nil
}

// stock keeps a counter at 0 or above: a write that would take the total
// below the floor is refused with out_of_range and changes nothing.
func stock(ctx context.Context, svc shardcounter.CounterService) error {
	floor := int64(0)
	if _, _, err := svc.CreateCounter(ctx, "stock", shardcounter.CreateOptions{Min: &floor}); err != nil {
		return err
	}
	for _, delta := range []int64{+2, -1, -5, -1} {
		_, err := svc.WriteCounter(ctx, shardcounter.Write{Counter: "stock", Delta: delta})
		switch shardcounter.ErrorCode(err) {
		case "":
			fmt.Printf("stock %+d: applied\n", delta)
		case shardcounter.EOUTOFRANGE:
			fmt.Printf("stock %+d: out_of_range\n", delta)
		default:
			return err
		}
	}
	r, err := svc.ReadCounter(ctx, "stock", shardcounter.Strong)
	if err != nil {
		return err
	}
	fmt.Println("stock", r.Value)
	return nil
}

// views counts per hour, keeping 7 days. A read of the last span of time
// covers as many buckets as it spans, the current one (still filling)
// included: 24 for the last 24 hours, 3 for a series of the last 3.
func views(ctx context.Context, svc shardcounter.CounterService) error {
	window, err := shardcounter.ParseWindow("1h:7d")
	if err != nil {
		return err
	}
	if _, _, err := svc.CreateCounter(ctx, "views", shardcounter.CreateOptions{Window: window}); err != nil {
		return err
	}
	if _, err := svc.WriteCounter(ctx, shardcounter.Write{Counter: "views", Delta: 3}); err != nil {
		return err
	}
	r, err := svc.ReadWindow(ctx, "views", 24*time.Hour)
	if err != nil {
		return err
	}
	fmt.Println("views", r.Value, "over the last", r.Window.To.Sub(r.Window.From))
	s, err := svc.ReadSeries(ctx, "views", 3*time.Hour, 0)
	if err != nil {
		return err
	}
	var sum int64
	for _, b := range s.Buckets {
		sum += b.Value
	}
	fmt.Println(len(s.Buckets), "buckets of", s.Bucket, "summing to", sum)
	return nil
}

// timeline keeps posts in a collection with sharded timestamps: spread
// over 4 shards, new posts do not all land at one end of one index, and a
// query, merged from the shards, pages through an author's posts newest
// first.
func timeline(ctx context.Context, svc shardcounter.CollectionService) error {
	if _, err := svc.CreateCollection(ctx, "posts", shardcounter.CollectionOptions{Shards: 4, Indexes: []string{"author"}}); err != nil {
		return err
	}
	var posts []shardcounter.DocumentInput
	for i, author := range []string{"alice", "bob", "alice", "alice", "bob"} {
		posts = append(posts, shardcounter.DocumentInput{ID: fmt.Sprint("p", i+1), Data: map[string]any{
			"author":    author,
			"timestamp": time.Date(2026, 3, 1, 9, i, 0, 0, time.UTC).Format(time.RFC3339),
		}})
	}
	if _, err := svc.PutDocuments(ctx, "posts", posts); err != nil {
		return err
	}
	q := shardcounter.Query{Where: []shardcounter.Filter{{Field: "author", Op: "==", Value: "alice"}}, Limit: 2}
	for page := 1; ; page++ {
		res, err := svc.QueryDocuments(ctx, "posts", q)
		if err != nil {
			return err
		}
		for _, d := range res.Documents {
			fmt.Printf("page %d: %s at %s\n", page, d.ID, d.Timestamp.Format(time.Kitchen))
		}
		if res.NextPageToken == "" {
			return nil
		}
		q.PageToken = res.NextPageToken
	}
}
