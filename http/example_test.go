package http_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/engine"
	shttp "github.com/shardcounter/shardcounter/http"
)

// A server over the engine, and the client that talks to it. The client
// is a shardcounter.CounterService like the engine itself.
func ExampleClient() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "shardcounter-example")
	defer os.RemoveAll(dir)
	store, err := bolt.Open(context.Background(), filepath.Join(dir, "shardcounter.db"), bolt.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	eng, err := engine.New(store, engine.Config{})
	if err != nil {
		panic(err)
	}
	defer eng.Close(ctx)
	ts := httptest.NewServer(shttp.NewServer(eng, shttp.ServerOptions{}))
	defer ts.Close()

	var svc shardcounter.CounterService = shttp.NewClient(ts.URL)
	if _, _, err := svc.CreateCounter(ctx, "likes", shardcounter.CreateOptions{Shards: 8}); err != nil {
		panic(err)
	}
	for range 3 {
		svc.WriteCounter(ctx, shardcounter.Write{Counter: "likes", Delta: 14})
	}
	r, _ := svc.ReadCounter(ctx, "likes", shardcounter.Strong)
	fmt.Println(r.Value, r.Shards)

	_, _, err = svc.CreateCounter(ctx, "likes", shardcounter.CreateOptions{})
	fmt.Println(shardcounter.ErrorCode(err))
	// Output:
	// 42 8
	// already_exists
}
