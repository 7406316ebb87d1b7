#!/usr/bin/env bash
# scripts/bench-ab.sh compares Go benchmarks of two revisions, A (a git
# revision, default the merge base with main) and B (the working tree), in
# interleaved runs: one run of A, one of B, RUNS times (default 7), the
# order of each pair alternating, so that drift of a shared, noisy machine
# falls on both. It then compares the medians with benchstat.
#
#   scripts/bench-ab.sh [-a REV] [-n RUNS] [-i] PKG BENCH_REGEX [test binary flags...]
#   scripts/bench-ab.sh -a main ./http 'BenchmarkHandlerIncrement' -test.benchtime 1s -test.cpu 1
#
# With -i it counts instructions instead of timing: each benchmark (each
# of the regex's alternatives, which must name single benchmarks) runs
# under valgrind's callgrind at two iteration counts, and the difference
# of the two totals over the difference of the counts is its
# instructions per op, free of the setup's. Instruction counts barely
# move with a busy machine, where times on a shared two-core machine
# swing by ±100% and more. The binaries are built without cgo and run
# with GODEBUG=asyncpreemptoff=1, which callgrind needs to follow Go, and
# cpu.rdtscp=off (valgrind cannot run the RDTSCP the runtime times lock
# contention with), and
# with GOGC=off: the collector's work per op jumps with where its cycles
# fall in a run (±2% run to run), and it depends on the bytes allocated,
# which -benchmem compares exactly; the count is then the code's own.
#
# A is exported with git archive into a temporary directory (no checkout,
# no branch); both test binaries are built once, then run alternately.
set -euo pipefail
cd "$(dirname "$0")/.."
rev="" runs=7 instr=""
while getopts "a:n:i" opt; do
  case $opt in
    a) rev=$OPTARG ;;
    n) runs=$OPTARG ;;
    i) instr=1 ;;
    *) echo "usage: $0 [-a REV] [-n RUNS] [-i] PKG BENCH_REGEX [test binary flags...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [ $# -lt 2 ]; then
  echo "usage: $0 [-a REV] [-n RUNS] [-i] PKG BENCH_REGEX [test binary flags...]" >&2
  exit 2
fi
pkg=$1 bench=$2
shift 2
rev=${rev:-$(git merge-base HEAD main)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/a" && git archive "$rev" | tar -x -C "$tmp/a"
cgo=${instr:+0}
(cd "$tmp/a" && CGO_ENABLED=${cgo:-1} go test -c -o "$tmp/a.test" "$pkg")
CGO_ENABLED=${cgo:-1} go test -c -o "$tmp/b.test" "$pkg"
echo "A = $rev ($(git log -1 --format=%h "$rev")), B = working tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', modified')); $runs runs each, interleaved${instr:+, instructions by callgrind}" >&2

# instructions prints a benchstat line of instructions per op of one
# benchmark of test binary $1, named by the exact regex $2.
instructions() {
  local total=()
  for n in 2000 4000; do
    (cd "$pkg" && GOGC=off GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" \
      "$1" -test.run '^$' -test.bench "$2" -test.benchtime ${n}x -test.cpu 1 "${@:3}" >/dev/null 2>"$tmp/cg.log") ||
      { cat "$tmp/cg.log" >&2; exit 1; }
    total+=("$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/cg.log")")
  done
  local name=${2#^}
  name=${name%$}
  echo "${name//\\/} 2000 $(((total[1] - total[0]) / 2000)) instructions/op"
}

for i in $(seq 1 "$runs"); do
  order="a b"
  [ $((i % 2)) = 0 ] && order="b a"
  for x in $order; do
    if [ -n "$instr" ]; then
      IFS='|' read -ra names <<<"$bench"
      for name in "${names[@]}"; do
        instructions "$tmp/$x.test" "$name" "$@" >>"$tmp/$x.txt"
      done
    else
      (cd "$pkg" && "$tmp/$x.test" -test.run '^$' -test.bench "$bench" -test.count 1 "$@") | grep -E '^(Benchmark|goos|goarch|pkg|cpu)' >>"$tmp/$x.txt"
    fi
  done
done
if [ -n "${AB_OUT:-}" ]; then
  cp "$tmp/a.txt" "$AB_OUT/bench-a.txt"
  cp "$tmp/b.txt" "$AB_OUT/bench-b.txt"
fi
go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da A="$tmp/a.txt" B="$tmp/b.txt"
