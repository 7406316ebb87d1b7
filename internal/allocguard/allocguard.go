// Package allocguard holds the allocation guards of the write paths
// (testing.AllocsPerRun against a ceiling), for tests only. Under the race
// detector allocation counts are not the program's own (sync.Pool drops
// items at random, so a pooled buffer is allocated again now and then),
// so there a guard runs its test again in a child `go test` built without
// -race: the suite, which runs with -race, still checks every ceiling,
// exactly.
package allocguard

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Check fails t when f allocates more than max times a run on average
// (testing.AllocsPerRun over runs). Under the race detector it instead
// runs t's test, by name, in a child process built without it, once per
// test however many checks the test makes: call it from a top-level test
// whose checks are all guards. It reports whether f ran here, so that
// the caller checks what f did only then.
func Check(t *testing.T, runs int, max float64, f func()) bool {
	t.Helper()
	if raceEnabled {
		child(t)
		return false
	}
	if got := testing.AllocsPerRun(runs, f); got > max {
		t.Errorf("%v allocations a run, the ceiling is %v: find the new allocation with go test -run '^%s$' -memprofile, or raise the ceiling with the reason", got, max, t.Name())
	}
	return true
}

// ran holds the tests already run in a child, so that a test with several
// checks runs once.
var ran = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

// child runs the top-level test of t in `go test` without -race in the
// test's package directory (the working directory of a test) and fails t
// with its output if it fails.
func child(t *testing.T) {
	t.Helper()
	name, _, _ := strings.Cut(t.Name(), "/")
	ran.Lock()
	done := ran.m[name]
	ran.m[name] = true
	ran.Unlock()
	if done {
		return
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "test", "-count=1", "-run", "^"+name+"$", ".")
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.ReplaceAll(os.Getenv("GOFLAGS"), "-race", ""))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the allocation guards of %s, run without the race detector (go test -run '^%s$' .): %v\n%s", name, name, err, out)
	}
	t.Logf("the allocation guards of %s passed in a build without the race detector", name)
}
