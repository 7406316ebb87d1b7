#!/usr/bin/env bash
# scripts/bench-markers.sh measures what batch markers cost Redis writes
# (redis.BenchmarkMarkerCost): interleaved A/B runs of markers on and off,
# one test process each, the order of each pair alternating, RUNS times
# (default 6), on one redis-server of its own that keeps the Zipf
# workload's counters between processes; then benchstat compares the
# medians. benchstat is golang.org/x/perf/cmd/benchstat.
#
# With -i it counts the server's instructions instead of timing: the
# redis-server runs under valgrind's callgrind, collecting inside EVALSHA
# only, and BenchmarkMarkerApply applies the same fixed batches (16 items
# on a hot counter; 60 Zipf counters) OPS times (default 500) with markers
# on and off, alternating, RUNS times (default 2); it prints the
# instructions per batch of each. They do not move with a busy machine.
#
#   scripts/bench-markers.sh [RUNS] [BENCHTIME]
#   SHARDCOUNTER_BENCH_COUNTERS=1000000 scripts/bench-markers.sh 6 3s
#   SHARDCOUNTER_BENCH_COUNTERS=10000 scripts/bench-markers.sh -i [RUNS] [OPS]
set -euo pipefail
cd "$(dirname "$0")/.."
instr=""
if [ "${1:-}" = "-i" ]; then instr=1; shift; fi
tmp=$(mktemp -d)
go test -c -o "$tmp/redis.test" ./redis
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
server_cmd=(redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp")
if [ -n "$instr" ]; then
  server_cmd=(valgrind --tool=callgrind --toggle-collect=evalShaCommand --callgrind-out-file="$tmp/cg.out" "${server_cmd[@]}" --hz 1)
fi
"${server_cmd[@]}" >"$tmp/redis.log" 2>&1 &
server=$!
trap 'kill $server; wait $server 2>/dev/null || true; rm -rf "$tmp"' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.2; done
bench() { # bench REGEX BENCHTIME
  if ! (cd redis && SHARDCOUNTER_BENCH_REDIS=127.0.0.1:$port "$tmp/redis.test" -test.run '^$' -test.bench "$1" -test.benchtime "$2") >"$tmp/bench.out" 2>&1; then
    cat "$tmp/bench.out" >&2
    return 1
  fi
  grep '^Benchmark' "$tmp/bench.out"
}
if [ -n "$instr" ]; then
  runs=${1:-2} ops=${2:-500}
  bench 'MarkerApply/' 1x >/dev/null # the counters, once
  for i in $(seq "$runs"); do
    order="on off"
    if [ $((i % 2)) -eq 0 ]; then order="off on"; fi
    for w in hot zipf; do
      for m in $order; do
        callgrind_control -z "$server" >/dev/null
        bench "MarkerApply/workload=$w/markers=$m\$" "${ops}x" >/dev/null
        callgrind_control -d "$server" >/dev/null
        dump=$(ls -t "$tmp"/cg.out.* | head -1)
        ir=$(awk '/^(summary|totals):/ {print $2; exit}' "$dump")
        echo "workload=$w markers=$m instructions/batch $((ir / (ops + 1)))"
      done
    done
  done
  exit 0
fi
runs=${1:-6} benchtime=${2:-2s}
out=${OUT:-$tmp/markers.txt}
: >"$out"
for i in $(seq "$runs"); do
  order="on off"
  if [ $((i % 2)) -eq 0 ]; then order="off on"; fi
  for w in hot zipf; do
    for m in $order; do
      bench "MarkerCost/workload=$w/markers=$m\$" "$benchtime" | tee -a "$out"
    done
  done
done
benchstat -col /markers "$out"
