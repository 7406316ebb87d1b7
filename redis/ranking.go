package redis

import (
	"context"
	"errors"
	"slices"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
)

// rankingsKey is the hash of ranking definitions, name → JSON record
// (shardcounter.EncodeRanking). One key holds them all, so on a cluster
// they live on one master and a listing is one HGETALL: a store holds at
// most shardcounter.MaxRankings.
func (s *CounterStore) rankingsKey() string { return s.prefix + "rankings" }

var _ shardcounter.RankingStore = (*CounterStore)(nil)

// CreateRanking records r unless its name is taken (HSETNX), then waits
// for replicas as every write does.
func (s *CounterStore) CreateRanking(ctx context.Context, r *shardcounter.Ranking) (*shardcounter.Ranking, bool, error) {
	ok, err := s.client.HSetNX(ctx, s.rankingsKey(), r.Name, shardcounter.EncodeRanking(r)).Result()
	if err != nil {
		return nil, false, storeErr("create ranking", err, true)
	}
	if !ok {
		old, err := s.GetRanking(ctx, r.Name)
		return old, false, err
	}
	if err := s.sync(ctx, s.rankingsKey()); err != nil {
		return nil, false, err
	}
	return r, true, nil
}

// GetRanking returns a ranking, or ErrNotFound.
func (s *CounterStore) GetRanking(ctx context.Context, name string) (*shardcounter.Ranking, error) {
	v, err := s.client.HGet(ctx, s.rankingsKey(), name).Result()
	if errors.Is(err, goredis.Nil) {
		return nil, shardcounter.RankingNotFound(name)
	}
	if err != nil {
		return nil, storeErr("get ranking", err, false)
	}
	return shardcounter.DecodeRanking([]byte(v))
}

// ListRankings returns every ranking by name.
func (s *CounterStore) ListRankings(ctx context.Context) ([]*shardcounter.Ranking, error) {
	m, err := s.client.HGetAll(ctx, s.rankingsKey()).Result()
	if err != nil {
		return nil, storeErr("list rankings", err, false)
	}
	out := make([]*shardcounter.Ranking, 0, len(m))
	for _, v := range m {
		r, err := shardcounter.DecodeRanking([]byte(v))
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *shardcounter.Ranking) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteRanking removes a ranking, or returns ErrNotFound.
func (s *CounterStore) DeleteRanking(ctx context.Context, name string) error {
	n, err := s.client.HDel(ctx, s.rankingsKey(), name).Result()
	if err != nil {
		return storeErr("delete ranking", err, true)
	}
	if n == 0 {
		return shardcounter.RankingNotFound(name)
	}
	return s.sync(ctx, s.rankingsKey())
}
