#!/usr/bin/env bash
# bench-redis.sh reproduces the "Redis and Redis Cluster" figures of
# docs/BENCHMARKS.md in one session: it starts its own redis-server
# processes on free loopback ports (one standalone, and a cluster of three
# masters), runs shardcounter's naive path against one hot counter with
# 1 and 16 shards on each, runs redis-benchmark's INCR against the same
# servers, and prints how the cluster runs' script calls spread over the
# masters (INFO commandstats). Everything it started is stopped at the end.
#
#   scripts/bench-redis.sh      # CLIENTS (64), DURATION (10s), APPENDFSYNC (everysec)
set -euo pipefail
cd "$(dirname "$0")/.."

CLIENTS=${CLIENTS:-64}
DURATION=${DURATION:-10s}
APPENDFSYNC=${APPENDFSYNC:-everysec}
BASE=${BASE:-7400}   # ports BASE (standalone) and BASE+1..BASE+3 (cluster)
DIR=$(mktemp -d)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$DIR"
}
trap cleanup EXIT

bash scripts/ensure-redis.sh
go build -o "$DIR/shardcounter" ./cmd/shardcounter

start() { # port, extra config lines...
	local port=$1; shift
	mkdir -p "$DIR/$port"
	{
		echo "port $port"; echo "bind 127.0.0.1"; echo "dir $DIR/$port"; echo 'save ""'
		echo "appendonly yes"; echo "appendfsync $APPENDFSYNC"
		for line in "$@"; do echo "$line"; done
	} >"$DIR/$port/redis.conf"
	redis-server "$DIR/$port/redis.conf" >"$DIR/$port/log" 2>&1 &
	PIDS+=($!)
	for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.1; done
	echo "redis-server on port $port did not start: $(tail -3 "$DIR/$port/log")" >&2; exit 1
}

start "$BASE"
for i in 1 2 3; do start $((BASE + i)) "cluster-enabled yes" "cluster-config-file nodes.conf" "cluster-node-timeout 5000"; done
redis-cli --cluster create 127.0.0.1:$((BASE + 1)) 127.0.0.1:$((BASE + 2)) 127.0.0.1:$((BASE + 3)) --cluster-replicas 0 --cluster-yes >"$DIR/create.log"
for _ in $(seq 100); do
	redis-cli -p $((BASE + 1)) cluster info | grep -q cluster_state:ok && break; sleep 0.1
done

echo "== machine"
echo "nproc: $(nproc); $(free -g | awk 'NR==2 {print "memory: " $2 " GiB"}'); $(go version); $(redis-server --version | cut -d' ' -f1-3)"
echo "appendonly yes, appendfsync $APPENDFSYNC; $(uptime | sed 's/.*load/load/')"

STANDALONE="redis://127.0.0.1:$BASE/0"
CLUSTER="redis+cluster://127.0.0.1:$((BASE + 1))?addr=127.0.0.1:$((BASE + 2))&addr=127.0.0.1:$((BASE + 3))"

echo
echo "== shardcounter naive path, one hot counter, $CLIENTS writers, $DURATION per run: standalone"
"$DIR/shardcounter" bench --store "$STANDALONE" --path naive --shards 1,16 --clients "$CLIENTS" --duration "$DURATION"

echo
echo "== the same on the 3-master cluster"
for i in 1 2 3; do redis-cli -p $((BASE + i)) config resetstat >/dev/null; done
"$DIR/shardcounter" bench --store "$CLUSTER" --path naive --shards 1 --clients "$CLIENTS" --duration "$DURATION"
calls() { local n; n=$(redis-cli -p "$1" info commandstats | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p'); echo "${n:-0}"; }
echo "script calls per master, 1 shard:   $(calls $((BASE + 1))) / $(calls $((BASE + 2))) / $(calls $((BASE + 3)))"
for i in 1 2 3; do redis-cli -p $((BASE + i)) config resetstat >/dev/null; done
"$DIR/shardcounter" bench --store "$CLUSTER" --path naive --shards 16 --clients "$CLIENTS" --duration "$DURATION"
echo "script calls per master, 16 shards: $(calls $((BASE + 1))) / $(calls $((BASE + 2))) / $(calls $((BASE + 3)))"

echo
echo "== peer: redis-benchmark -t incr, $CLIENTS clients, the same servers"
secs=${DURATION%s}
n=$((secs * 30000))
printf 'standalone:        '; redis-benchmark -p "$BASE" -t incr -c "$CLIENTS" -n "$n" -q | tr '\r' '\n' | grep -a 'INCR:' | tail -1
printf 'cluster (one key): '; redis-benchmark -p $((BASE + 1)) -t incr -c "$CLIENTS" -n "$n" -q --cluster | tr '\r' '\n' | grep -a 'INCR:' | tail -1
