package main_test

import (
	"bufio"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWatchCommand: `shardcounter watch` prints the value and each change,
// ends with 0 on SIGINT and with 1 when the counter is deleted, and a
// server shutting down ends its streams instead of waiting for them.
func TestWatchCommand(t *testing.T) {
	dir := t.TempDir()
	s := StartServer(t, dir)
	env := s.Env()
	Run(t, dir, env, "create", "likes", "--shards", "4").MustOK(t)
	Run(t, dir, env, "incr", "likes", "--by", "5").MustOK(t)

	w := startWatch(t, dir, env, "watch", "likes", "--interval", "100ms")
	w.want(t, "5")
	Run(t, dir, env, "incr", "likes", "--by", "2").MustOK(t)
	w.want(t, "7")
	Run(t, dir, env, "decr", "likes").MustOK(t)
	w.want(t, "6")
	w.cmd.Process.Signal(syscall.SIGINT)
	if code := w.wait(t); code != 0 {
		t.Fatalf("watch exited %d after SIGINT, want 0; stderr %q", code, w.stderr.String())
	}

	t.Run("JSON", func(t *testing.T) {
		w := startWatch(t, dir, env, "watch", "likes", "--json")
		line := w.next(t)
		if !strings.Contains(line, `"id":"likes"`) || !strings.Contains(line, `"value":6`) {
			t.Fatalf("watch --json printed %q", line)
		}
		w.cmd.Process.Signal(syscall.SIGINT)
		w.wait(t)
	})
	t.Run("Deleted", func(t *testing.T) {
		Run(t, dir, env, "create", "doomed").MustOK(t)
		w := startWatch(t, dir, env, "watch", "doomed", "--interval", "100ms")
		w.want(t, "0")
		Run(t, dir, env, "delete", "doomed").MustOK(t)
		if code := w.wait(t); code != 1 || !strings.Contains(w.stderr.String(), "(not_found)") {
			t.Fatalf("watch of a deleted counter: exit %d stderr %q, want 1 and not_found", code, w.stderr.String())
		}
	})
	t.Run("Errors", func(t *testing.T) {
		Run(t, dir, env, "watch", "nope").MustFail(t, 1)
		Run(t, dir, env, "watch", "likes", "--interval", "10ms").MustFail(t, 2)
		Run(t, dir, env, "watch").MustFail(t, 2)
		Run(t, dir, []string{"SHARDCOUNTER_SERVER=http://127.0.0.1:1"}, "watch", "likes").MustFail(t, 1)
	})
	t.Run("Shutdown", func(t *testing.T) {
		w := startWatch(t, dir, env, "watch", "likes")
		w.want(t, "6")
		if code := s.Stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("serve exited %d", code)
		}
		if strings.Contains(s.Logs(), "cut off") {
			t.Fatalf("serve waited for the watch stream until its deadline:\n%s", s.Logs())
		}
		w.cmd.Process.Signal(syscall.SIGINT)
		w.wait(t)
		if !strings.Contains(w.stderr.String(), "reconnecting") {
			t.Fatalf("watch stderr %q, want it to say it reconnects", w.stderr.String())
		}
	})
}

// watchProc is a running `shardcounter watch`.
type watchProc struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *strings.Builder
	done   chan struct{}
}

func startWatch(tb testing.TB, dir string, env []string, args ...string) *watchProc {
	tb.Helper()
	readSources()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	w := &watchProc{cmd: cmd, lines: make(chan string, 16), stderr: &strings.Builder{}, done: make(chan struct{})}
	cmd.Stderr = w.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
		cmd.Wait()
		close(w.done)
	}()
	tb.Cleanup(func() {
		cmd.Process.Kill()
		<-w.done
	})
	return w
}

func (w *watchProc) next(tb testing.TB) string {
	tb.Helper()
	select {
	case line, ok := <-w.lines:
		if !ok {
			tb.Fatalf("watch ended; stderr %q", w.stderr.String())
		}
		return line
	case <-time.After(30 * time.Second):
		tb.Fatal("watch printed nothing for 30s")
	}
	return ""
}

func (w *watchProc) want(tb testing.TB, value string) {
	tb.Helper()
	if got := w.next(tb); got != value {
		tb.Fatalf("watch printed %q, want %q", got, value)
	}
}

// wait waits for the process to end and returns its exit code.
func (w *watchProc) wait(tb testing.TB) int {
	tb.Helper()
	for range w.lines {
	}
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		tb.Fatal("watch did not exit")
	}
	return w.cmd.ProcessState.ExitCode()
}
