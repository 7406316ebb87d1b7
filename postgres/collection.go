package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docindex"
)

// DefaultMaxIn is how many shards one scan covers with one statement, as
// Firestore bounds the values of one `in` filter.
const DefaultMaxIn = 30

// CollectionStore is a shardcounter.CollectionStore in the database of a
// CounterStore: tables collections, documents and document_index (see
// schema.go). It is safe for concurrent use, also by several processes
// sharing the database.
type CollectionStore struct {
	s *CounterStore

	// MaxIn is how many shards one ScanDocuments statement may cover
	// (MaxScanShards). Default DefaultMaxIn. Set it before first use.
	MaxIn int
}

var _ shardcounter.CollectionStore = (*CollectionStore)(nil)

// Collections returns the collection store in s's database.
func (s *CounterStore) Collections() *CollectionStore {
	return &CollectionStore{s: s, MaxIn: DefaultMaxIn}
}

// MaxScanShards is MaxIn: one statement reads a chunk of shards.
func (s *CollectionStore) MaxScanShards() int {
	if s.MaxIn < 1 {
		return DefaultMaxIn
	}
	return s.MaxIn
}

func collNotFound(name string) error {
	return shardcounter.Errorf(shardcounter.ENOTFOUND, "collection %q not found", name)
}

func docNotFound(name, id string) error {
	return shardcounter.Errorf(shardcounter.ENOTFOUND, "document %q not found in collection %q", id, name)
}

// incarnation is the SQL for the id of the collection named $1 and created
// at $2: one deleted and made again is another collection.
const incarnation = `(SELECT id FROM shardcounter.collections WHERE name = $1 AND created_at = $2)`

// CreateCollection records c unless its name is taken.
func (s *CollectionStore) CreateCollection(ctx context.Context, c *shardcounter.Collection) error {
	tag, err := s.s.pool.Exec(ctx, `
INSERT INTO shardcounter.collections (name, shards, timestamp_field, indexes, shard_key, created_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (name) DO NOTHING`, c.Name, c.Shards, c.TimestampField, c.Indexes, string(c.ShardKey), c.CreatedAt)
	if err != nil {
		return mapError("create collection", err, atCommit)
	}
	if tag.RowsAffected() == 0 {
		return shardcounter.Errorf(shardcounter.EEXISTS, "collection %q already exists", c.Name)
	}
	return nil
}

const collectionColumns = `shards, timestamp_field, indexes, shard_key, created_at`

func scanCollection(name string, row pgx.Row) (*shardcounter.Collection, error) {
	c := &shardcounter.Collection{Name: name}
	var key string
	if err := row.Scan(&c.Shards, &c.TimestampField, &c.Indexes, &key, &c.CreatedAt); err != nil {
		return nil, err
	}
	c.ShardKey, c.CreatedAt = shardcounter.ShardKey(key), c.CreatedAt.UTC()
	if c.Indexes == nil {
		c.Indexes = []string{}
	}
	return c, nil
}

// GetCollection returns a collection's metadata.
func (s *CollectionStore) GetCollection(ctx context.Context, name string) (*shardcounter.Collection, error) {
	c, err := scanCollection(name, s.s.pool.QueryRow(ctx,
		"SELECT "+collectionColumns+" FROM shardcounter.collections WHERE name = $1", name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, collNotFound(name)
	}
	if err != nil {
		return nil, mapError("get collection", err, beforeCommit)
	}
	return c, nil
}

// GrowCollection raises the shard count in one statement, which refuses
// to lower it.
func (s *CollectionStore) GrowCollection(ctx context.Context, name string, shards int) (*shardcounter.Collection, error) {
	if err := shardcounter.ValidateShards(shards); err != nil {
		return nil, err
	}
	c, err := scanCollection(name, s.s.pool.QueryRow(ctx, `
UPDATE shardcounter.collections SET shards = $2 WHERE name = $1 AND shards <= $2
RETURNING `+collectionColumns, name, shards))
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := s.GetCollection(ctx, name); err != nil {
			return nil, err
		}
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "collection %q has more than %d shards: a shard count only grows", name, shards)
	}
	if err != nil {
		return nil, mapError("grow collection", err, atCommit)
	}
	return c, nil
}

// DeleteCollection removes the collection; its documents and index rows
// go with it (ON DELETE CASCADE), in one statement.
func (s *CollectionStore) DeleteCollection(ctx context.Context, name string) error {
	tag, err := s.s.pool.Exec(ctx, "DELETE FROM shardcounter.collections WHERE name = $1", name)
	if err != nil {
		return mapError("delete collection", err, atCommit)
	}
	if tag.RowsAffected() == 0 {
		return collNotFound(name)
	}
	return nil
}

// PutDocuments writes the batch in one transaction: it locks the
// collection against deletion, upserts the documents in id order (so
// concurrent batches lock shared ids in one order), and replaces their
// index rows.
func (s *CollectionStore) PutDocuments(ctx context.Context, c *shardcounter.Collection, docs []*shardcounter.Document) error {
	docs = slices.Clone(docs)
	slices.SortFunc(docs, func(a, b *shardcounter.Document) int { return strings.Compare(a.ID, b.ID) })
	var (
		ids, datas                []string
		shards                    []int32
		stamps                    []time.Time
		ixShards                  []int32
		ixFields, ixValues, ixIDs []string
		ixStamps                  []time.Time
	)
	for _, d := range docs {
		data, err := json.Marshal(d.Data)
		if err != nil {
			return shardcounter.Errorf(shardcounter.EINVALID, "document %q: data cannot be encoded as JSON: %v", d.ID, err)
		}
		vals, err := docindex.Entries(c, d.Data)
		if err != nil {
			return err
		}
		ids, datas, shards, stamps = append(ids, d.ID), append(datas, string(data)), append(shards, int32(d.Shard)), append(stamps, d.Timestamp)
		add := func(field, value string) {
			ixShards, ixFields, ixValues = append(ixShards, int32(d.Shard)), append(ixFields, field), append(ixValues, value)
			ixStamps, ixIDs = append(ixStamps, d.Timestamp), append(ixIDs, d.ID)
		}
		add("", "")
		for _, f := range c.Indexes {
			if v, ok := vals[f]; ok {
				add(f, v)
			}
		}
	}
	err := pgx.BeginFunc(ctx, s.s.pool, func(tx pgx.Tx) error {
		var coll int64
		var n int
		err := tx.QueryRow(ctx, `SELECT id, shards FROM shardcounter.collections WHERE name = $1 AND created_at = $2 FOR SHARE`,
			c.Name, c.CreatedAt).Scan(&coll, &n)
		if errors.Is(err, pgx.ErrNoRows) {
			return collNotFound(c.Name)
		}
		if err != nil {
			return err
		}
		for _, d := range docs {
			if d.Shard < 0 || d.Shard >= n {
				return shardcounter.Errorf(shardcounter.EINVALID, "document %q: shard %d is not below the shard count %d", d.ID, d.Shard, n)
			}
		}
		if _, err := tx.Exec(ctx, `
INSERT INTO shardcounter.documents (collection, id, shard, ts, data)
SELECT $1, d.id, d.shard, d.ts, d.data::json
FROM unnest($2::text[], $3::int[], $4::timestamptz[], $5::text[]) AS d (id, shard, ts, data)
ON CONFLICT (collection, id) DO UPDATE SET shard = EXCLUDED.shard, ts = EXCLUDED.ts, data = EXCLUDED.data`,
			coll, ids, shards, stamps, datas); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM shardcounter.document_index WHERE collection = $1 AND id = ANY($2)`, coll, ids); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
INSERT INTO shardcounter.document_index (shard, collection, field, value, ts, id)
SELECT i.shard, $1, i.field, i.value, i.ts, i.id
FROM unnest($2::int[], $3::text[], $4::text[], $5::timestamptz[], $6::text[]) AS i (shard, field, value, ts, id)`,
			coll, ixShards, ixFields, ixValues, ixStamps, ixIDs)
		return err
	})
	return mapError("put documents", err, atCommit)
}

// docColumns are the columns scanDoc reads, of documents d.
const docColumns = `d.id, d.shard, d.ts, d.data::text`

func scanDoc(row pgx.Row) (*shardcounter.Document, error) {
	d := &shardcounter.Document{}
	var data string
	if err := row.Scan(&d.ID, &d.Shard, &d.Timestamp, &data); err != nil {
		return nil, err
	}
	d.Timestamp = d.Timestamp.UTC()
	dec := json.NewDecoder(bytes.NewReader([]byte(data)))
	dec.UseNumber() // keep integers past 2^53 exact
	if err := dec.Decode(&d.Data); err != nil {
		return nil, fmt.Errorf("corrupt data of document %q: %w", d.ID, err)
	}
	return d, nil
}

// GetDocument returns one document.
func (s *CollectionStore) GetDocument(ctx context.Context, c *shardcounter.Collection, id string) (*shardcounter.Document, error) {
	d, err := scanDoc(s.s.pool.QueryRow(ctx, `SELECT `+docColumns+` FROM shardcounter.documents d
WHERE d.collection = `+incarnation+` AND d.id = $3`, c.Name, c.CreatedAt, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, docNotFound(c.Name, id)
	}
	if err != nil {
		return nil, mapError("get document", err, beforeCommit)
	}
	return d, nil
}

// DeleteDocument removes one document; its index rows go with it.
func (s *CollectionStore) DeleteDocument(ctx context.Context, c *shardcounter.Collection, id string) error {
	tag, err := s.s.pool.Exec(ctx, `DELETE FROM shardcounter.documents WHERE collection = `+incarnation+` AND id = $3`,
		c.Name, c.CreatedAt, id)
	if err != nil {
		return mapError("delete document", err, atCommit)
	}
	if tag.RowsAffected() == 0 {
		return docNotFound(c.Name, id)
	}
	return nil
}

// ScanDocuments reads a chunk of shards in one statement: for each shard
// of the chunk a LATERAL sub-query walks that shard's index range in
// (timestamp, id) order and stops at the limit, and the outer query merges
// the chunk's rows and cuts to the limit. This is the seed's
// `shard IN (...)` query, in the form PostgreSQL can serve from the index:
// a plain `shard = ANY(...) ORDER BY ts LIMIT n` would read every row of
// every shard in the range and sort them, since one index scan over
// several shards does not come out in timestamp order.
func (s *CollectionStore) ScanDocuments(ctx context.Context, c *shardcounter.Collection, r shardcounter.ScanRange) ([]*shardcounter.Document, error) {
	dir := "DESC"
	if r.Order == shardcounter.Asc {
		dir = "ASC"
	}
	shards := make([]int32, len(r.Shards))
	for i, sh := range r.Shards {
		shards[i] = int32(sh)
	}
	args := []any{c.Name, c.CreatedAt, shards, r.Index, r.Value, r.Limit}
	var bounds strings.Builder
	if r.After != nil {
		args = append(args, r.After.Time, r.After.ID)
		fmt.Fprintf(&bounds, " AND (i.ts, i.id) > ($%d, $%d)", len(args)-1, len(args))
	}
	if r.Before != nil {
		args = append(args, r.Before.Time, r.Before.ID)
		fmt.Fprintf(&bounds, " AND (i.ts, i.id) < ($%d, $%d)", len(args)-1, len(args))
	}
	sql := `
SELECT ` + docColumns + `
FROM unnest($3::int[]) AS s (shard)
CROSS JOIN LATERAL (
	SELECT i.collection, i.ts, i.id FROM shardcounter.document_index i
	WHERE i.shard = s.shard AND i.collection = ` + incarnation + ` AND i.field = $4 AND i.value = $5` + bounds.String() + `
	ORDER BY i.ts ` + dir + `, i.id ` + dir + `
	LIMIT $6
) AS x
JOIN shardcounter.documents d ON d.collection = x.collection AND d.id = x.id
ORDER BY x.ts ` + dir + `, x.id ` + dir + `
LIMIT $6`
	rows, err := s.s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, mapError("scan documents", err, beforeCommit)
	}
	defer rows.Close()
	var out []*shardcounter.Document
	for rows.Next() {
		d, err := scanDoc(rows)
		if err != nil {
			return nil, mapError("scan documents", err, beforeCommit)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, mapError("scan documents", err, beforeCommit)
	}
	return out, nil
}
