#!/usr/bin/env bash
# scripts/bench-perms.sh counts, with valgrind's callgrind, the
# instructions of one write on the HTTP and RESP write paths with no
# authentication, with a token (the user default, ~* +@all) and as a user
# of three key patterns: the Benchmark{None,Token,User} benchmarks of
# http/perms_bench_test.go and resp/server/perms_bench_test.go. It counts
# the same None and Token benchmarks on revision REV (default: the commit
# before package acl, the server without users), built with this tree's
# perms_bench_test.go, which uses only what that revision has. The
# percentages are against REV's count of the same path and credentials;
# User's is against REV's Token.
#
#   scripts/bench-perms.sh [-a REV] [-n N]
#
# Each benchmark runs at N and 2N iterations (default 4000); the
# difference of the totals over N is its instructions a write, free of
# the setup's. The binaries are built without cgo and run with
# GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off and GOGC=off, as
# scripts/bench-ab.sh -i does (see there why).
set -euo pipefail
cd "$(dirname "$0")/.."
rev="" n=4000
while getopts "a:n:" opt; do
  case $opt in
    a) rev=$OPTARG ;;
    n) n=$OPTARG ;;
    *) echo "usage: $0 [-a REV] [-n N]" >&2; exit 2 ;;
  esac
done
rev=${rev:-$(git log --format=%H --reverse -- acl | head -1)^}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/a" && git archive "$rev" | tar -x -C "$tmp/a"
for pkg in http resp/server; do
  cp "$pkg/perms_bench_test.go" "$tmp/a/$pkg/"
  (cd "$tmp/a" && CGO_ENABLED=0 go test -c -o "$tmp/a-${pkg//\//-}.test" "./$pkg")
  CGO_ENABLED=0 go test -c -o "$tmp/b-${pkg//\//-}.test" "./$pkg"
done
echo "A = $rev ($(git log -1 --format=%h "$rev")), B = working tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', modified')); instructions a write by callgrind, $n and $((2 * n)) iterations" >&2

# count prints the instructions a write of benchmark $2 of test binary $1,
# run in package directory $3.
count() {
  local total=()
  for k in "$n" $((2 * n)); do
    (cd "$3" && GOGC=off GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" \
      "$1" -test.run '^$' -test.bench "^$2\$" -test.benchtime "${k}x" -test.cpu 1 >/dev/null 2>"$tmp/cg.log") ||
      { cat "$tmp/cg.log" >&2; exit 1; }
    total+=("$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/cg.log")")
  done
  echo $(((total[1] - total[0]) / n))
}

pct() { awk -v b="$1" -v a="$2" 'BEGIN { printf "%+.2f%%", (b - a) * 100 / a }'; }

printf '%-6s %-6s %12s %12s %9s\n' path auth A B B/A
for pkg in http resp/server; do
  bin=${pkg//\//-}
  aNone=$(count "$tmp/a-$bin.test" BenchmarkPermsNone "$pkg")
  aToken=$(count "$tmp/a-$bin.test" BenchmarkPermsToken "$pkg")
  bNone=$(count "$tmp/b-$bin.test" BenchmarkPermsNone "$pkg")
  bToken=$(count "$tmp/b-$bin.test" BenchmarkPermsToken "$pkg")
  bUser=$(count "$tmp/b-$bin.test" BenchmarkPermsUser "$pkg")
  name=${pkg%%/*}
  printf '%-6s %-6s %12s %12s %9s\n' "$name" none "$aNone" "$bNone" "$(pct "$bNone" "$aNone")"
  printf '%-6s %-6s %12s %12s %9s\n' "$name" token "$aToken" "$bToken" "$(pct "$bToken" "$aToken")"
  printf '%-6s %-6s %12s %12s %9s\n' "$name" user "($aToken)" "$bUser" "$(pct "$bUser" "$aToken")"
done
