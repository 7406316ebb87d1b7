#!/usr/bin/env bash
# bench-resp-tls.sh measures the Redis port over TLS beside plain TCP,
# with the same client (redis-benchmark) in one run, on Pebble (durable):
#
#   - plain, served by the event loop (the default)
#   - plain, a goroutine a connection (--resp-conn-goroutines), the path
#     TLS connections take
#   - TLS (--resp-tls-cert), a goroutine a connection
#
# each with redis-benchmark -t incr,get, CLIENTS connections, at -P 1 and
# -P 16. It prints the machine and requests per second with each figure's
# ratio to plain on the event loop; docs/RESP.md quotes the table. The
# certificate is a throwaway one made with openssl. Everything it started
# is stopped at the end.
#
#   scripts/bench-resp-tls.sh      # CLIENTS (32), N1 (50000), N16 (200000), ROUNDS (1)
set -euo pipefail
cd "$(dirname "$0")/.."

CLIENTS=${CLIENTS:-32}
N1=${N1:-50000}
N16=${N16:-200000}
ROUNDS=${ROUNDS:-1}
BASE=${BASE:-7600}
DIR=$(mktemp -d)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$DIR"
}
trap cleanup EXIT

go build -o "$DIR/shardcounter" ./cmd/shardcounter
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
	-addext subjectAltName=IP:127.0.0.1 -keyout "$DIR/key.pem" -out "$DIR/cert.pem" 2>/dev/null

start() { # name port extra-flags...
	local name=$1 port=$2
	shift 2
	"$DIR/shardcounter" serve --listen 127.0.0.1:0 --store "pebble:$DIR/$name" --resp-listen "127.0.0.1:$port" "$@" 2>"$DIR/$name.log" &
	PIDS+=($!)
	for _ in $(seq 100); do
		grep -q "serving the Redis protocol" "$DIR/$name.log" && return
		sleep 0.1
	done
	echo "$name did not start" >&2
	cat "$DIR/$name.log" >&2
	exit 1
}
start loop $((BASE))
start goroutines $((BASE + 1)) --resp-conn-goroutines
start tls $((BASE + 2)) --resp-tls-cert "$DIR/cert.pem" --resp-tls-key "$DIR/key.pem"

rps() { # port pipeline n extra...
	local port=$1 p=$2 n=$3
	shift 3
	redis-benchmark -h 127.0.0.1 -p "$port" -c "$CLIENTS" -n "$n" -P "$p" -t incr,get -q "$@" 2>/dev/null | tr '\r' '\n' |
		awk -F'[: ]+' '/requests per second/ {for (i=1;i<=NF;i++) if ($i=="requests") printf "%s %s\n", $1, $(i-1)}'
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -sr)"
echo "redis-benchmark -c $CLIENTS -t incr,get; requests per second (ratio to plain on the event loop)"
declare -A R
for round in $(seq "$ROUNDS"); do
	for P in 1 16; do
		n=$N1
		[ "$P" = 16 ] && n=$N16
		while read -r cmd v; do R[loop,$P,$cmd]+="$v "; done < <(rps $BASE "$P" "$n")
		while read -r cmd v; do R[goroutines,$P,$cmd]+="$v "; done < <(rps $((BASE + 1)) "$P" "$n")
		while read -r cmd v; do R[tls,$P,$cmd]+="$v "; done < <(rps $((BASE + 2)) "$P" "$n" --tls --cacert "$DIR/cert.pem")
	done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf "| %-34s | %14s | %14s | %14s | %14s |\n" target "INCR -P 1" "GET -P 1" "INCR -P 16" "GET -P 16"
printf "|%s|%s|%s|%s|%s|\n" "$(printf -- '-%.0s' {1..36})" "$(printf -- '-%.0s' {1..16})" "$(printf -- '-%.0s' {1..16})" "$(printf -- '-%.0s' {1..16})" "$(printf -- '-%.0s' {1..16})"
for t in loop goroutines tls; do
	case $t in
	loop) label="plain, event loop" ;;
	goroutines) label="plain, a goroutine a connection" ;;
	tls) label="TLS, a goroutine a connection" ;;
	esac
	row="| $(printf '%-34s' "$label") |"
	for P in 1 16; do
		for cmd in INCR GET; do
			v=$(echo "${R[$t,$P,$cmd]:-}" | median)
			b=$(echo "${R[loop,$P,$cmd]:-}" | median)
			row+=" $(printf '%14s' "$(awk -v v="$v" -v b="$b" 'BEGIN {printf "%.0f (%.2f)", v, v/b}')") |"
		done
	done
	echo "$row"
done
