// Package docindex holds what the collection stores share about a
// document's index entries: which entries a document has, and how
// documents read shard by shard merge into one ordered answer.
package docindex

import (
	"slices"

	"github.com/shardcounter/shardcounter"
)

// Entries returns the index values of a document under each of c's
// indexes, by index field; a field whose value cannot be indexed is
// absent. A value longer than shardcounter.MaxIndexValueLen is EINVALID.
func Entries(c *shardcounter.Collection, data map[string]any) (map[string]string, error) {
	out := make(map[string]string, len(c.Indexes))
	for _, f := range c.Indexes {
		v, ok := shardcounter.Lookup(data, f)
		if !ok {
			continue
		}
		iv, ok := shardcounter.IndexValue(v)
		if !ok {
			continue
		}
		if len(iv) > shardcounter.MaxIndexValueLen {
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "the value of indexed field %q is %d bytes long: the limit is %d", f, len(iv), shardcounter.MaxIndexValueLen)
		}
		out[f] = iv
	}
	return out, nil
}

// Sort sorts docs by position in order and keeps the first
// limit: how a store that reads its shards one by one merges them into the
// one ordered answer a ScanRange asks for.
func Sort(docs []*shardcounter.Document, order shardcounter.Order, limit int) []*shardcounter.Document {
	slices.SortFunc(docs, func(a, b *shardcounter.Document) int {
		if order == shardcounter.Asc {
			return a.Position().Compare(b.Position())
		}
		return b.Position().Compare(a.Position())
	})
	return docs[:min(len(docs), limit)]
}
