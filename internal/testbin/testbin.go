// Package testbin builds the shardcounter binary for the tests that run it
// as a user does (tests/browser, tests/readme, tests/hostile and the CLI
// tests of cmd/shardcounter), and starts `serve` from it (Start) for those
// tests and for the programs that measure a running server
// (cmd/limitsbench, cmd/limitexact).
package testbin

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Build builds cmd/shardcounter of the module at root into dir, as
// dir/shardcounter, and returns its path. It first reads the sources the
// binary is made of (ReadSources), so that a change to the server runs the
// test again.
func Build(tb testing.TB, root, dir string) string {
	tb.Helper()
	ReadSources(root)
	bin := filepath.Join(dir, "shardcounter")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/shardcounter")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("building shardcounter: %v\n%s", err, out)
	}
	return bin
}

// Output collects what a running process writes, for a test that reads it
// while the process runs. It is safe for concurrent use.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

// String returns what was written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// ReadSources reads every source of the module at root that the binary is
// made of. go test caches a pass by the files the test process opens, and
// the inputs of a build in a subprocess are not among them: reading them
// makes a change anywhere in the module rerun a test of the built binary
// instead of replaying a cached pass. It must run inside a test: go test
// records the files a test opens only once m.Run has started.
func ReadSources(root string) {
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		switch filepath.Ext(path) {
		case ".go", ".mod", ".sum", ".html", ".css", ".js", ".mjs", ".md":
			os.ReadFile(path)
		}
		return nil
	})
}
