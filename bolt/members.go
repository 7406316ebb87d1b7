package bolt

import (
	"bytes"
	"context"

	bbolt "go.etcd.io/bbolt"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/shard"
)

func memberKey(id, member string) []byte {
	return append(prefixKey(id), member...)
}

// has reports whether the bucket holds key. Member keys have empty values,
// and bbolt's Get returns nil for an empty value put in the same
// transaction, so presence is a cursor's match, not a non-nil Get.
func has(b *bbolt.Bucket, key []byte) bool {
	k, _ := b.Cursor().Seek(key)
	return bytes.Equal(k, key)
}

// distinctMeta returns a distinct counter's record: ErrNotFound when it is
// missing, ErrInvalid when it is a sum counter.
func distinctMeta(tx *bbolt.Tx, id string) (meta, error) {
	m, err := getMeta(tx, id)
	switch {
	case err == nil && m.spec.Kind == shardcounter.KindApprox:
		err = approxHasNoMembers(id)
	case err == nil && !m.distinct():
		err = shardcounter.CounterHasNoMembers(id)
	}
	return m, err
}

// IsMember reports whether member is in a distinct counter: one lookup.
func (s *CounterStore) IsMember(ctx context.Context, id, member string) (bool, error) {
	if err := shardcounter.ValidateID("member", member); err != nil {
		return false, err
	}
	var present bool
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		if _, err := distinctMeta(tx, id); err != nil {
			return err
		}
		present = has(tx.Bucket(bucketMembers), memberKey(id, member))
		return nil
	})
	return present, err
}

// ListMembers returns up to limit members that sort after after, in byte
// order: one cursor walk.
func (s *CounterStore) ListMembers(ctx context.Context, id, after string, limit int) ([]string, error) {
	var out []string
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		if _, err := distinctMeta(tx, id); err != nil {
			return err
		}
		p := prefixKey(id)
		c := tx.Bucket(bucketMembers).Cursor()
		from := memberKey(id, after)
		k, _ := c.Seek(from)
		if after != "" && bytes.Equal(k, from) {
			k, _ = c.Next()
		}
		for ; k != nil && len(out) < limit && bytes.HasPrefix(k, p); k, _ = c.Next() {
			out = append(out, string(k[len(p):]))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// recountMembers sets a distinct counter's shard values for shards shards
// (it had n) from its members: each member counts on shard
// shard.Of(shard.ForMember(m), shards).
func recountMembers(tx *bbolt.Tx, id string, n, shards int) error {
	counts := make([]int64, shards)
	p := prefixKey(id)
	c := tx.Bucket(bucketMembers).Cursor()
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
		counts[shard.Of(shard.ForMember(string(k[len(p):])), shards)]++
	}
	b := tx.Bucket(bucketShards)
	for i := range max(n, shards) {
		var err error
		if i < shards && counts[i] != 0 {
			err = b.Put(shardKey(id, i), encodeInt(counts[i]))
		} else {
			err = b.Delete(shardKey(id, i))
		}
		if err != nil {
			return err
		}
	}
	return nil
}
