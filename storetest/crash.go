package storetest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter"
)

// crashBatch is batch i: 20 members added to a distinct counter, the first
// member of batch i-1 removed, and i+1 added to a sum counter.
func crashBatch(i int) []shardcounter.Increment {
	var incs []shardcounter.Increment
	for j := range 20 {
		incs = append(incs, shardcounter.Increment{Counter: "likes", Member: fmt.Sprintf("m%d-%d", i, j), Delta: 1})
	}
	if i > 0 {
		incs = append(incs, shardcounter.Increment{Counter: "likes", Member: fmt.Sprintf("m%d-0", i-1), Delta: -1})
	}
	return append(incs, shardcounter.Increment{Counter: "views", Delta: int64(i + 1), Pick: uint64(i)})
}

// crashState returns the members and views after batches 0..n-1.
func crashState(n int) (members []string, views int64) {
	for i := range n {
		for j := range 20 {
			if j > 0 || i == n-1 {
				members = append(members, fmt.Sprintf("m%d-%d", i, j))
			}
		}
		views += int64(i + 1)
	}
	return members, views
}

// Crash describes a store to RunCrashMidBatch.
type Crash struct {
	// Env names, in the child's environment, what the child opens.
	Env string
	// Target returns what the store opens: a file, a directory, a
	// project. Only the parent calls it.
	Target func(t *testing.T) string
	// ChildEnv is more of the child's environment.
	ChildEnv []string
	// Batches is how many batches the child acknowledges before it is
	// killed.
	Batches int
	// Open opens the store on a target (and closes it when tb ends).
	Open func(tb testing.TB, target string) shardcounter.CounterStore
}

// RunCrashMidBatch is a store's crash test, run from a test named
// TestCrashMidBatch: it kills a child process (the test binary again, with
// c.Env naming the target) with SIGKILL while it applies batches of member
// adds and removes and sum writes, then opens the store again: every
// acknowledged batch is there, the batch in flight is there whole or not
// at all, and the distinct counter's count, members and shards agree.
func RunCrashMidBatch(t *testing.T, c Crash) {
	if target := os.Getenv(c.Env); target != "" {
		crashChild(t, c.Open(t, target))
		return
	}
	target := c.Target(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashMidBatch$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), c.Env+"="+target), c.ChildEnv...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := -1
	lines := bufio.NewScanner(out)
	for acked < c.Batches && lines.Scan() {
		if n, ok := strings.CutPrefix(lines.Text(), "acked "); ok {
			acked, _ = strconv.Atoi(n)
		} else {
			t.Logf("child: %s", lines.Text())
		}
	}
	cmd.Process.Kill()
	for lines.Scan() {
		if n, ok := strings.CutPrefix(lines.Text(), "acked "); ok {
			acked, _ = strconv.Atoi(n)
		}
	}
	cmd.Wait()
	if acked < c.Batches {
		t.Fatalf("the child acknowledged %d batches before it died, want %d or more", acked+1, c.Batches)
	}
	s := c.Open(t, target)
	got := CheckMembers(t, s, "likes", nil)
	views := MustRead(t, s, "views")
	for _, n := range []int{acked + 1, acked + 2} {
		members, v := crashState(n)
		slices.Sort(members)
		if slices.Equal(got, members) && views == v {
			t.Logf("%d batches acknowledged, %d found after the crash", acked+1, n)
			return
		}
	}
	t.Fatalf("after %d acknowledged batches and a crash: %d members and views %d, which no whole number of batches leaves", acked+1, len(got), views)
}

// crashChild applies batches to s until it is killed, printing each
// acknowledged one.
func crashChild(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	if _, err := s.CreateCounter(ctx, "likes", shardcounter.Spec{Shards: 16, Kind: shardcounter.KindDistinct}); err != nil {
		t.Fatal(err)
	}
	MustCreate(t, s, "views", 4)
	for i := 0; ; i++ {
		out, err := s.Apply(ctx, crashBatch(i))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out {
			if o.Err != nil || o.Unchanged {
				t.Fatalf("batch %d: %+v", i, o)
			}
		}
		fmt.Printf("acked %d\n", i)
	}
}
