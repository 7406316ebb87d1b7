package redis

import (
	"cmp"
	"context"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// Distinct counters. Member m of a counter with n shards is in the sorted
// set (all scores 0, so in byte order) of shard ForMember(m) mod n, and
// the shard's value is the number of members in its set: the write script
// adds or removes the member and moves the value only when membership
// changes, in one step. A reshard moves every member to its new shard (see
// moveMembers).

// IsMember reports whether member is in a distinct counter: one script on
// the member's shard, which checks the shard's epoch and the set in one
// step, so the answer is linearizable.
func (s *CounterStore) IsMember(ctx context.Context, id, member string) (bool, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return false, err
	}
	if err := shardcounter.ValidateID("member", member); err != nil {
		return false, err
	}
	for attempt := range maxAttempts {
		l, err := s.layout(ctx, id, attempt > 0)
		if err != nil {
			return false, err
		}
		if !l.distinct() {
			return false, notDistinct(l)
		}
		k := shard.Of(shard.ForMember(member), l.n)
		r, err := s.runScript(ctx, isMemberScript, []string{l.keys.shard(k), l.keys.members(k, l.memberGen)}, l.ep(), member).Int()
		switch {
		case err != nil && retryable(err):
			s.refresh(ctx, err)
			continue
		case err != nil:
			return false, storeErr("is member", err, false)
		case r == -1: // stale layout
			s.forget(id)
			continue
		}
		return r == 1, nil
	}
	return false, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "redis: counter %q keeps changing: try again", id)
}

// ListMembers returns up to limit members of a distinct counter that sort
// after after, in byte order: a merge of its shards' sets (see merge).
// When a reshard moves the members meanwhile it reads them again.
func (s *CounterStore) ListMembers(ctx context.Context, id, after string, limit int) ([]string, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	for range maxAttempts {
		l, err := s.layout(ctx, id, true)
		if err != nil {
			return nil, err
		}
		if !l.distinct() {
			return nil, notDistinct(l)
		}
		if limit <= 0 {
			return nil, nil
		}
		keys := make([]string, l.n)
		for i := range keys {
			keys[i] = l.keys.members(i, l.memberGen)
		}
		lo := "-"
		if after != "" {
			lo = "(" + after
		}
		page, err := newMerge(keys, lo, "+", max(8, 2*limit/l.n)).next(ctx, s.client, limit)
		if err != nil {
			return nil, storeErr("list members", err, false)
		}
		// Are these sets still the counter's, or did a reshard move the
		// members while they were read?
		gen, err := s.client.HGet(ctx, metaKey(s.prefix, id), fieldMemberGen).Result()
		if err != nil && err != goredis.Nil {
			return nil, storeErr("list members", err, false)
		}
		if cmp.Or(gen, "1") == strconv.FormatInt(l.memberGen, 10) {
			return page, nil
		}
	}
	return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "redis: counter %q keeps changing: try again", id)
}

// notDistinct is the error of a member read on a counter that keeps no
// members: a sum counter, or an approx one, whose sketches cannot say
// whether they saw a member.
func notDistinct(l *layout) error {
	if l.approx() {
		return shardcounter.Errorf(shardcounter.EINVALID, "counter %q is an approx counter: it keeps a sketch, not its members", l.id)
	}
	return shardcounter.Errorf(shardcounter.EINVALID, "counter %q is a sum counter: it has no members", l.id)
}
