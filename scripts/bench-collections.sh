#!/bin/sh
# bench-collections.sh measures time-ordered collections, the figures of
# docs/COLLECTIONS.md ("Measured"), in one run: for shard counts 1, 3 and
# 16, 64 writers insert documents stamped with the server's clock (a
# monotonically increasing timestamp) for DURATION, the collection is
# filled to DOCUMENTS, and queries with limit 5 and 100 (filter on an
# index holding a third of the documents, newest first) are timed — on
# PostgreSQL, and on a 3-master Redis Cluster that the test harness starts.
#
#   scripts/bench-collections.sh            # from the repository's root
#
# Environment: SHARDCOUNTER_TEST_POSTGRES (the server, as for the tests),
# and the SHARDCOUNTER_BENCH_* knobs of bench.CollectionsConfigFromEnv:
# WRITERS (64), DURATION (10s), SHARDS (1,3,16), DOCUMENTS (100000),
# QUERY_CLIENTS (4), QUERY_DURATION (5s), LIMITS (5,100). OUT is a
# directory for the JSON reports (default a temporary one).
set -eu
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

echo "== machine"
echo "nproc: $(nproc)"
free -g | sed -n 2p | awk '{print "memory: " $2 " GiB"}'
go version
redis-server --version
uptime

filter() { grep -v -e '^=== RUN' -e '^--- PASS' -e '^PASS' -e '^ok'; }

echo
echo "== PostgreSQL"
SHARDCOUNTER_BENCH=1 SHARDCOUNTER_BENCH_JSON=$OUT/postgres.json \
	go test ./postgres -run '^TestBenchCollections$' -v -count=1 -timeout 180m | filter

echo
echo "== Redis Cluster, 3 masters"
SHARDCOUNTER_BENCH=1 SHARDCOUNTER_BENCH_JSON=$OUT/redis-cluster.json \
	go test ./redis -run '^TestBenchCollections$' -v -count=1 -timeout 180m | filter

echo
echo "JSON reports in $OUT"
