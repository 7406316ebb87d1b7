package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationLock is the key of the advisory lock held while migrating, so
// that processes opening one database at the same time migrate it one
// after the other. It is the first 8 bytes of "shardcou" read as a number:
// arbitrary, but fixed forever.
const migrationLock int64 = 0x7368617264636f75

// migrations are the schema's versions: migrations[i] takes the schema
// from version i to version i+1. They are append-only: a released
// migration never changes, a change is a new one.
var migrations = []string{
	// 1: counters, their shard rows and the request ids already applied.
	//
	// Ids are COLLATE "C" so that listing and the lock order of batches
	// follow byte order whatever the database's collation.
	//
	// shards.shards is the shard count the row was placed under. Writers
	// update a row only while it matches the count they read, so a reshard
	// that rewrote or removed the row sends them back to read the new count
	// (see doc.go).
	//
	// requests.created_at is kept for the dedupe window that expires old
	// request ids.
	`
CREATE TABLE shardcounter.counters (
	id         text COLLATE "C" PRIMARY KEY,
	shards     integer NOT NULL CHECK (shards BETWEEN 1 AND 1024),
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE shardcounter.shards (
	counter text COLLATE "C" NOT NULL REFERENCES shardcounter.counters (id) ON DELETE CASCADE,
	shard   integer NOT NULL CHECK (shard >= 0),
	value   bigint NOT NULL DEFAULT 0,
	shards  integer NOT NULL CHECK (shard < shards),
	PRIMARY KEY (counter, shard)
);
CREATE TABLE shardcounter.requests (
	counter    text COLLATE "C" NOT NULL REFERENCES shardcounter.counters (id) ON DELETE CASCADE,
	request_id text COLLATE "C" NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (counter, request_id)
);
CREATE INDEX requests_created_at ON shardcounter.requests (created_at);
`,
	// 2: time-ordered collections with sharded timestamps (seed 001).
	//
	// collections.id names one incarnation of a collection: one deleted and
	// made again under its name gets a new id and shares no rows with it.
	//
	// document_index holds one row per document and index: field '' (value
	// '') for the timestamp alone, and one per declared index field the
	// document has a value for. Its key puts shard first, as the seed
	// prescribes, so rows with increasing timestamps go to n places in the
	// B-tree instead of its rightmost page; and no index holds the
	// timestamp without the shard. document_index_document, which has no
	// timestamp, finds a document's rows when it is replaced or deleted.
	// Data is json, not jsonb: it is never queried in SQL, and json keeps
	// what the client sent, "\u0000" included.
	`
CREATE TABLE shardcounter.collections (
	id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	name            text COLLATE "C" NOT NULL UNIQUE,
	shards          integer NOT NULL CHECK (shards BETWEEN 1 AND 1024),
	timestamp_field text NOT NULL,
	indexes         text[] NOT NULL,
	shard_key       text NOT NULL,
	created_at      timestamptz NOT NULL
);
CREATE TABLE shardcounter.documents (
	collection bigint NOT NULL REFERENCES shardcounter.collections (id) ON DELETE CASCADE,
	id         text COLLATE "C" NOT NULL,
	shard      integer NOT NULL CHECK (shard BETWEEN 0 AND 1023),
	ts         timestamptz NOT NULL,
	data       json NOT NULL,
	PRIMARY KEY (collection, id)
);
CREATE TABLE shardcounter.document_index (
	shard      integer NOT NULL,
	collection bigint NOT NULL,
	field      text COLLATE "C" NOT NULL,
	value      text COLLATE "C" NOT NULL,
	ts         timestamptz NOT NULL,
	id         text COLLATE "C" NOT NULL,
	PRIMARY KEY (shard, collection, field, value, ts, id),
	FOREIGN KEY (collection, id) REFERENCES shardcounter.documents (collection, id) ON DELETE CASCADE
);
CREATE INDEX document_index_document ON shardcounter.document_index (collection, id);
`,
	// 3: shards.wide marks every shard row of a counter some shard of
	// which holds more than MaxInt64/shards either way, so that the total
	// may leave int64. While no row is marked, a write that keeps its own
	// shard within that zone cannot take the total out of int64, and needs
	// no sum (see doc.go, "Overflow"). Counters already past it are marked.
	`
ALTER TABLE shardcounter.shards ADD COLUMN wide boolean NOT NULL DEFAULT false;
UPDATE shardcounter.shards s SET wide = true
FROM shardcounter.counters c
WHERE s.counter = c.id AND EXISTS (
	SELECT 1 FROM shardcounter.shards o
	WHERE o.counter = c.id AND abs(o.value::numeric) > 9223372036854775807 / c.shards
);
`,
	// 4: the rest of a counter's spec, and the members of distinct
	// counters.
	//
	// A member's row keeps hash, shard.ForMember(member) as a signed
	// bigint: its shard is hash mod shards read unsigned (see memberShard),
	// so a reshard recounts the members per shard without hashing them
	// again. The shard's value is the number of its members.
	`
ALTER TABLE shardcounter.counters
	ADD COLUMN kind text NOT NULL DEFAULT 'sum' CHECK (kind IN ('sum', 'distinct')),
	ADD COLUMN min bigint CHECK (min <= 0),
	ADD COLUMN max bigint CHECK (max >= 0),
	ADD COLUMN bucket interval,
	ADD COLUMN retention interval,
	ADD CHECK ((bucket IS NULL) = (retention IS NULL));
CREATE TABLE shardcounter.members (
	counter text COLLATE "C" NOT NULL REFERENCES shardcounter.counters (id) ON DELETE CASCADE,
	member  text COLLATE "C" NOT NULL,
	hash    bigint NOT NULL,
	PRIMARY KEY (counter, member)
);
`,
	// 5: the time buckets of windowed counters, one row per bucket and
	// shard, so a window takes writes as a counter does: a batch writes
	// the bucket rows of the shard rows it holds.
	`
CREATE TABLE shardcounter.buckets (
	counter text COLLATE "C" NOT NULL REFERENCES shardcounter.counters (id) ON DELETE CASCADE,
	start   timestamptz NOT NULL,
	shard   integer NOT NULL,
	value   bigint NOT NULL,
	PRIMARY KEY (counter, start, shard)
);
`,
	// 6: restart_batch fails the statement that calls it with SQLSTATE
	// SC001, so that a statement that finds items it does not decide
	// rolls its transaction back within the round trip that carries its
	// COMMIT (see plainSQL). Shard rows keep room for a new version of
	// each row on its page (fillfactor 90), so that updating a counter is
	// a HOT update, which writes no index entry.
	`
CREATE FUNCTION shardcounter.restart_batch(reason text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'restart the batch: %', reason USING ERRCODE = 'SC001';
END
$$;
ALTER TABLE shardcounter.shards SET (fillfactor = 90);
`,
	// 7: batch markers. Every batch Apply commits inserts its marker, a
	// random id, in the same transaction as its increments, so that after
	// a commit whose answer was lost the store can tell whether it
	// applied: the primary key lets exactly one of two commits of one
	// batch (the lost one landing late, and its re-apply) apply. A marker
	// begins with its time, so the primary key alone orders markers for
	// expiry (see markSQL): one index entry per batch, not two.
	`
CREATE TABLE shardcounter.batches (id bytea PRIMARY KEY);
`,
	// 8: approx counters. A shard of one keeps its HyperLogLog sketch
	// (package sketch's encoding, at most sketch.MaxEncoded bytes) in
	// shards.sketch, on the row a batch already locks to write the shard,
	// so the sketch's read-modify-write is under that row lock; the row's
	// value stays 0. The column is NULL on every other row and on a shard
	// that has no member yet. STORAGE EXTERNAL: a dense sketch is 16 KiB,
	// stored out of line, and not compressed on every write.
	`
ALTER TABLE shardcounter.counters DROP CONSTRAINT counters_kind_check,
	ADD CONSTRAINT counters_kind_check CHECK (kind IN ('sum', 'distinct', 'approx'));
ALTER TABLE shardcounter.shards ADD COLUMN sketch bytea CHECK (octet_length(sketch) <= 16392);
ALTER TABLE shardcounter.shards ALTER COLUMN sketch SET STORAGE EXTERNAL;
`,
}

// SchemaVersion is the schema version this package creates and expects.
const SchemaVersion = 8

// migrate brings the database's schema to SchemaVersion. It runs in one
// transaction under an advisory lock: concurrent callers wait for each
// other, and a failed migration leaves the schema as it was. It refuses a
// schema newer than this package knows, which a newer shardcounter wrote.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
CREATE SCHEMA IF NOT EXISTS shardcounter;
CREATE TABLE IF NOT EXISTS shardcounter.schema_migrations (
	version    integer PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
			return err
		}
		var version int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM shardcounter.schema_migrations").Scan(&version); err != nil {
			return err
		}
		if version > len(migrations) {
			return fmt.Errorf("the database's shardcounter schema is version %d, newer than this build knows (%d): upgrade shardcounter", version, len(migrations))
		}
		for v := version; v < len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return fmt.Errorf("migrate schema to version %d: %w", v+1, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO shardcounter.schema_migrations (version) VALUES ($1)", v+1); err != nil {
				return err
			}
		}
		return nil
	})
}
