#!/usr/bin/env bash
# scripts/bench-all.sh regenerates the results section of docs/BENCHMARKS.md
# and its charts (docs/bench-*.svg) from scratch on this machine, in one
# session: shardcounter's paths against the peers, with the same clients
# and duration, for three workloads.
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
clients=${CLIENTS:-64}
server=${SHARDCOUNTER_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}

bash scripts/ensure-postgres.sh
bash scripts/ensure-redis.sh

tmp=$(mktemp -d)
db=shardcounter_bench_all_$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  psql -X -q -d "$server" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# redis FSYNC VAR: start a redis-server whose AOF is fsynced so, and set VAR
# to its URL. Not in a $(...) subshell: the server's pid must reach
# cleanup.
redis() {
  local port dir
  port=$(freeport)
  dir="$tmp/redis-$1"
  mkdir -p "$dir"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly yes --appendfsync "$1" \
    --protected-mode no --logfile "$dir/redis.log" >/dev/null 2>&1 </dev/null &
  pids+=($!)
  for _ in $(seq 100); do
    if redis-cli -p "$port" ping >/dev/null 2>&1; then
      printf -v "$2" 'redis://127.0.0.1:%s' "$port"
      return
    fi
    sleep 0.1
  done
  echo "bench-all: redis-server (appendfsync $1) did not start: see $dir/redis.log" >&2
  exit 1
}
redis always always
redis everysec everysec

psql -X -q -d "$server" -v ON_ERROR_STOP=1 -c "CREATE DATABASE $db"
store=$(python3 -c 'import sys, urllib.parse as u; p=u.urlsplit(sys.argv[1]); q=u.parse_qsl(p.query); q=[kv for kv in q if kv[0]!="pool_max_conns"]+[("pool_max_conns",sys.argv[3])]; print(u.urlunsplit(p._replace(path="/"+sys.argv[2], query=u.urlencode(q))))' "$server" "$db" "$clients")

go build -o "$tmp/shardcounter" ./cmd/shardcounter

# Every workload runs shardcounter's paths on PostgreSQL, then the peers:
# Redis INCR (appendfsync always and everysec), a PostgreSQL single-row
# UPDATE on the same server, and the bare HTTP handler.
peers=(--peer redis-incr --peer-redis "$always" --peer-redis "$everysec" --peer postgres-update --peer http-bare)
# Shown in the doc: the same command with placeholders for this session's
# ports and database.
shown_peers='--peer redis-incr --peer-redis $REDIS_ALWAYS --peer-redis $REDIS_EVERYSEC --peer postgres-update --peer http-bare'
common=(--store "$store" --clients "$clients" --duration "$duration")
shown_common="--store \$POSTGRES --clients $clients --duration $duration"

titles=() jsons=() svgs=() cmds=()
workload() { # workload NAME TITLE ARGS...
  local name=$1 title=$2
  shift 2
  echo "== $title" >&2
  "$tmp/shardcounter" bench "${common[@]}" "$@" "${peers[@]}" \
    --json "$tmp/$name.json" --svg "docs/bench-$name.svg" --title "$title"
  titles+=("$title") jsons+=("$tmp/$name.json") svgs+=("bench-$name.svg")
  cmds+=("shardcounter bench $shown_common $* $shown_peers --json $name.json --svg bench-$name.svg")
}

workload hot "One hot counter: +1 writes" \
  --path naive --path engine --path http --shards 1,4,16,64
workload zipf "100,000 counters, Zipf s=1.1: +1 writes" \
  --path naive --path engine --path http --shards 1,16 --counters 100000 --zipf 1.1
workload mix "One hot counter: 90% cached reads, 10% +1 writes" \
  --path naive --path engine --path http --shards 1,64 --read-ratio 0.9 --read-consistency cached

args=(-doc docs/BENCHMARKS.md)
for i in "${!titles[@]}"; do
  args+=(-title "${titles[$i]}" -json "${jsons[$i]}" -svg "${svgs[$i]}" -cmd "${cmds[$i]}")
done
go run ./internal/cmd/benchdoc "${args[@]}"
echo "bench-all: docs/BENCHMARKS.md and docs/bench-*.svg regenerated" >&2
