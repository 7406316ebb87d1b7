#!/usr/bin/env bash
# bench-resp.sh measures shardcounter's Redis protocol front end against
# Redis itself, with the same client (redis-benchmark), in one run:
#
#   - shardcounter serve --resp-listen, durable, on Pebble (the default store)
#   - shardcounter serve --resp-listen, durable, on bolt
#   - shardcounter serve --resp-listen, durable, on PostgreSQL
#   - shardcounter serve --resp-listen on a redis-server of its own
#     (appendonly yes, appendfsync always): shardcounter in front of Redis
#   - redis-server, appendonly yes, appendfsync always
#   - redis-server, appendonly yes, appendfsync everysec
#
# each with redis-benchmark -t incr,get, CLIENTS connections, at -P 1 and
# -P 16 (pipelines of 16). It prints the machine, a table of requests per
# second and latencies, and each figure's ratio to Redis with appendfsync
# always; the table is what docs/BENCHMARKS.md quotes. Everything it
# started is stopped at the end.
#
#   scripts/bench-resp.sh      # CLIENTS (64), N1 (100000), N16 (400000), ROUNDS (1)
#
# N1 and N16 are the requests of each run at -P 1 and -P 16; ROUNDS repeats
# the whole set, targets interleaved, so that a noisy moment of a shared
# machine does not fall on one target alone. PostgreSQL is
# $SHARDCOUNTER_TEST_POSTGRES (as for the tests), or the server
# scripts/ensure-postgres.sh sets up; the script uses a database of its
# own there, shardcounter_bench_resp.
set -euo pipefail
[ -n "${DEBUG:-}" ] && set -x
cd "$(dirname "$0")/.."

CLIENTS=${CLIENTS:-64}
N1=${N1:-100000}
N16=${N16:-400000}
ROUNDS=${ROUNDS:-1}
BASE=${BASE:-7500} # ports BASE..BASE+6
PG=${SHARDCOUNTER_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
DIR=$(mktemp -d)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$DIR"
}
trap cleanup EXIT

bash scripts/ensure-redis.sh
bash scripts/ensure-redis-tools.sh
go build -o "$DIR/shardcounter" ./cmd/shardcounter

# The PostgreSQL database of this benchmark, made once.
PGDB=shardcounter_bench_resp
psql -X -q -d "$PG" -tAc "SELECT 1 FROM pg_database WHERE datname = '$PGDB'" | grep -q 1 ||
	psql -X -q -d "$PG" -c "CREATE DATABASE $PGDB"
PGBENCH=$(echo "$PG" | sed -E "s#^(postgres(ql)?://[^/]*)/[^?]*#\1/$PGDB#")

wait_port() { # port, log
	for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return; sleep 0.1; done
	echo "nothing answers on port $1: $(tail -3 "$2")" >&2
	exit 1
}

start_redis() { # port, appendfsync
	mkdir -p "$DIR/$1"
	printf 'port %s\nbind 127.0.0.1\ndir %s\nsave ""\nappendonly yes\nappendfsync %s\n' "$1" "$DIR/$1" "$2" >"$DIR/$1/redis.conf"
	redis-server "$DIR/$1/redis.conf" >"$DIR/$1/log" 2>&1 &
	PIDS+=($!)
	wait_port "$1" "$DIR/$1/log"
}

start_shardcounter() { # port, store DSN
	mkdir -p "$DIR/$1"
	"$DIR/shardcounter" serve --listen 127.0.0.1:0 --resp-listen "127.0.0.1:$1" --store "$2" >"$DIR/$1/log" 2>&1 &
	PIDS+=($!)
	wait_port "$1" "$DIR/$1/log"
}

TARGETS=("shardcounter pebble:$((BASE + 6))" "shardcounter bolt:$BASE" "shardcounter postgres:$((BASE + 1))" "shardcounter redis:$((BASE + 4))" "redis always:$((BASE + 2))" "redis everysec:$((BASE + 3))")
start_shardcounter $((BASE + 6)) "pebble:$DIR/$((BASE + 6))/pebble"
start_shardcounter "$BASE" "bolt:$DIR/$BASE/shardcounter.db"
start_shardcounter $((BASE + 1)) "$PGBENCH"
start_redis $((BASE + 2)) always
start_redis $((BASE + 3)) everysec
start_redis $((BASE + 5)) always # the store of "shardcounter redis"
start_shardcounter $((BASE + 4)) "redis://127.0.0.1:$((BASE + 5))/0"

echo "== machine (shared with other engineers' builds and tests while this ran: ratios within the run are what count)"
echo "nproc: $(nproc); $(free -g | awk 'NR==2 {print "memory: " $2 " GiB"}'); $(go version); $(redis-server --version | cut -d' ' -f1-3)"
echo "postgres: $(psql -X -A -t -d "$PG" -c 'SHOW server_version') synchronous_commit=$(psql -X -A -t -d "$PG" -c 'SHOW synchronous_commit')"
echo "before: $(uptime | sed 's/.*load/load/')"

RESULTS=$DIR/results.csv
FAILURES=$DIR/failures
: >"$FAILURES"
for round in $(seq "$ROUNDS"); do
	for P in 1 16; do
		N=$N1
		[ "$P" = 16 ] && N=$N16
		for t in "${TARGETS[@]}"; do
			name=${t%:*}
			port=${t##*:}
			for test in incr get; do
				# One test a run, so that a target failing one (redis-benchmark
				# stops at the first error reply) keeps the other's figure.
				# Columns: "test","rps","avg_latency_ms","min_latency_ms",
				# "p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
				if out=$(redis-benchmark -p "$port" -t "$test" -c "$CLIENTS" -n "$N" -P "$P" --csv 2>&1); then
					echo "$out" | tr -d '"' | awk -F, -v name="$name" -v p="$P" -v r="$round" 'NR > 1 && $2 ~ /^[0-9.]+$/ { print r "," name "," p "," $1 "," $2 "," $5 "," $7 }' >>"$RESULTS"
				else
					echo "$name, -t $test -P $P: $(echo "$out" | grep -v '^"' | tail -1)" >>"$FAILURES"
				fi
			done
		done
	done
done
echo "after: $(uptime | sed 's/.*load/load/')"

echo
echo "== redis-benchmark -t incr,get -c $CLIENTS, requests per second (best of $ROUNDS), p50 and p99 in ms, and the ratio to Redis appendfsync always"
echo
echo "| target | test | -P | requests/s | p50 ms | p99 ms | × Redis always |"
echo "|---|---|---:|---:|---:|---:|---:|"
awk -F, '
	{ k = $2 SUBSEP $4 SUBSEP $3; if (!(k in rps) || $5 > rps[k]) { rps[k] = $5; p50[k] = $6; p99[k] = $7 }; if (!(k in seen)) { order[n++] = k; seen[k] = 1 } }
	END {
		for (i = 0; i < n; i++) {
			split(order[i], f, SUBSEP)
			ref = rps["redis always" SUBSEP f[2] SUBSEP f[3]]
			printf "| %s | %s | %s | %.0f | %s | %s | %.2f× |\n", f[1], f[2], f[3], rps[order[i]], p50[order[i]], p99[order[i]], (ref > 0 ? rps[order[i]] / ref : 0)
		}
	}' "$RESULTS" | sort -t'|' -k4,4n -k3,3 -s

if [ -s "$FAILURES" ]; then
	echo
	echo "== runs that failed (no figure in the table)"
	sort -u "$FAILURES"
fi

echo
echo "== shardcounter's engine after the runs (INFO engine): the group commit at work"
for t in "${TARGETS[@]:0:4}"; do
	echo "${t%:*}: $(redis-cli -p "${t##*:}" info engine | tr -d '\r' | grep -E 'engine_(writes|commits|mean_writes_per_commit|mean_commit_ms):' | tr '\n' ' ')"
done
