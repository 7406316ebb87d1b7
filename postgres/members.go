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

// membersSQL applies a batch's member items in one statement: $1 numbers
// them in batch order, $2 is each one's counter, $3 its member, $4 true to
// add it and false to remove it, $5 shard.ForMember(member) (kept as the
// member's hash) and $6 its shard. Each item sees the membership the item
// before it on the same member left, or the table's; each member's net
// change is inserted or deleted, and each shard's count moves with it, in
// the same step. It returns the numbers of the items that changed nothing.
//
// The batch holds the lock of every shard row its members are on, taken
// before this statement's snapshot, so the presence it reads is current
// and no other batch changes these members until it commits.
const membersSQL = `
WITH i AS (
	SELECT i.*, m.present IS NOT NULL AS present
	FROM unnest($1::integer[], $2::text[], $3::text[], $4::boolean[], $5::bigint[], $6::integer[])
		AS i(ord, counter, member, add, hash, shard)
	LEFT JOIN LATERAL (
		SELECT true AS present FROM shardcounter.members m
		WHERE m.counter = i.counter AND m.member = i.member LIMIT 1
	) AS m ON true
), s AS (
	SELECT i.*,
		coalesce(lag(i.add) OVER w, i.present) AS before,
		lag(i.ord) OVER w IS NULL AS first,
		lead(i.ord) OVER w IS NULL AS last
	FROM i
	WINDOW w AS (PARTITION BY i.counter, i.member ORDER BY i.ord)
), net AS (
	SELECT counter, member, min(hash) AS hash, min(shard) AS shard,
		bool_or(before) FILTER (WHERE first) AS was_in,
		bool_or(add) FILTER (WHERE last) AS is_in
	FROM s GROUP BY counter, member
), ins AS (
	INSERT INTO shardcounter.members (counter, member, hash)
	SELECT counter, member, hash FROM net WHERE is_in AND NOT was_in
), del AS (
	DELETE FROM shardcounter.members m USING net
	WHERE m.counter = net.counter AND m.member = net.member AND net.was_in AND NOT net.is_in
), counts AS (
	UPDATE shardcounter.shards sh SET value = sh.value + d.delta
	FROM (
		SELECT counter, shard, sum(CASE WHEN is_in THEN 1 ELSE -1 END) AS delta
		FROM net WHERE is_in <> was_in GROUP BY counter, shard
	) AS d
	WHERE sh.counter = d.counter AND sh.shard = d.shard
)
SELECT ord FROM s WHERE add = before`

// memberShard is the SQL expression of the shard of a member whose hash
// column is hash, among n: the hash read as the uint64 it was, mod n.
func memberShard(hash, n string) string {
	return fmt.Sprintf("mod(%[1]s::numeric + CASE WHEN %[1]s < 0 THEN 18446744073709551616 ELSE 0 END, %[2]s)::integer", hash, n)
}

// memberWrites collects membersSQL's arguments.
type memberWrites struct {
	items    []int // the batch index of each member item, by its number
	ords     []int
	counters []string
	members  []string
	adds     []bool
	hashes   []int64
	shards   []int
}

func (m *memberWrites) add(i int, inc shardcounter.Increment, hash uint64, shard int) {
	m.ords, m.items = append(m.ords, len(m.items)), append(m.items, i)
	m.counters, m.members = append(m.counters, inc.Counter), append(m.members, inc.Member)
	m.adds, m.hashes, m.shards = append(m.adds, inc.Delta > 0), append(m.hashes, int64(hash)), append(m.shards, shard)
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
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	if strings.ContainsRune(after, 0) || !utf8.ValidString(after) {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "list page start is not valid UTF-8 without NUL bytes")
	}
	var kind string
	var members []string
	err := s.pool.QueryRow(ctx, `
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
