package bolt_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/internal/shard"
	"github.com/shardcounter/shardcounter/storetest"
)

// commitFailureEnv names the file the child process of TestCommitFailure
// works on.
const commitFailureEnv = "SHARDCOUNTER_BOLT_COMMIT_FAILURE"

// TestCommitFailure makes a real commit fail: the kernel refuses to grow
// the file past the process's file size limit (RLIMIT_FSIZE), so bbolt's
// commit returns an error after the transaction has done its work. A
// store cannot always tell from such an error how far the commit got (a
// failed fdatasync of the meta page leaves it written, or not), so the
// write must be reported as outcome unknown, never as "nothing applied";
// a retry with the same request ids then counts every write once.
//
// The limit applies to the whole process, so the test runs in a child
// process of its own.
func TestCommitFailure(t *testing.T) {
	if path := os.Getenv(commitFailureEnv); path != "" {
		commitFailureChild(t, path)
		return
	}
	path := filepath.Join(t.TempDir(), "c.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCommitFailure$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), commitFailureEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child process: %v\n%s", err, out)
	}
	t.Logf("child process:\n%s", out)
}

func commitFailureChild(t *testing.T, path string) {
	ctx := context.Background()
	s, err := bolt.Open(ctx, path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	storetest.MustCreate(t, s, "c", 4)
	if err := s.Add(ctx, "c", 5, 0); err != nil {
		t.Fatal(err)
	}
	// A batch of new request ids needs more pages than the file has.
	var batch []shardcounter.Increment
	for i := range 2000 {
		rid := fmt.Sprint("r", i)
		batch = append(batch, shardcounter.Increment{Counter: "c", Delta: 1, Pick: shard.PickFor("c", rid), RequestID: rid})
	}

	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	limited := lim
	limited.Cur = uint64(fi.Size())
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limited); err != nil {
		t.Fatal(err)
	}
	_, err = s.Apply(ctx, batch)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	if err == nil {
		t.Fatalf("Apply past the file size limit (%d bytes) succeeded", fi.Size())
	}
	t.Logf("Apply past the file size limit: %v", err)
	if code := shardcounter.ErrorCode(err); code != shardcounter.EOUTCOMEUNKNOWN || !shardcounter.IsOutcomeUnknown(err) {
		t.Fatalf("failed commit: code %q, outcome unknown %v; want outcome_unknown", code, shardcounter.IsOutcomeUnknown(err))
	}

	// The store goes on, and the retry settles the unknown outcome.
	if v := storetest.MustRead(t, s, "c"); v != 5 && v != 2005 {
		t.Fatalf("value after the failed commit = %d, want 5 or 2005", v)
	}
	out, err := s.Apply(ctx, batch)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	for i, o := range out {
		if o.Err != nil {
			t.Fatalf("retry item %d: %v", i, o.Err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = bolt.Open(ctx, path, bolt.Options{}); err != nil {
		t.Fatal(err)
	}
	if v := storetest.MustRead(t, s, "c"); v != 2005 {
		t.Fatalf("value after the retry and a reopen = %d, want 2005", v)
	}
}
