package http_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/engine"
	shttp "github.com/shardcounter/shardcounter/http"
)

// Watch a counter: its value at once, then each new value. Breaking the
// loop (or cancelling ctx) closes the stream.
func ExampleClient_Watch() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "shardcounter-example")
	defer os.RemoveAll(dir)
	store, err := bolt.Open(ctx, filepath.Join(dir, "shardcounter.db"), bolt.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	eng, err := engine.New(store, engine.Config{})
	if err != nil {
		panic(err)
	}
	defer eng.Close(ctx)
	srv := shttp.NewServer(eng, shttp.ServerOptions{})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.EndWatches()

	client := shttp.NewClient(ts.URL)
	client.WriteCounter(ctx, shardcounter.Write{Counter: "likes", Delta: 40})
	for r, err := range client.Watch(ctx, "likes", 100*time.Millisecond) {
		if shardcounter.ErrorCode(err) == shardcounter.EUNAVAILABLE {
			continue // passing: Watch reconnects
		}
		if err != nil {
			panic(err)
		}
		fmt.Println(r.Value)
		if r.Value >= 42 {
			break
		}
		client.WriteCounter(ctx, shardcounter.Write{Counter: "likes", Delta: 2})
	}
	// Output:
	// 40
	// 42
}
