#!/usr/bin/env bash
# scripts/bench-all.sh measures every product workload on every store, with
# the peers a user would run instead, in one session, and writes
# docs/BENCHMARKS.md and its charts (docs/bench/*.svg) from the results.
#
#   scripts/bench-all.sh            # 10 s runs over 1,000,000 counters: the better part of an hour
#   scripts/bench-all.sh --quick    # 2 s runs over 100,000 counters: about ten minutes
#   STORES="pebble redis" scripts/bench-all.sh --quick   # some stores: the page shows those only
#   DURATION=1s COUNTERS=1000 scripts/bench-all.sh --quick  # a smoke test of the script
#
# The workloads (cmd/benchdoc/notes.md says what each measures and
# what bounds it): hot, million, timeline, likes, bounds, resp16. The
# stores: pebble, bolt, postgres, redis, redis+cluster, each fresh for
# every workload (a Pebble directory, a bolt file, a PostgreSQL database, a
# flushed Redis and Redis Cluster); shardcounter's engine, http and resp
# paths run on each, then the peers once per workload.
#
# It needs the local PostgreSQL (scripts/ensure-postgres.sh starts it; the
# script creates and drops databases of its own) and redis-server
# (scripts/ensure-redis.sh): it starts its own Redis servers (append-only
# file on: the peers' appendfsync always and everysec, the Redis store's
# always) and a 3-master Redis Cluster, on free loopback ports, and stops
# them at the end. Environment: CLIENTS (64), STORES, DURATION, COUNTERS,
# SHARDCOUNTER_TEST_POSTGRES (the server, as for the tests).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=10s counters=1000000 mode=""
case "${1:-}" in
--quick) duration=2s counters=100000 mode="--quick" ;;
"") ;;
*) echo "usage: scripts/bench-all.sh [--quick]" >&2; exit 2 ;;
esac
duration=${DURATION:-$duration} counters=${COUNTERS:-$counters}
# The page names every override, so that a partial run never passes for a
# whole one.
command="scripts/bench-all.sh${mode:+ $mode}"
for v in COUNTERS DURATION STORES CLIENTS; do
  [ -z "${!v:-}" ] || command="$v=\"${!v}\" $command"
done
stores=${STORES:-pebble bolt postgres redis redis+cluster}
source scripts/bench-lib.sh

bench_redis always always
bench_redis everysec everysec
bench_redis always redis_store
bench_cluster cluster_store

# store KIND sets dsn to a fresh store of that kind, and shown to the
# page's placeholder for it.
store() {
  case $1 in
  pebble) dsn="pebble:$tmp/pebble-$RANDOM$RANDOM"; shown='pebble:$DIR' ;;
  bolt) dsn="bolt:$tmp/bolt-$RANDOM$RANDOM.db"; shown='bolt:$FILE' ;;
  postgres) bench_database dsn; shown='$POSTGRES' ;;
  redis) redis-cli -u "$redis_store" flushall >/dev/null; dsn=$redis_store; shown='$REDIS' ;;
  redis+cluster) bench_cluster_flush; dsn=$cluster_store; shown='$REDIS_CLUSTER' ;;
  esac
}

# workload NAME TITLE PATHS PEERS -- ARGS...: the workload on every store
# through shardcounter's PATHS, then its PEERS once (both comma-separated),
# with the same ARGS.
workload() {
  local name=$1 title=$2 paths=$3 peers=$4
  shift 5
  local common=(--clients "$clients" --duration "$duration" --keep-counters "$@")
  local ours=() shown_ours=""
  for p in ${paths//,/ }; do ours+=(--path "$p"); shown_ours+=" --path $p"; done
  for kind in $stores; do
    store "$kind"
    bench_run "$name" "$title" "$name-$kind" "--store $shown ${common[*]}$shown_ours" --store "$dsn" "${common[@]}" "${ours[@]}"
  done
  bench_database peer_pg
  local theirs=(--path peer) shown_theirs=" --path peer"
  for p in ${peers//,/ }; do theirs+=(--peer "$p"); shown_theirs+=" --peer $p"; done
  bench_run "$name" "$title" "$name-peers" "${common[*]}$shown_theirs --peer-redis \$REDIS_ALWAYS --peer-redis \$REDIS_EVERYSEC --peer-postgres \$PEER_POSTGRES" \
    "${common[@]}" "${theirs[@]}" --peer-redis "$always" --peer-redis "$everysec" --peer-postgres "$peer_pg"
}

n=$(python3 -c 'import sys; print(f"{int(sys.argv[1]):,}")' "$counters")
all=engine,http,resp
workload hot "One hot counter: +1 writes" $all redis-incr,postgres-update,http-bare -- \
  --shards 1,16
workload million "$n counters, Zipf s=1.1: +1 writes" $all redis-incr,postgres-update -- \
  --shards 1 --counters "$counters" --zipf 1.1 --prefill
workload timeline "Timelines over $n counters: 90% cached reads of 20, 10% +1 writes" $all redis-incr,postgres-update -- \
  --shards 1 --counters "$counters" --zipf 1.1 --prefill --workload timeline
workload likes "Likes: a distinct counter of 1,000,000 possible members, next to a sum" $all redis-incr,redis-sadd,postgres-update,postgres-insert -- \
  --shards 16 --kind sum --kind distinct --members 1000000
workload bounds "One hot counter, +1/−1: plain, min=0, a window of 1m buckets" engine,http redis-incr,postgres-update -- \
  --shards 16 --min 0 --window 1m:1d
workload resp16 "One hot counter over RESP, 16 commands a round trip" resp redis-incr -- \
  --shards 1,16 --pipeline 16

bench_page "$command"
