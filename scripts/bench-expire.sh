#!/usr/bin/env bash
# bench-expire.sh measures expiry over the Redis protocol against Redis
# itself, in one run, on the same disk:
#
#   - shardcounter serve --resp-listen, durable, on Pebble (the default store)
#   - redis-server, appendonly yes, appendfsync always
#
# with the same clients:
#
#   - the rate-limit pattern, MULTI, INCR k, INCR k:b, EXPIRE k 60, EXEC,
#     from CLIENTS connections over KEYS keys (cmd/respbench: redis-benchmark
#     cannot send a transaction), and the same transaction without EXPIRE,
#     which shows what the transaction costs apart from its deadline;
#   - redis-benchmark -c CLIENTS -r KEYS EXPIRE key:__rand_int__ 60, on keys
#     that exist (made by INCR first), and INCR key:__rand_int__ alongside.
#
# It prints the machine, the tables, and each figure's ratio to Redis
# with appendfsync always; docs/RESP.md ("Expiry") quotes them.
# Everything it started is stopped at the end.
#
#   scripts/bench-expire.sh    # CLIENTS (64), KEYS (1000), SECONDS (5), N (50000), ROUNDS (1)
set -euo pipefail
[ -n "${DEBUG:-}" ] && set -x
cd "$(dirname "$0")/.."

CLIENTS=${CLIENTS:-64}
KEYS=${KEYS:-1000}
SECONDS_EACH=${SECONDS:-5}
N=${N:-50000}
ROUNDS=${ROUNDS:-1}
BASE=${BASE:-7600} # ports BASE, BASE+1
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

SC=$BASE
RD=$((BASE + 1))
mkdir -p "$DIR/$SC" "$DIR/$RD"
"$DIR/shardcounter" serve --listen 127.0.0.1:0 --resp-listen "127.0.0.1:$SC" --store "pebble:$DIR/$SC/pebble" >"$DIR/$SC/log" 2>&1 &
PIDS+=($!)
wait_port "$SC" "$DIR/$SC/log"
printf 'port %s\nbind 127.0.0.1\ndir %s\nsave ""\nappendonly yes\nappendfsync always\n' "$RD" "$DIR/$RD" >"$DIR/$RD/redis.conf"
redis-server "$DIR/$RD/redis.conf" >"$DIR/$RD/log" 2>&1 &
PIDS+=($!)
wait_port "$RD" "$DIR/$RD/log"

echo "== machine (shared with other builds and tests while this ran: ratios within the run are what count)"
echo "nproc: $(nproc); $(go version); $(redis-server --version | cut -d' ' -f1-3); disk of $DIR: $(df -h "$DIR" | awk 'NR==2 {print $1}')"
echo "before: $(uptime | sed 's/.*load/load/')"

echo
echo "== the rate-limit pattern: MULTI, INCR k, INCR k:b, EXPIRE k 60, EXEC (ratelimit), and the same without EXPIRE (multi); transactions per second (best of $ROUNDS)"
echo
declare -A BEST
for round in $(seq "$ROUNDS"); do
	for w in ratelimit multi; do
		for t in "redis always:$RD" "shardcounter pebble:$SC"; do
			name=${t%:*}
			line=$("$DIR/respbench" -addr "127.0.0.1:${t##*:}" -name "$name" -workload "$w" -prefix "rl$round:" \
				-clients "$CLIENTS" -keys "$KEYS" -duration "${SECONDS_EACH}s")
			echo "$line"
			rate=$(echo "$line" | awk '{for (i = 1; i < NF; i++) if ($(i+1) == "ops/s") print $i}')
			if awk -v a="$rate" -v b="${BEST[$name $w]:-0}" 'BEGIN { exit !(a > b) }'; then BEST["$name $w"]=$rate; fi
		done
	done
done
echo
for w in ratelimit multi; do
	awk -v a="${BEST[shardcounter pebble $w]}" -v b="${BEST[redis always $w]}" -v w="$w" \
		'BEGIN { printf "%-10s shardcounter pebble %.0f, redis always %.0f transactions/s: %.2fx\n", w, a, b, a / b }'
done

echo
echo "== redis-benchmark -c $CLIENTS -r $KEYS -n $N: EXPIRE key:__rand_int__ 60 (keys made by INCR first) and INCR key:__rand_int__ (best of $ROUNDS)"
echo
RESULTS=$DIR/results.csv
for round in $(seq "$ROUNDS"); do
	for t in "redis always:$RD" "shardcounter pebble:$SC"; do
		name=${t%:*}
		port=${t##*:}
		for cmd in INCR EXPIRE; do
			args=("$cmd" "key:__rand_int__")
			[ "$cmd" = EXPIRE ] && args+=(60)
			redis-benchmark -p "$port" -c "$CLIENTS" -r "$KEYS" -n "$N" --csv "${args[@]}" 2>&1 | tr -d '"' |
				awk -F, -v name="$name" -v cmd="$cmd" 'NR > 1 && $2 ~ /^[0-9.]+$/ { print name "," cmd "," $2 "," $5 "," $7 }' >>"$RESULTS"
		done
	done
done
echo "| target | command | requests/s | p50 ms | p99 ms | × Redis always |"
echo "|---|---|---:|---:|---:|---:|"
awk -F, '
	{ k = $1 SUBSEP $2; if (!(k in rps) || $3 > rps[k]) { rps[k] = $3; p50[k] = $4; p99[k] = $5 }; if (!(k in seen)) { order[n++] = k; seen[k] = 1 } }
	END {
		for (i = 0; i < n; i++) {
			split(order[i], f, SUBSEP)
			ref = rps["redis always" SUBSEP f[2]]
			printf "| %s | %s | %.0f | %s | %s | %.2f× |\n", f[1], f[2], rps[order[i]], p50[order[i]], p99[order[i]], (ref > 0 ? rps[order[i]] / ref : 0)
		}
	}' "$RESULTS"
echo
echo "after: $(uptime | sed 's/.*load/load/')"
echo "shardcounter's engine (INFO engine): $(redis-cli -p "$SC" info engine | tr -d '\r' | grep -E 'engine_(writes|commits|mean_writes_per_commit|mean_commit_ms):' | tr '\n' ' ')"
