package server_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter/resp/server"
)

// TestIoredis runs tests/node/ioredis.mjs, which drives the server with
// ioredis, Node.js's most used Redis client: INCR, GET and MGET one at a
// time and pipelined, from one and from several connections, multi()
// transactions, hash counters, PFADD and PFCOUNT, and scanStream. node and
// the packages of tests/node (scripts/ensure-node-deps.sh) must be there:
// the test fails without them.
func TestIoredis(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH: run scripts/ensure-node-deps.sh")
	}
	dir, err := filepath.Abs("../../tests/node")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ioredis")); err != nil {
		t.Fatalf("ioredis is not installed in %s: run scripts/ensure-node-deps.sh", dir)
	}
	_, addr := MustServe(t, MustEngine(t), server.Options{})
	h, p := hostPort(t, addr)
	cmd := exec.Command(node, "ioredis.mjs", h, p)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("node ioredis.mjs: %v\n%s", err, out)
	}
}
