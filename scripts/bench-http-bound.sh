#!/usr/bin/env bash
# scripts/bench-http-bound.sh shows what bounds one hot counter over HTTP on
# the embedded store (docs/BENCHMARKS.md, "Engine over HTTP: what bounds
# it"). It starts `shardcounter serve` on a fresh bolt file, once durable and
# once async, drives each with the bench's HTTP load generator (64 clients,
# one counter), and prints per mode: requests/s, the CPU time the server
# and the load generator spent per request, and from the server's /metrics
# the commits, writes a commit and time a commit took. Then the bare
# handler peer, client and server in one process, for the ceiling.
#
#   scripts/bench-http-bound.sh           # 10s a mode
#   scripts/bench-http-bound.sh 5s
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-10s}
clients=${CLIENTS:-64}

tmp=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
go build -o "$tmp/shardcounter" ./cmd/shardcounter
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port

# cpu PID: user+system CPU seconds the process has used.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14+$15)/hz}' "/proc/$1/stat"; }
# timed OUT ARGS...: shardcounter ARGS --json OUT.json, its output in
# OUT.out and the CPU seconds it used (user + system) in OUT.cpu.
timed() {
  local out=$1 t
  shift
  TIMEFORMAT='%3U %3S'
  if ! { time "$tmp/shardcounter" "$@" --json "$out.json" >"$out.out" 2>&1; } 2>"$out.time"; then
    cat "$out.out" >&2
    exit 1
  fi
  read -r -a t <"$out.time"
  python3 -c 'import sys; print(float(sys.argv[1]) + float(sys.argv[2]))' "${t[0]}" "${t[1]}" >"$out.cpu"
}
# metric NAME: the value of an unlabelled metric on the server.
metric() { curl -fsS "$url/metrics" | awk -v m="$1" '$1 == m {print $2}'; }

printf '%-8s %10s %14s %14s %10s %14s %12s\n' mode 'requests/s' 'server us/req' 'client us/req' commits 'writes/commit' 'ms/commit'
for mode in durable async; do
  "$tmp/shardcounter" serve --listen "127.0.0.1:$port" --store "bolt:$tmp/$mode.db" --durability "$mode" \
    --log-level warn 2>"$tmp/serve-$mode.log" &
  pid=$!
  for _ in $(seq 100); do curl -fsS "$url/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  s0=$(cpu "$pid")
  timed "$tmp/$mode" bench --server "$url" --path http --shards 1 --clients "$clients" --duration "$duration"
  ccpu=$(cat "$tmp/$mode.cpu")
  s1=$(cpu "$pid")
  ops=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"][0]; print(r["ops"], r["ops_per_sec"])' "$tmp/$mode.json")
  read -r n rate <<<"$ops"
  commits=$(metric shardcounter_flush_duration_seconds_count)
  csum=$(metric shardcounter_flush_duration_seconds_sum)
  wsum=$(metric shardcounter_flush_batch_writes_sum)
  python3 - "$mode" "$n" "$rate" "$s0" "$s1" "$ccpu" "$commits" "$csum" "$wsum" <<'EOF'
import sys
mode, n, rate, s0, s1, ccpu, commits, csum, wsum = sys.argv[1:]
n, rate, commits = int(n), float(rate), int(float(commits))
server = (float(s1) - float(s0)) / n * 1e6
client = float(ccpu) / n * 1e6
per = float(wsum) / commits if commits else 0
ms = float(csum) / commits * 1e3 if commits else 0
print(f"{mode:<8} {rate:>10.0f} {server:>14.1f} {client:>14.1f} {commits:>10} {per:>14.1f} {ms:>12.2f}")
EOF
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
done

# The ceiling: the bare handler, client and server in one process.
timed "$tmp/bare" bench --path peer --peer http-bare --clients "$clients" --duration "$duration"
python3 - "$(cat "$tmp/bare.cpu")" "$tmp/bare.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[2]))["runs"][0]
both = float(sys.argv[1]) / r["ops"] * 1e6
print(f"{'bare':<8} {r['ops_per_sec']:>10.0f} {'(both) ' + format(both, '.1f'):>14} {'':>14}")
EOF
