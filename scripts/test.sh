#!/usr/bin/env bash
# scripts/test.sh runs the whole test suite, as CI does: it makes the real
# servers the tests talk to available (PostgreSQL and redis-server, from
# Debian's packages when missing), checks formatting and vet, and runs every
# test under the race detector. Extra arguments go to `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."

for s in scripts/ensure-*.sh; do
  [ -e "$s" ] && bash "$s"
done

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change these files; run gofmt -w on them:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
go test -race -count=1 -timeout 40m "$@" ./...
# The RESP server serves connections from an event loop on Linux, and on a
# goroutine each elsewhere (or with Options.ConnGoroutines): its tests run
# once more the second way, so that both pass them all.
SHARDCOUNTER_RESP_GOROUTINES=1 go test -race -count=1 -timeout 10m "$@" ./resp/server

# Fuzz every decoder briefly beyond its seed corpus (testdata/fuzz/, which
# the run above already replayed): long enough to catch a shallow crash in
# a new or changed parser, short enough to keep CI modest. Targets are
# found, not listed, so a new Fuzz function is fuzzed without editing this.
# SHARDCOUNTER_FUZZTIME=0 skips the step; a larger budget digs deeper.
#
# The budget is a count of executions (Nx), not a duration: with a duration,
# Go 1.26's fuzz coordinator can report its own -fuzztime deadline as a
# failure ("context deadline exceeded", no crasher written) when a worker is
# mid-call as time runs out (go.dev/issue/75804, fixed in Go 1.27). A count
# has no deadline to race. 10000 executions is a few seconds per target:
# with about 60 targets, each paying its instrumented build and its
# corpus's baseline, a larger default would take the run past 30 minutes
# on 2 cores.
#
# Each package's instrumented test binary is built once and run once a
# target, as `go test -fuzz` would run it (from the package's directory,
# with the go command's corpus cache): `go test -fuzz` links the binary
# again for every target, which cost more than the fuzzing.
fuzztime=${SHARDCOUNTER_FUZZTIME:-10000x}
if [ "$fuzztime" != 0 ]; then
  fuzzbin=$(mktemp -d)
  trap 'rm -rf "$fuzzbin"' EXIT
  fuzzcache=$(go env GOCACHE)/fuzz
  dirs=$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u)
  for dir in $dirs; do
    # An assignment, not a for list, so that a package that fails to build
    # fails the run instead of quietly having no targets.
    listed=$(go test -list '^Fuzz' "$dir")
    go test -c -fuzz . -o "$fuzzbin/fuzz.test" "$dir"
    pkg=$(go list "$dir")
    for target in $(grep '^Fuzz' <<<"$listed"); do
      echo "fuzz $dir $target for $fuzztime"
      (cd "$dir" && "$fuzzbin/fuzz.test" -test.run '^$' -test.fuzz "^${target}\$" \
        -test.fuzztime "$fuzztime" -test.fuzzcachedir "$fuzzcache/$pkg")
    done
  done
fi
