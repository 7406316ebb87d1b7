package engine_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/engine"
)

// The engine over the embedded store: create a counter, write to it with
// and without a request id, and read it back.
func Example() {
	dir, _ := os.MkdirTemp("", "shardcounter-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	store, err := bolt.Open(context.Background(), filepath.Join(dir, "counters.db"), bolt.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	svc, err := engine.New(store, engine.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close(ctx) // commits queued writes

	if _, _, err := svc.CreateCounter(ctx, "likes", shardcounter.CreateOptions{Shards: 16}); err != nil {
		log.Fatal(err)
	}
	for range 3 {
		svc.WriteCounter(ctx, shardcounter.Write{Counter: "likes", Delta: 1})
	}
	// A client retrying the same like counts it once.
	for range 2 {
		res, _ := svc.WriteCounter(ctx, shardcounter.Write{Counter: "likes", Delta: 1, RequestID: "like-u42-p7"})
		fmt.Printf("applied=%v duplicate=%v\n", res.Applied, res.Duplicate)
	}
	r, err := svc.ReadCounter(ctx, "likes", shardcounter.Strong)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Value, r.Shards)
	// Output:
	// applied=true duplicate=false
	// applied=false duplicate=true
	// 4 16
}
