package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/shardcounter/shardcounter"
)

// collectionCommand is `shardcounter collection create NAME --shards N
// [--timestamp-field F] [--index FIELD]...`. "create" is its one action
// today; the word leaves room for more without a new top-level name.
type collectionCommand struct {
	clientFlags
	shards         int
	timestampField string
	indexes        stringList
	shardKey       string
}

func newCollectionCommand(m *Main) command {
	return &collectionCommand{clientFlags: clientFlags{m: m}}
}

func (c *collectionCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.IntVar(&c.shards, "shards", 0, "`N` shards, 1 to 1024: about the collection's writes a second over what one index range takes")
	fs.StringVar(&c.timestampField, "timestamp-field", shardcounter.DefaultTimestampField, "the documents' timestamp `FIELD` (dotted path)")
	fs.Var(&c.indexes, "index", "a `FIELD` queries may filter on by equality (dotted path); repeat for more")
	fs.StringVar(&c.shardKey, "shard-key", string(shardcounter.ShardRandom), "how a document's shard is chosen: random or id_hash (`KEY`)")
}

func (c *collectionCommand) run(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "create" {
		return usagef("expected collection create NAME --shards N")
	}
	if len(args) != 2 {
		return usagef("expected one collection NAME after create, got %d arguments", len(args)-1)
	}
	name := args[1]
	if err := checkArg("collection name", name); err != nil {
		return err
	}
	if c.shards == 0 {
		return usagef("--shards is required: give 1 to %d", shardcounter.MaxShards)
	}
	opts := shardcounter.CollectionOptions{Shards: c.shards, TimestampField: c.timestampField, Indexes: c.indexes, ShardKey: shardcounter.ShardKey(c.shardKey)}
	check := &shardcounter.Collection{Name: name, Shards: opts.Shards, TimestampField: opts.TimestampField, Indexes: opts.Indexes, ShardKey: opts.ShardKey}
	if err := shardcounter.ValidateCollection(check); err != nil {
		return usagef("%s", shardcounter.ErrorMessage(err))
	}
	client, err := c.client()
	if err != nil {
		return err
	}
	coll, err := client.CreateCollection(ctx, name, opts)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(coll)
	}
	indexes := "no indexes"
	if len(coll.Indexes) > 0 {
		indexes = "indexes " + strings.Join(coll.Indexes, ", ")
	}
	_, err = fmt.Fprintf(c.m.Stdout, "created collection %s with %d shards, timestamp field %s, %s\n", coll.Name, coll.Shards, coll.TimestampField, indexes)
	return err
}

// collectionErr gives a not_found error from a collection command its own
// hint; the shared one speaks of counters.
func collectionErr(err error) error {
	if shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND {
		return fmt.Errorf("%s: check the name, or create it with shardcounter collection create (%s)", shardcounter.ErrorMessage(err), shardcounter.ENOTFOUND)
	}
	return err
}
