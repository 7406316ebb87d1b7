package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/shardcounter/shardcounter"
)

// memberShard is the SQL expression of the shard of a member whose hash
// column is hash, among n: the hash read as the uint64 it was, mod n.
func memberShard(hash, n string) string {
	return fmt.Sprintf("mod(%[1]s::numeric + CASE WHEN %[1]s < 0 THEN 18446744073709551616 ELSE 0 END, %[2]s)::integer", hash, n)
}

// IsMember reports whether member is in a distinct counter, in one
// statement.
func (s *CounterStore) IsMember(ctx context.Context, id, member string) (bool, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return false, err
	}
	if err := shardcounter.ValidateID("member", member); err != nil {
		return false, err
	}
	var kind string
	var present bool
	err := s.pool.QueryRow(ctx, `
SELECT c.kind, EXISTS (SELECT 1 FROM shardcounter.members m WHERE m.counter = c.id AND m.member = $2)
FROM shardcounter.counters c WHERE c.id = $1`, id, member).Scan(&kind, &present)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, notFound(id)
	}
	if err != nil {
		return false, mapError("is member", err, beforeCommit)
	}
	if kind != string(shardcounter.KindDistinct) {
		return false, notDistinct(id, kind)
	}
	return present, nil
}

// ListMembers returns up to limit members of a distinct counter that sort
// after after, in byte order, in one statement.
func (s *CounterStore) ListMembers(ctx context.Context, id, after string, limit int) ([]string, error) {
	return listMembers(ctx, s.pool, id, after, limit)
}

func listMembers(ctx context.Context, q querier, id, after string, limit int) ([]string, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	if strings.ContainsRune(after, 0) || !utf8.ValidString(after) {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "list page start is not valid UTF-8 without NUL bytes")
	}
	var kind string
	var members []string
	err := q.QueryRow(ctx, `
SELECT c.kind, array(
	SELECT m.member FROM shardcounter.members m
	WHERE m.counter = c.id AND m.member > $2
	ORDER BY m.member LIMIT $3
)
FROM shardcounter.counters c WHERE c.id = $1`, id, after, max(limit, 0)).Scan(&kind, &members)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, mapError("list members", err, beforeCommit)
	}
	if kind != string(shardcounter.KindDistinct) {
		return nil, notDistinct(id, kind)
	}
	if members == nil {
		members = []string{}
	}
	return members, nil
}

// notDistinct is the error of a member read on a counter that keeps no
// members: a sum counter, or an approx one, whose sketches cannot say
// whether they saw a member.
func notDistinct(id, kind string) error {
	if kind == string(shardcounter.KindApprox) {
		return shardcounter.Errorf(shardcounter.EINVALID, "counter %q is an approx counter: it keeps a sketch, not its members", id)
	}
	return shardcounter.Errorf(shardcounter.EINVALID, "counter %q counts sums, not members: it has none", id)
}
