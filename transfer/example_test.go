package transfer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/transfer"
)

// Export writes a store's counters as JSON Lines.
func ExampleExport() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	store, err := bolt.Open(ctx, filepath.Join(dir, "counters.db"), bolt.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	store.Apply(ctx, []shardcounter.Increment{
		{Counter: "likes", Delta: 3, Create: &shardcounter.Spec{Shards: 4}},
		{Counter: "likers", Member: "ann", Delta: 1, Create: &shardcounter.Spec{Shards: 2, Kind: shardcounter.KindDistinct}},
	})
	st, err := transfer.Export(ctx, store, os.Stdout, transfer.ExportOptions{})
	fmt.Println(st.Counters, st.Members, err)
	// Output:
	// {"type":"header","format":"shardcounter-export","version":2}
	// {"type":"counter","id":"likers","kind":"distinct","shards":2,"value":1}
	// {"type":"members","id":"likers","members":["ann"]}
	// {"type":"counter","id":"likes","kind":"sum","shards":4,"value":3}
	// {"type":"end","counters":2,"members":1}
	// 2 1 <nil>
}
