package model

import (
	"context"
	"slices"
	"strings"

	"github.com/shardcounter/shardcounter"
)

// CreateRanking records r unless its name is taken.
func (s *Store) CreateRanking(ctx context.Context, r *shardcounter.Ranking) (*shardcounter.Ranking, bool, error) {
	if err := s.lock(ctx); err != nil {
		return nil, false, err
	}
	defer s.mu.Unlock()
	if old, ok := s.rankings[r.Name]; ok {
		return &old, false, nil
	}
	s.rankings[r.Name] = *r
	stored := *r
	return &stored, true, nil
}

// GetRanking returns a ranking, or ErrNotFound.
func (s *Store) GetRanking(ctx context.Context, name string) (*shardcounter.Ranking, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r, ok := s.rankings[name]
	if !ok {
		return nil, shardcounter.RankingNotFound(name)
	}
	return &r, nil
}

// ListRankings returns every ranking by name.
func (s *Store) ListRankings(ctx context.Context) ([]*shardcounter.Ranking, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []*shardcounter.Ranking
	for _, r := range s.rankings {
		out = append(out, &r)
	}
	slices.SortFunc(out, func(a, b *shardcounter.Ranking) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteRanking removes a ranking, or returns ErrNotFound.
func (s *Store) DeleteRanking(ctx context.Context, name string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.rankings[name]; !ok {
		return shardcounter.RankingNotFound(name)
	}
	delete(s.rankings, name)
	return nil
}
