#!/usr/bin/env bash
# bench-resp-patterns.sh measures, with one client (cmd/respbench, go-redis)
# in one session, the Redis patterns redis-benchmark cannot send:
#
#   - tx-incr2: MULTI, INCR k1, INCR k2, EXEC over 1,000 keys
#   - hincrby: HINCRBY post:N likes 1, N Zipf 1.1 over FIELDS (1,000,000)
#   - hincrby-fields: HINCRBY likes N 1, N the same: one hash of FIELDS fields
#
# against
#
#   - redis-server, appendonly yes, appendfsync always (the reference)
#   - shardcounter serve --resp-listen, durable, on Pebble (the default store)
#   - shardcounter serve --resp-listen on a 3-master Redis Cluster of its own
#     (each master appendonly yes, appendfsync always): a transaction there
#     is one script on one master (docs/REDIS.md, "Transactions")
#
# CLIENTS (64) clients, DURATION (5s) a run, ROUNDS (1) rounds with the
# targets interleaved (the first round's writes create the keys, later
# rounds write keys that exist), WORKLOADS the workloads. It prints the machine and one line a run, and the
# ratio of each shardcounter figure to Redis's. Everything it started is
# stopped at the end.
#
#   scripts/bench-resp-patterns.sh
set -euo pipefail
[ -n "${DEBUG:-}" ] && set -x
cd "$(dirname "$0")/.."

CLIENTS=${CLIENTS:-64}
DURATION=${DURATION:-5s}
FIELDS=${FIELDS:-1000000}
ROUNDS=${ROUNDS:-1}
WORKLOADS=${WORKLOADS:-tx-incr2 hincrby hincrby-fields} # and incr, for reference
BASE=${BASE:-7600} # ports BASE..BASE+5
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
go build -o "$DIR/respbench" ./cmd/respbench

wait_port() { # port, log
	for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return; sleep 0.1; done
	echo "nothing answers on port $1: $(tail -3 "$2")" >&2
	exit 1
}

start_redis() { # port, extra config lines...
	local port=$1; shift
	mkdir -p "$DIR/$port"
	{
		echo "port $port"; echo "bind 127.0.0.1"; echo "dir $DIR/$port"; echo 'save ""'
		echo "appendonly yes"; echo "appendfsync always"
		for line in "$@"; do echo "$line"; done
	} >"$DIR/$port/redis.conf"
	redis-server "$DIR/$port/redis.conf" >"$DIR/$port/log" 2>&1 &
	PIDS+=($!)
	wait_port "$port" "$DIR/$port/log"
}

start_shardcounter() { # port, store DSN
	mkdir -p "$DIR/$1"
	"$DIR/shardcounter" serve --listen 127.0.0.1:0 --resp-listen "127.0.0.1:$1" --store "$2" >"$DIR/$1/log" 2>&1 &
	PIDS+=($!)
	wait_port "$1" "$DIR/$1/log"
}

start_redis "$BASE"
start_shardcounter $((BASE + 1)) "pebble:$DIR/$((BASE + 1))/pebble"
for i in 2 3 4; do start_redis $((BASE + i)) "cluster-enabled yes" "cluster-config-file nodes.conf" "cluster-node-timeout 5000"; done
redis-cli --cluster create 127.0.0.1:$((BASE + 2)) 127.0.0.1:$((BASE + 3)) 127.0.0.1:$((BASE + 4)) --cluster-replicas 0 --cluster-yes >"$DIR/create.log"
for _ in $(seq 100); do
	redis-cli -p $((BASE + 2)) cluster info | grep -q cluster_state:ok && break; sleep 0.1
done
start_shardcounter $((BASE + 5)) "redis+cluster://127.0.0.1:$((BASE + 2))?addr=127.0.0.1:$((BASE + 3))&addr=127.0.0.1:$((BASE + 4))"

echo "== machine"
echo "nproc: $(nproc); $(free -g | awk 'NR==2 {print "memory: " $2 " GiB"}'); $(go version); $(redis-server --version | cut -d' ' -f1-3); $(uptime | sed 's/.*load/load/')"
echo "== $CLIENTS clients, $DURATION a run"

declare -A RATE
bench() { # name, port, workload, args...
	local name=$1 port=$2 workload=$3; shift 3
	local line
	line=$("$DIR/respbench" -addr "127.0.0.1:$port" -name "$name" -workload "$workload" -clients "$CLIENTS" -duration "$DURATION" "$@")
	echo "$line"
	RATE["$name $workload"]=$(echo "$line" | awk '{for (i = 1; i < NF; i++) if ($(i+1) == "ops/s") print $i}')
}
for round in $(seq "$ROUNDS"); do
	for w in $WORKLOADS; do
		bench "redis always" "$BASE" "$w" -fields "$FIELDS"
		bench "shardcounter pebble" $((BASE + 1)) "$w" -fields "$FIELDS"
		bench "shardcounter redis-cluster" $((BASE + 5)) "$w" -fields "$FIELDS"
	done
done
echo "== ratios to redis always (last round)"
for w in $WORKLOADS; do
	for t in "shardcounter pebble" "shardcounter redis-cluster"; do
		awk -v a="${RATE[$t $w]}" -v b="${RATE[redis always $w]}" -v n="$t $w" 'BEGIN { printf "%-36s %.2fx\n", n, a / b }'
	done
done
