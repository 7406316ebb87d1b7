#!/usr/bin/env bash
# scripts/bench-workloads.sh regenerates the "product workloads" section of
# docs/BENCHMARKS.md and its charts (docs/bench-w-*.svg) from scratch on
# this machine, in one session: shardcounter's engine, HTTP and RESP paths
# on PostgreSQL, bolt and Redis, each run next to the peers a user would
# pick instead, with the same clients and duration.
#
#   scripts/bench-workloads.sh                   # 10s a run, 1,000,000 counters: an hour or more
#   COUNTERS=100000 scripts/bench-workloads.sh 2s   # a quick look
#   ONLY=timeline scripts/bench-workloads.sh     # one workload (million, timeline, likes, bounds, resp)
#
# The workloads (issues 12 to 15):
#   million   COUNTERS counters, Zipf s=1.1, every one written once before
#             the clock starts (--prefill): +1 writes; with the memory of
#             the process serving them before, during and after
#   timeline  the same counters: 90% cached batch reads of 20, 10% +1
#             writes; peers MGET + INCR and SELECT ... = ANY + UPDATE
#   likes     adds to one distinct counter of a million possible members,
#             next to +1 on a sum counter; peers SADD/SCARD and INSERT ...
#             ON CONFLICT DO NOTHING/count(*)
#   bounds    one hot counter, half +1 and half −1: plain, min=0 and a
#             window of 1m buckets kept a day
#   resp      one hot counter over RESP (go-redis), one command a round
#             trip and pipelines of 16, against Redis the same way
#
# It starts three redis-servers of its own (appendonly yes: the peers'
# appendfsync always and everysec, and the Redis store's always), uses the
# local PostgreSQL with databases of its own (dropped at the end), and a
# bolt file per workload in a temporary directory. Runs keep their counters
# (--keep-counters): the stores are thrown away after. Environment:
# CLIENTS (64), COUNTERS (1000000), ONLY, SHARDCOUNTER_TEST_POSTGRES.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-10s}
counters=${COUNTERS:-1000000}
only=${ONLY:-}
source scripts/bench-lib.sh

bench_redis always always
bench_redis everysec everysec
bench_redis always redis_store

want() { [ -z "$only" ] || [ "$only" = "$1" ]; }

# store NAME sets dsn (and shown, the doc's placeholder) to a fresh store
# of that kind: a new PostgreSQL database or bolt file per workload; the
# Redis store is flushed.
store() {
  case $1 in
  postgres) bench_database dsn; shown='$POSTGRES' ;;
  bolt) dsn="bolt:$tmp/bolt-${#titles[@]}.db"; shown='bolt:$FILE' ;;
  redis) redis-cli -u "$redis_store" flushall >/dev/null; dsn=$redis_store; shown='$REDIS_STORE' ;;
  esac
}

# Every run: the Redis peers on the two servers, PostgreSQL's on a
# database of its own. The doc shows placeholders for this session's ports
# and databases.
peer_servers() {
  bench_database peer_pg
  servers=(--peer-redis "$always" --peer-redis "$everysec" --peer-postgres "$peer_pg")
  shown_servers='--peer-redis $REDIS_ALWAYS --peer-redis $REDIS_EVERYSEC --peer-postgres $PEER_POSTGRES'
}

# run NAME TITLE STORE ARGS...: one workload on one store, with the peers.
run() {
  local name=$1 title=$2 kind=$3
  shift 3
  store "$kind"
  peer_servers
  bench_run "w-$name-$kind" "$title, on $kind" "--store $shown --clients $clients --duration $duration $* $shown_servers" \
    --store "$dsn" --clients "$clients" --duration "$duration" "$@" "${servers[@]}"
}

n=$(python3 -c 'import sys; print(f"{int(sys.argv[1]):,}")' "$counters")
for kind in postgres bolt redis; do
  want million && run million "$n counters, Zipf s=1.1, all written once before: +1 writes" "$kind" \
    --path engine --path http --path resp --shards 1 --counters "$counters" --zipf 1.1 --prefill --keep-counters \
    --peer redis-incr --peer postgres-update
  want timeline && run timeline "Timelines over $n counters, Zipf s=1.1: 90% cached reads of 20, 10% +1 writes" "$kind" \
    --path engine --path http --path resp --shards 1 --counters "$counters" --zipf 1.1 --prefill --keep-counters \
    --workload timeline --peer redis-incr --peer postgres-update
  want likes && run likes "Likes: adds to one distinct counter of 1,000,000 possible members, next to +1 on one sum counter" "$kind" \
    --path engine --path http --path resp --shards 1,16 --kind sum --kind distinct --members 1000000 --keep-counters \
    --peer redis-incr --peer redis-sadd --peer postgres-update --peer postgres-insert
  want bounds && run bounds "One hot counter, +1/−1: plain, min=0 and a window of 1m buckets kept a day" "$kind" \
    --path engine --path http --shards 1,16 --min 0 --window 1m:1d --keep-counters \
    --peer redis-incr --peer postgres-update
done
for kind in bolt postgres; do
  for p in 1 16; do
    want resp && run "resp-p$p" "One hot counter over RESP, $p command(s) a round trip" "$kind" \
      --path resp --shards 1,16 --pipeline "$p" --keep-counters --peer redis-incr
  done
done

if [ -z "$only" ]; then
  bench_doc bench-workloads scripts/bench-workloads.sh
else
  echo "$0: ONLY=$only: docs/BENCHMARKS.md left as it is: the tables are above" >&2
fi
