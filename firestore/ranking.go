package firestore

import (
	"context"
	"slices"
	"strings"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shardcounter/shardcounter"
)

// rankingsCollection holds one document per ranking, its id the escaped
// name, with the definition's JSON (shardcounter.EncodeRanking) in
// field "definition". A store holds at most shardcounter.MaxRankings, so
// a listing is one query.
const rankingsCollection = "sc_rankings"

func (s *CounterStore) rankingRef(name string) *firestore.DocumentRef {
	return s.client.Collection(rankingsCollection).Doc(Escape(name))
}

var _ shardcounter.RankingStore = (*CounterStore)(nil)

func decodeRankingDoc(snap *firestore.DocumentSnapshot) (*shardcounter.Ranking, error) {
	def, _ := snap.Data()["definition"].(string)
	return shardcounter.DecodeRanking([]byte(def))
}

// CreateRanking records r unless its name is taken: a Create, which
// Firestore refuses when the document exists.
func (s *CounterStore) CreateRanking(ctx context.Context, r *shardcounter.Ranking) (*shardcounter.Ranking, bool, error) {
	_, err := s.rankingRef(r.Name).Create(ctx, map[string]any{"name": r.Name, "definition": string(shardcounter.EncodeRanking(r))})
	if status.Code(err) == codes.AlreadyExists {
		old, err := s.GetRanking(ctx, r.Name)
		return old, false, err
	}
	if err != nil {
		return nil, false, writeError("create ranking", err)
	}
	return r, true, nil
}

// GetRanking returns a ranking, or ErrNotFound.
func (s *CounterStore) GetRanking(ctx context.Context, name string) (*shardcounter.Ranking, error) {
	snap, err := s.rankingRef(name).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return nil, shardcounter.RankingNotFound(name)
	}
	if err != nil {
		return nil, readError("read ranking", err)
	}
	return decodeRankingDoc(snap)
}

// ListRankings returns every ranking by name.
func (s *CounterStore) ListRankings(ctx context.Context) ([]*shardcounter.Ranking, error) {
	snaps, err := s.client.Collection(rankingsCollection).Documents(ctx).GetAll()
	if err != nil {
		return nil, readError("list rankings", err)
	}
	out := make([]*shardcounter.Ranking, 0, len(snaps))
	for _, snap := range snaps {
		r, err := decodeRankingDoc(snap)
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
	_, err := s.rankingRef(name).Delete(ctx, firestore.Exists)
	if status.Code(err) == codes.NotFound {
		return shardcounter.RankingNotFound(name)
	}
	if err != nil {
		return writeError("delete ranking", err)
	}
	return nil
}
