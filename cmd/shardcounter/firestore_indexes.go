package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/shardcounter/shardcounter/dsn"
	"github.com/shardcounter/shardcounter/firestore"
)

// firestoreIndexesCommand is `shardcounter firestore-indexes`: it prints
// the firestore.indexes.json that a real Firestore project needs for the
// store and its collections (seed 001: the shard first in every index
// holding the timestamp), to deploy with `firebase deploy --only
// firestore:indexes`. It reads the collections from the store.
type firestoreIndexesCommand struct {
	m     *Main
	store string
}

func newFirestoreIndexesCommand(m *Main) command { return &firestoreIndexesCommand{m: m} }

func (c *firestoreIndexesCommand) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.store, "store", c.m.Getenv("SHARDCOUNTER_STORE"), "the firestore:// `DSN` whose collections need indexes (env SHARDCOUNTER_STORE)")
}

func (c *firestoreIndexesCommand) run(ctx context.Context, args []string) error {
	if len(args) != 0 {
		return usagef("firestore-indexes takes no arguments, got %q", args)
	}
	if kind, err := dsn.Scheme(c.store); err != nil || kind != dsn.Firestore {
		return usagef("--store %q: give a firestore://PROJECT DSN", dsn.Redact(c.store))
	}
	s, err := firestore.Open(ctx, c.store)
	if err != nil {
		return fmt.Errorf("cannot open store %s: %s", dsn.Redact(c.store), errorText(err))
	}
	defer s.Close()
	colls, err := s.Collections().ListCollections(ctx)
	if err != nil {
		return fmt.Errorf("list collections: %s", errorText(err))
	}
	b, err := firestore.Indexes(colls)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.m.Stdout, "%s\n", b)
	return err
}
