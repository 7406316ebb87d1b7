package redis

import (
	"context"
	"slices"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
)

// ListCollections returns every collection, by name (for export). Redis
// keeps no index of collections, so it SCANs for their metadata keys, on
// every master of a cluster: work proportional to the keys, which an
// export reads anyway.
func (s *CollectionStore) ListCollections(ctx context.Context) ([]*shardcounter.Collection, error) {
	prefix := s.metaKey("")
	match := escapeGlob(prefix) + "*"
	var mu sync.Mutex
	var names []string
	scan := func(ctx context.Context, c *goredis.Client) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, match, 1000).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			for _, k := range keys {
				names = append(names, strings.TrimPrefix(k, prefix))
			}
			mu.Unlock()
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	var err error
	if s.s.cluster != nil {
		err = s.s.cluster.ForEachMaster(ctx, scan)
	} else {
		err = scan(ctx, s.s.single)
	}
	if err != nil {
		return nil, storeErr("list collections", err, false)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	out := make([]*shardcounter.Collection, 0, len(names))
	for _, n := range names {
		c, err := s.GetCollection(ctx, n)
		if shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND {
			continue // deleted since
		}
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// escapeGlob escapes the characters SCAN's MATCH treats as special.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
