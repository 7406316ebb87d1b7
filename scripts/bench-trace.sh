#!/usr/bin/env bash
# scripts/bench-trace.sh counts what tracing costs the write paths, in
# instructions a write by callgrind (as scripts/bench-ab.sh -i does, whose
# notes apply): the BenchmarkWritePath of ./http and of ./resp/server,
# built once each at revision A (default the commit before tracing) and
# at B (default the working tree), A as it is and B with tracing off and
# on, sampling 1% with the parent-based ratio sampler, once with the OTLP
# exporter (http/protobuf, what operators run) and once with the console
# exporter (its output discarded; its JSON encoding counted).
#
# The OTLP exporter sends to scripts/otlp-sink.py, a receiver in a
# process of its own (so that only the exporter's side is counted) that
# answers 200 and counts the spans it gets: a run whose spans did not
# reach it fails. The batch processor's timer is set beyond the run
# (OTEL_BSP_SCHEDULE_DELAY), so that its spans go out when the benchmark
# shuts tracing down, in requests of up to 512 spans (the default batch),
# as a busy server's do, and are counted: under valgrind a run lasts
# some fifty times longer than it would, and the 5-second timer would
# otherwise send many small requests no real run of that length sends.
#
#   scripts/bench-trace.sh [-a REV] [-b REV] [-n RUNS]
#
# The runtime is told not to use RDTSCP, which valgrind cannot run (the
# runtime times lock contention with it).
#
# Each figure is the difference of two runs of the benchmark, at ITERS
# iterations (default "2000 10000"), over the difference of the counts:
# the sampled writes among those 8,000 are some 80, so their spans weigh
# as they do in a long run give or take 11% (the binomial's spread, on
# the share the sampled writes add). It prints each run (with the spans
# the receiver got at each number of iterations), then the median of
# each configuration and its difference from A's.
set -euo pipefail
cd "$(dirname "$0")/.."
a="" b="" runs=3
while getopts "a:b:n:" opt; do
  case $opt in
    a) a=$OPTARG ;;
    b) b=$OPTARG ;;
    n) runs=$OPTARG ;;
    *) echo "usage: $0 [-a REV] [-b REV] [-n RUNS]" >&2; exit 2 ;;
  esac
done
a=${a:-$(git log --format=%H -1 --grep '^http, resp/server: a write-path benchmark each')}
read -ra iters <<<"${ITERS:-2000 10000}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pkgs=(./http ./resp/server)

# build REV NAME exports REV (the working tree when empty) and builds the
# test binary of each package as $tmp/NAME-N.test. A revision is exported
# into a directory of its own that is kept, so that the build cache,
# which knows packages by their directory, builds it once.
build() {
  local src=.
  if [ -n "$1" ]; then
    src=${TMPDIR:-/tmp}/bench-trace-$(git rev-parse --short "$1")
    [ -d "$src" ] || { mkdir -p "$src" && git archive "$1" | tar -x -C "$src"; }
  fi
  for i in "${!pkgs[@]}"; do
    (cd "$src" && CGO_ENABLED=0 go test -c -o "$tmp/$2-$i.test" "${pkgs[$i]}")
  done
}
build "$a" a
build "$b" b
echo "A = $(git log -1 --format='%h %s' "$a")" >&2
echo "B = ${b:+$(git log -1 --format='%h %s' "$b")}${b:-working tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', modified'))}" >&2

# The OTLP receiver, for the whole script.
python3 scripts/otlp-sink.py "$tmp/port" "$tmp/otlp.log" &
sink=$!
trap 'kill $sink 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
[ -s "$tmp/port" ] || { echo "the OTLP receiver did not start" >&2; exit 1; }
: >"$tmp/otlp.log"

# count BIN PKG [VAR=VALUE...] prints the instructions a write of the
# benchmark of test binary BIN, run in PKG's directory with the variables.
count() {
  local bin=$1 pkg=$2 total=() seen
  shift 2
  : >"$tmp/spans"
  for n in "${iters[@]}"; do
    seen=$(wc -l <"$tmp/otlp.log")
    (cd "$pkg" && env $(env | sed -n 's/^\(OTEL_[A-Z_]*\)=.*/-u \1/p') \
      "$@" GOGC=off GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off \
      valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" \
      "$bin" -test.run '^$' -test.bench '^BenchmarkWritePath$' -test.benchtime "${n}x" -test.cpu 1 >/dev/null 2>"$tmp/cg.log") ||
      { cat "$tmp/cg.log" >&2; exit 1; }
    sed -n "$((seen + 1)),\$p" "$tmp/otlp.log" | awk '{s += $1} END {printf "%d ", s}' >>"$tmp/spans"
    total+=("$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/cg.log")")
  done
  echo $(((total[1] - total[0]) / (iters[1] - iters[0])))
}

sample=(OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=0.01)
otlp=(OTEL_TRACES_EXPORTER=otlp OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf
  OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$(cat "$tmp/port")" OTEL_BSP_SCHEDULE_DELAY=3600000)
for i in "${!pkgs[@]}"; do
  : >"$tmp/A" && : >"$tmp/off" && : >"$tmp/otlp" && : >"$tmp/console"
  for r in $(seq 1 "$runs"); do
    count "$tmp/a-$i.test" "${pkgs[$i]}" >>"$tmp/A"
    count "$tmp/b-$i.test" "${pkgs[$i]}" >>"$tmp/off"
    count "$tmp/b-$i.test" "${pkgs[$i]}" "${sample[@]}" "${otlp[@]}" >>"$tmp/otlp"
    read -ra spans < <(cat "$tmp/spans"; echo)
    [ "${spans[1]:-0}" -gt 0 ] ||
      { echo "the OTLP receiver got ${spans[*]} spans at ${iters[*]} iterations" >&2; exit 1; }
    count "$tmp/b-$i.test" "${pkgs[$i]}" "${sample[@]}" OTEL_TRACES_EXPORTER=console >>"$tmp/console"
    echo "${pkgs[$i]} run $r: A $(tail -1 "$tmp/A"), B off $(tail -1 "$tmp/off"), B on at 1% OTLP $(tail -1 "$tmp/otlp") (${spans[*]} spans exported at ${iters[*]} iterations), console $(tail -1 "$tmp/console") instructions a write" >&2
  done
  median() { sort -n "$1" | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : int((v[NR/2]+v[NR/2+1])/2)}'; }
  ma=$(median "$tmp/A") moff=$(median "$tmp/off") motlp=$(median "$tmp/otlp") mcon=$(median "$tmp/console")
  awk -v p="${pkgs[$i]}" -v a="$ma" -v off="$moff" -v otlp="$motlp" -v con="$mcon" 'BEGIN {
    printf "%s: A %d, B off %d (%+.1f%%), B on at 1%% OTLP %d (%+.1f%%), console %d (%+.1f%%) instructions a write, medians\n",
      p, a, off, 100*(off-a)/a, otlp, 100*(otlp-a)/a, con, 100*(con-a)/a }'
done
