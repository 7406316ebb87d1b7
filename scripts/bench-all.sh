#!/usr/bin/env bash
# scripts/bench-all.sh regenerates the results section of docs/BENCHMARKS.md
# and its charts (docs/bench-*.svg) from scratch on this machine, in one
# session: shardcounter's paths against the peers, with the same clients
# and duration, for three workloads on one hot counter or 100,000.
# scripts/bench-workloads.sh does the same for the product's workloads (a
# million counters, timelines, likes, bounds and windows).
#
#   scripts/bench-all.sh            # 10s a run, about 8 minutes
#   scripts/bench-all.sh 2s         # a quick look, about 2 minutes
#
# It needs the local PostgreSQL (scripts/ensure-postgres.sh starts it; it
# creates and drops a database of its own there) and redis-server
# (scripts/ensure-redis.sh): it starts two of its own, appendonly yes with
# appendfsync always and everysec, on free loopback ports in a temporary
# directory, and stops them at the end. Environment: CLIENTS (64),
# SHARDCOUNTER_TEST_POSTGRES (the server, as for the tests).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-10s}
source scripts/bench-lib.sh

bench_redis always always
bench_redis everysec everysec
bench_database store

# Every workload runs shardcounter's paths on PostgreSQL, then the peers:
# Redis INCR (appendfsync always and everysec), a PostgreSQL single-row
# UPDATE on the same server, and the bare HTTP handler. The doc shows the
# command with placeholders for this session's ports and database.
peers=(--peer redis-incr --peer-redis "$always" --peer-redis "$everysec" --peer postgres-update --peer http-bare)
shown_peers='--peer redis-incr --peer-redis $REDIS_ALWAYS --peer-redis $REDIS_EVERYSEC --peer postgres-update --peer http-bare'
common=(--store "$store" --clients "$clients" --duration "$duration")
shown_common="--store \$POSTGRES --clients $clients --duration $duration"

workload() { # workload NAME TITLE ARGS...
  local name=$1 title=$2
  shift 2
  bench_run "$name" "$title" "$shown_common $* $shown_peers" "${common[@]}" "$@" "${peers[@]}"
}

workload hot "One hot counter: +1 writes" \
  --path naive --path engine --path http --shards 1,4,16,64
workload zipf "100,000 counters, Zipf s=1.1: +1 writes" \
  --path naive --path engine --path http --shards 1,16 --counters 100000 --zipf 1.1
workload mix "One hot counter: 90% cached reads, 10% +1 writes" \
  --path naive --path engine --path http --shards 1,64 --read-ratio 0.9 --read-consistency cached

bench_doc bench-all scripts/bench-all.sh
