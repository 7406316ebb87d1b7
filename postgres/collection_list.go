package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/shardcounter/shardcounter"
)

// ListCollections returns every collection, by name (for export).
func (s *CollectionStore) ListCollections(ctx context.Context) ([]*shardcounter.Collection, error) {
	rows, err := s.s.pool.Query(ctx, "SELECT name FROM shardcounter.collections ORDER BY name")
	if err != nil {
		return nil, mapError("list collections", err, beforeCommit)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, mapError("list collections", err, beforeCommit)
	}
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
