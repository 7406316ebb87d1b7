package postgres

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/shardcounter/shardcounter"
)

// rankingLock is the advisory lock key under which the rankings table is
// made: "shardrnk" read as a number, fixed forever.
const rankingLock int64 = 0x7368617264726e6b

// rankingTable holds ranking definitions, one row per ranking. It is made
// on first use, under rankingLock, rather than by a migration: a database
// that never holds a ranking never gets the table, and the migration list
// stays the counters' and collections'.
const rankingTable = `
CREATE TABLE IF NOT EXISTS shardcounter.rankings (
	name       text COLLATE "C" PRIMARY KEY,
	definition jsonb NOT NULL
)`

// rankingsReady guards the making of the table, once per process.
var rankingsReady sync.Map // *pgxpool.Pool → struct{}

var _ shardcounter.RankingStore = (*CounterStore)(nil)

// ensureRankings makes the rankings table if it is missing.
func (s *CounterStore) ensureRankings(ctx context.Context) error {
	if _, ok := rankingsReady.Load(s.pool); ok {
		return nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", rankingLock); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, rankingTable)
		return err
	})
	if err != nil {
		return mapError("make rankings table", err, beforeCommit)
	}
	rankingsReady.Store(s.pool, struct{}{})
	return nil
}

// CreateRanking records r unless its name is taken: one INSERT … ON
// CONFLICT DO NOTHING, then a read of the row that won.
func (s *CounterStore) CreateRanking(ctx context.Context, r *shardcounter.Ranking) (*shardcounter.Ranking, bool, error) {
	if err := s.ensureRankings(ctx); err != nil {
		return nil, false, err
	}
	tag, err := s.pool.Exec(ctx, "INSERT INTO shardcounter.rankings (name, definition) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
		r.Name, string(shardcounter.EncodeRanking(r)))
	if err != nil {
		return nil, false, mapError("create ranking", err, beforeCommit)
	}
	if tag.RowsAffected() == 1 {
		return r, true, nil
	}
	old, err := s.GetRanking(ctx, r.Name)
	if err != nil {
		return nil, false, err
	}
	return old, false, nil
}

// GetRanking returns a ranking, or ErrNotFound.
func (s *CounterStore) GetRanking(ctx context.Context, name string) (*shardcounter.Ranking, error) {
	if err := s.ensureRankings(ctx); err != nil {
		return nil, err
	}
	var def string
	err := s.pool.QueryRow(ctx, "SELECT definition::text FROM shardcounter.rankings WHERE name = $1", name).Scan(&def)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, shardcounter.RankingNotFound(name)
	}
	if err != nil {
		return nil, mapError("get ranking", err, beforeCommit)
	}
	return shardcounter.DecodeRanking([]byte(def))
}

// ListRankings returns every ranking by name.
func (s *CounterStore) ListRankings(ctx context.Context) ([]*shardcounter.Ranking, error) {
	if err := s.ensureRankings(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, "SELECT definition::text FROM shardcounter.rankings ORDER BY name")
	if err != nil {
		return nil, mapError("list rankings", err, beforeCommit)
	}
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, mapError("list rankings", err, beforeCommit)
	}
	out := make([]*shardcounter.Ranking, 0, len(defs))
	for _, d := range defs {
		r, err := shardcounter.DecodeRanking([]byte(d))
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// DeleteRanking removes a ranking, or returns ErrNotFound.
func (s *CounterStore) DeleteRanking(ctx context.Context, name string) error {
	if err := s.ensureRankings(ctx); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, "DELETE FROM shardcounter.rankings WHERE name = $1", name)
	if err != nil {
		return mapError("delete ranking", err, beforeCommit)
	}
	if tag.RowsAffected() == 0 {
		return shardcounter.RankingNotFound(name)
	}
	return nil
}
