package server_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/shardcounter/shardcounter/internal/redistest"
	"github.com/shardcounter/shardcounter/resp/server"
)

// python returns the Python interpreter of the client tests: Debian's
// python3, whose python3-redis scripts/ensure-python-redis.sh installs, or
// $SHARDCOUNTER_PYTHON. It fails the test when that cannot import redis.
func python(t *testing.T) string {
	py := os.Getenv("SHARDCOUNTER_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if out, err := exec.Command(py, "-I", "-c", "import redis").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import redis (%v: %s): run scripts/ensure-python-redis.sh", py, err, out)
	}
	return py
}

// runPatterns runs tests/python/patterns.py against addr and returns the
// answers it printed.
func runPatterns(t *testing.T, py, addr string) map[string]any {
	t.Helper()
	script, err := filepath.Abs("../../tests/python/patterns.py")
	if err != nil {
		t.Fatal(err)
	}
	h, p := hostPort(t, addr)
	out, err := exec.Command(py, "-I", script, h, p).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("patterns.py against %s: %v\n%s", addr, err, stderr)
	}
	var answers map[string]any
	if err := json.Unmarshal(out, &answers); err != nil {
		t.Fatalf("patterns.py printed %q: %v", out, err)
	}
	return answers
}

// TestRedisPy is issue 30's "done when" for what it covers: a Python
// script written for Redis (tests/python/patterns.py: pipeline()
// transactions of INCR, HINCRBY per post, sets, TYPE, SCAN to list) runs
// unchanged against a real redis-server and against the RESP port, and
// gets the same answers from both.
func TestRedisPy(t *testing.T) {
	py := python(t)
	want := runPatterns(t, py, redistest.MustStart(t).Addr)
	if got := want["tx"]; !reflect.DeepEqual(got, []any{1.0, 2.0, 7.0, "7", -1.0}) {
		t.Fatalf("against Redis the transaction gave %v: the script or the server is not what this test expects", got)
	}
	_, addr := MustServe(t, MustEngine(t), server.Options{AllowFlush: true})
	got := runPatterns(t, py, addr)
	for k, w := range want {
		if g, ok := got[k]; !ok || !reflect.DeepEqual(g, w) {
			t.Errorf("%s: shardcounter answered %v, Redis %v", k, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("shardcounter gave %d answers, Redis %d", len(got), len(want))
	}
}
