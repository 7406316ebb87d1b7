package pebble

import (
	"context"
	"errors"

	pdb "github.com/cockroachdb/pebble/v2"

	"github.com/shardcounter/shardcounter"
)

// Rankings share the counters' directory (keys.go):
//
//	'R' name → ranking definition (shardcounter.EncodeRanking)
const prefixRanking = 'R'

func rankingKey(name string) []byte { return append([]byte{prefixRanking}, name...) }

var _ shardcounter.RankingStore = (*CounterStore)(nil)

// getRanking reads a ranking's record, ErrNotFound when there is none.
func getRanking(r pdb.Reader, name string) (*shardcounter.Ranking, error) {
	v, closer, err := r.Get(rankingKey(name))
	if errors.Is(err, pdb.ErrNotFound) {
		return nil, shardcounter.RankingNotFound(name)
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return shardcounter.DecodeRanking(v)
}

// CreateRanking records r unless its name is taken. The check and the
// write are made under the store's write lock.
func (s *CounterStore) CreateRanking(ctx context.Context, r *shardcounter.Ranking) (*shardcounter.Ranking, bool, error) {
	stored, created := r, false
	err := s.Collections().write(ctx, func(b *pdb.Batch) error {
		old, err := getRanking(s.db, r.Name)
		if err == nil {
			stored = old
			return nil
		}
		if shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
			return err
		}
		created = true
		return b.Set(rankingKey(r.Name), shardcounter.EncodeRanking(r), nil)
	})
	if err != nil {
		return nil, false, err
	}
	return stored, created, nil
}

// GetRanking returns a ranking, or ErrNotFound.
func (s *CounterStore) GetRanking(ctx context.Context, name string) (*shardcounter.Ranking, error) {
	var r *shardcounter.Ranking
	err := s.durableRead(ctx, func(rd pdb.Reader) error {
		var err error
		r, err = getRanking(rd, name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// ListRankings returns every ranking by name.
func (s *CounterStore) ListRankings(ctx context.Context) ([]*shardcounter.Ranking, error) {
	var out []*shardcounter.Ranking
	err := s.durableRead(ctx, func(rd pdb.Reader) error {
		lo := []byte{prefixRanking}
		it, err := rd.NewIter(&pdb.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			r, err := shardcounter.DecodeRanking(it.Value())
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return it.Error()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteRanking removes a ranking, or returns ErrNotFound.
func (s *CounterStore) DeleteRanking(ctx context.Context, name string) error {
	return s.Collections().write(ctx, func(b *pdb.Batch) error {
		if _, err := getRanking(s.db, name); err != nil {
			return err
		}
		return b.Delete(rankingKey(name), nil)
	})
}
