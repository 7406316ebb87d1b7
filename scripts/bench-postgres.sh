#!/bin/sh
# bench-postgres.sh reproduces the "PostgreSQL naive path" figures of
# docs/BENCHMARKS.md in one session: the machine, shardcounter's naive path
# (64 writers, one counter, shards 1, 4, 16, 64), and pgbench's plain
# UPDATE of one row and of 64 rows as peers, with the same clients and
# duration.
#
#   scripts/bench-postgres.sh            # from the repository's root
#
# Environment: SHARDCOUNTER_TEST_POSTGRES (the server, as for the tests),
# CLIENTS (64), DURATION in seconds (10), OUT (a directory for the JSON
# report and the pgbench logs; default a temporary one).
set -eu

URL=${SHARDCOUNTER_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
CLIENTS=${CLIENTS:-64}
DURATION=${DURATION:-10}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

echo "== machine"
echo "nproc: $(nproc)"
free -g | sed -n 2p | awk '{print "memory: " $2 " GiB"}'
go version
psql -X -A -t -d "$URL" -c 'SELECT version()'
psql -X -A -t -d "$URL" <<'EOF'
SELECT name || '=' || setting || coalesce(unit, '') FROM pg_settings
WHERE name IN ('synchronous_commit', 'fsync', 'wal_sync_method', 'commit_delay', 'max_connections', 'shared_buffers')
ORDER BY name;
EOF
uptime

echo
echo "== shardcounter naive path: $CLIENTS writers, one counter, ${DURATION}s per shard count"
SHARDCOUNTER_BENCH=1 SHARDCOUNTER_BENCH_CLIENTS=$CLIENTS SHARDCOUNTER_BENCH_DURATION=${DURATION}s \
	SHARDCOUNTER_BENCH_JSON=$OUT/naive.json \
	go test ./postgres -run '^TestBenchNaive$' -v -count=1 -timeout 30m | grep -v -e '^=== RUN' -e '^--- PASS' -e '^PASS' -e '^ok'

echo
echo "== peer: pgbench, a plain UPDATE n = n + 1 of one row and of one of 64 rows"
psql -X -q -d "$URL" -v ON_ERROR_STOP=1 <<'EOF'
SET client_min_messages = warning;
DROP TABLE IF EXISTS shardcounter_pgbench_peer;
CREATE TABLE shardcounter_pgbench_peer (id integer PRIMARY KEY, n bigint NOT NULL);
INSERT INTO shardcounter_pgbench_peer SELECT g, 0 FROM generate_series(1, 64) AS g;
EOF
printf 'UPDATE shardcounter_pgbench_peer SET n = n + 1 WHERE id = 1;\n' >"$OUT/one-row.sql"
printf '\\set r random(1, 64)\nUPDATE shardcounter_pgbench_peer SET n = n + 1 WHERE id = :r;\n' >"$OUT/64-rows.sql"
for run in "one-row $((CLIENTS / 2))" "one-row $CLIENTS" "64-rows $CLIENTS"; do
	set -- $run
	pgbench -n -M prepared -c "$2" -j 2 -T "$DURATION" -f "$OUT/$1.sql" "$URL" >"$OUT/pgbench-$1-$2.log" 2>&1
	printf '%-8s clients=%-3s %s, %s\n' "$1" "$2" \
		"$(grep -o 'tps = [0-9.]*' "$OUT/pgbench-$1-$2.log" | head -n 1)" \
		"$(grep -o 'latency average = [0-9.]* ms' "$OUT/pgbench-$1-$2.log")"
done
psql -X -q -d "$URL" -c 'DROP TABLE shardcounter_pgbench_peer'
echo
echo "JSON report and pgbench logs in $OUT"
