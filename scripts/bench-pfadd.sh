#!/usr/bin/env bash
# bench-pfadd.sh measures PFADD of N distinct members into one hot key,
# CLIENTS connections, against shardcounter serve --resp-listen on Pebble
# (durable, the default) and redis-server with appendonly yes and
# appendfsync always, both with their files in one temporary directory
# (one disk), driven by the same client (scripts/pfadd). It prints each
# target's rate, the estimate against the truth (N), and shardcounter's
# ratio to Redis; docs/RESP.md quotes the figures.
#
#   scripts/bench-pfadd.sh      # N (1000000), CLIENTS (64), BASE port (free, from 17600)
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-1000000}
CLIENTS=${CLIENTS:-64}
BASE=${BASE:-$((17600 + RANDOM % 2000))}
DIR=$(mktemp -d)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$DIR"
}
trap cleanup EXIT

bash scripts/ensure-redis.sh >/dev/null
go build -o "$DIR/shardcounter" ./cmd/shardcounter
go build -o "$DIR/pfadd" ./scripts/pfadd

wait_port() { # port, log
	for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return; sleep 0.1; done
	echo "nothing answers on port $1: $(tail -3 "$2")" >&2
	exit 1
}

# Other runs on the machine may hold ports: take two free ones.
busy() { redis-cli -p "$1" ping >/dev/null 2>&1 || (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
while busy "$BASE" || busy $((BASE + 1)); do BASE=$((BASE + 2)); done
mkdir -p "$DIR/redis" "$DIR/sc"
printf 'port %s\nbind 127.0.0.1\ndir %s\nsave ""\nappendonly yes\nappendfsync always\n' "$BASE" "$DIR/redis" >"$DIR/redis/redis.conf"
redis-server "$DIR/redis/redis.conf" >"$DIR/redis/log" 2>&1 &
PIDS+=($!)
wait_port "$BASE" "$DIR/redis/log"
"$DIR/shardcounter" serve --listen 127.0.0.1:0 --resp-listen "127.0.0.1:$((BASE + 1))" --store "pebble:$DIR/sc/pebble" ${SERVE_FLAGS:-} >"$DIR/sc/log" 2>&1 &
PIDS+=($!)
wait_port $((BASE + 1)) "$DIR/sc/log"

echo "machine: $(nproc) cores, $(uname -sr); N=$N CLIENTS=$CLIENTS; files in $DIR"
kill -0 "${PIDS[0]}" && kill -0 "${PIDS[1]}" # both still running: the ports are theirs
sc=$("$DIR/pfadd" -addr "127.0.0.1:$((BASE + 1))" -n "$N" -c "$CLIENTS" -key hll)
echo "shardcounter pebble: $sc"
rd=$("$DIR/pfadd" -addr "127.0.0.1:$BASE" -n "$N" -c "$CLIENTS" -key hll)
echo "redis always:        $rd"
rate() { sed -E 's/.* rps=([0-9]+) .*/\1/' <<<"$1"; }
awk -v a="$(rate "$sc")" -v b="$(rate "$rd")" 'BEGIN { printf "ratio shardcounter/redis: %.2f\n", a / b }'
