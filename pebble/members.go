package pebble

import (
	"context"
	"errors"

	pdb "github.com/cockroachdb/pebble/v2"

	"github.com/shardcounter/shardcounter"
)

// distinctRecord returns a distinct counter's record: ErrNotFound when it
// is missing, ErrInvalid when it is a sum counter.
func distinctRecord(r pdb.Reader, id string) (*record, error) {
	rec, err := getRecord(r, id)
	switch {
	case err == nil && rec.meta.spec.Kind == shardcounter.KindApprox:
		err = shardcounter.Errorf(shardcounter.EINVALID, "counter %q is an approx counter: it keeps a sketch of its members, not the members, so it cannot list them or say whether it holds one", id)
	case err == nil && !rec.meta.distinct():
		err = shardcounter.CounterHasNoMembers(id)
	}
	return rec, err
}

// IsMember reports whether member is in a distinct counter: one lookup.
func (s *CounterStore) IsMember(ctx context.Context, id, member string) (bool, error) {
	if err := shardcounter.ValidateID("member", member); err != nil {
		return false, err
	}
	var present bool
	err := s.durableRead(ctx, func(r pdb.Reader) error {
		if _, err := distinctRecord(r, id); err != nil {
			return err
		}
		_, closer, err := r.Get(memberKey(id, member))
		if errors.Is(err, pdb.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		present = true
		return closer.Close()
	})
	return present, err
}

// ListMembers returns up to limit members that sort after after, in byte
// order: one iterator walk.
func (s *CounterStore) ListMembers(ctx context.Context, id, after string, limit int) ([]string, error) {
	var out []string
	err := s.durableRead(ctx, func(r pdb.Reader) error {
		if _, err := distinctRecord(r, id); err != nil {
			return err
		}
		p := prefixKey(prefixMember, id)
		it, err := r.NewIter(&pdb.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			return err
		}
		defer it.Close()
		for ok := it.SeekGE(memberKey(id, after)); ok && len(out) < limit; ok = it.Next() {
			if m := string(it.Key()[len(p):]); m != after {
				out = append(out, m)
			}
		}
		return it.Error()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
