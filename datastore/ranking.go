package datastore

import (
	"context"
	"errors"
	"slices"
	"strings"

	"cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter"
)

// rankingKind holds one entity per ranking, keyed by the escaped name,
// with the name and the definition's JSON (shardcounter.EncodeRanking),
// as the Firestore store keeps them. A store holds at most
// shardcounter.MaxRankings, so a listing is one query.
const rankingKind = "SC_Ranking"

var _ shardcounter.RankingStore = (*CounterStore)(nil)

// rankingEntity is a ranking's definition. The JSON is the record every
// store keeps, so that an operator reads the same thing everywhere; it is
// not indexed, nothing queries it.
type rankingEntity struct {
	Name       string `datastore:"name,noindex"`
	Definition string `datastore:"definition,noindex"`
}

func (s *CounterStore) rankingKey(name string) *datastore.Key {
	k := datastore.NameKey(rankingKind, Escape(name), nil)
	k.Namespace = s.namespace
	return k
}

// rankingLock is the stripe a ranking's transactions hold: apart from any
// counter's, so that creates of one name queue in this process.
func rankingLock(name string) string { return "\x00ranking/" + name }

// getRankingIn reads a ranking in tx; nil when it does not exist.
func (s *CounterStore) getRankingIn(tx *datastore.Transaction, name string) (*shardcounter.Ranking, error) {
	var e rankingEntity
	err := tx.Get(s.rankingKey(name), &e)
	if errors.Is(err, datastore.ErrNoSuchEntity) {
		return nil, nil
	}
	if err != nil {
		return nil, txError("read ranking", err)
	}
	return shardcounter.DecodeRanking([]byte(e.Definition))
}

// CreateRanking records r unless its name is taken: a transaction that
// reads the entity and inserts it when absent. Datastore has no create
// precondition outside one; a create that loses to a concurrent one
// aborts, is tried again, and then reads the winner.
func (s *CounterStore) CreateRanking(ctx context.Context, r *shardcounter.Ranking) (*shardcounter.Ranking, bool, error) {
	var old *shardcounter.Ranking
	e := &rankingEntity{Name: r.Name, Definition: string(shardcounter.EncodeRanking(r))}
	err := s.transact(ctx, "create ranking", rankingLock(r.Name), func(tx *datastore.Transaction) error {
		var err error
		if old, err = s.getRankingIn(tx, r.Name); err != nil || old != nil {
			return err
		}
		_, err = tx.Mutate(datastore.NewInsert(s.rankingKey(r.Name), e))
		return txErr(err)
	})
	switch {
	case err != nil:
		return nil, false, err
	case old != nil:
		return old, false, nil
	}
	return r, true, nil
}

// GetRanking returns a ranking, or ErrNotFound.
func (s *CounterStore) GetRanking(ctx context.Context, name string) (*shardcounter.Ranking, error) {
	var e rankingEntity
	err := s.client.Get(ctx, s.rankingKey(name), &e)
	if errors.Is(err, datastore.ErrNoSuchEntity) {
		return nil, shardcounter.RankingNotFound(name)
	}
	if err != nil {
		return nil, readError("read ranking", err)
	}
	return shardcounter.DecodeRanking([]byte(e.Definition))
}

// ListRankings returns every ranking by name.
func (s *CounterStore) ListRankings(ctx context.Context) ([]*shardcounter.Ranking, error) {
	var es []rankingEntity
	q := datastore.NewQuery(rankingKind).Namespace(s.namespace)
	if _, err := s.client.GetAll(ctx, q, &es); err != nil {
		return nil, readError("list rankings", err)
	}
	out := make([]*shardcounter.Ranking, 0, len(es))
	for _, e := range es {
		r, err := shardcounter.DecodeRanking([]byte(e.Definition))
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *shardcounter.Ranking) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteRanking removes a ranking, or returns ErrNotFound: a transaction,
// since a Datastore delete of a missing entity succeeds.
func (s *CounterStore) DeleteRanking(ctx context.Context, name string) error {
	missing := false
	err := s.transact(ctx, "delete ranking", rankingLock(name), func(tx *datastore.Transaction) error {
		old, err := s.getRankingIn(tx, name)
		if err != nil {
			return err
		}
		if missing = old == nil; missing {
			return nil
		}
		return txErr(tx.Delete(s.rankingKey(name)))
	})
	if err != nil {
		return err
	}
	if missing {
		return shardcounter.RankingNotFound(name)
	}
	return nil
}
