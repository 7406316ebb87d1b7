// Package firestoretest starts the Firestore emulator for tests: one Java
// process per test binary, on a free loopback port, in Firestore native
// mode or in Datastore mode, stopped (its JVM with it) when the tests end.
// It fails, never skips, when the emulator or Java is missing: run
// scripts/ensure-firestore.sh, which says how to install them.
//
// The emulator is the jar that `gcloud emulators firestore start` runs
// (the Debian package google-cloud-cli-firestore-emulator), started
// directly rather than through gcloud's Python wrapper, so that the
// process this package starts is the JVM itself and nothing outlives it.
package firestoretest

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Mode is the database mode the emulator serves.
type Mode string

const (
	// Native is Firestore in native mode: the firestore:// store.
	Native Mode = "firestore-native"
	// Datastore is Firestore in Datastore mode: the datastore:// store.
	Datastore Mode = "datastore-mode"
)

// Emulator is one running emulator process.
type Emulator struct {
	Addr string // 127.0.0.1:PORT, the value of FIRESTORE_EMULATOR_HOST or DATASTORE_EMULATOR_HOST
	Mode Mode

	cmd  *exec.Cmd
	done chan struct{}
	log  *tail
	once sync.Once
}

// mainClass is the emulator's entry point in its jar, as gcloud's wrapper
// script names it.
const mainClass = "com.google.cloud.datastore.emulator.firestore.CloudFirestore"

// install is what to do when the emulator or Java is missing.
const install = "run scripts/ensure-firestore.sh (it checks for Java and the emulator and prints the install steps)"

// Jar returns the path of the emulator's jar, found beside the gcloud on
// PATH (or in $SHARDCOUNTER_FIRESTORE_EMULATOR_JAR), or an error saying
// how to install it.
func Jar() (string, error) {
	if p := os.Getenv("SHARDCOUNTER_FIRESTORE_EMULATOR_JAR"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("SHARDCOUNTER_FIRESTORE_EMULATOR_JAR: %v", err)
		}
		return p, nil
	}
	gcloud, err := exec.LookPath("gcloud")
	if err != nil {
		return "", fmt.Errorf("gcloud is not on PATH, so the Firestore emulator cannot be found: %s", install)
	}
	if real, err := filepath.EvalSymlinks(gcloud); err == nil {
		gcloud = real
	}
	root := filepath.Dir(filepath.Dir(gcloud)) // SDK_ROOT/bin/gcloud
	jar := filepath.Join(root, "platform", "cloud-firestore-emulator", "cloud-firestore-emulator.jar")
	if _, err := os.Stat(jar); err != nil {
		return "", fmt.Errorf("the Firestore emulator is not installed (%s is missing): %s", jar, install)
	}
	return jar, nil
}

// Start starts an emulator in mode and waits until it serves. The caller
// stops it with Stop.
func Start(mode Mode) (*Emulator, error) {
	jar, err := Jar()
	if err != nil {
		return nil, err
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("java is not on PATH (the Firestore emulator runs on Java 11 or later): %s", install)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	e := &Emulator{Addr: "127.0.0.1:" + strconv.Itoa(port), Mode: mode, done: make(chan struct{}), log: &tail{}}
	e.cmd = exec.Command(java, "-Duser.language=en", "-cp", jar, mainClass, "start",
		"--host=127.0.0.1", "--port="+strconv.Itoa(port), "--database-mode="+string(mode))
	// No orphaned JVM if the test binary dies; its own process group, so
	// that Stop reaches anything it forks.
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	out, err := e.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	e.cmd.Stderr = e.cmd.Stdout
	if err := e.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the Firestore emulator: %w", err)
	}
	ready := make(chan struct{})
	go func() {
		var once sync.Once
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			e.log.add(line)
			if strings.Contains(line, "Dev App Server is now running") {
				once.Do(func() { close(ready) })
			}
			if err != nil {
				io.Copy(io.Discard, r)
				break
			}
		}
	}()
	go func() { e.cmd.Wait(); close(e.done) }()
	deadline := time.NewTimer(90 * time.Second) // a cold JVM on a busy 2-core machine
	defer deadline.Stop()
	select {
	case <-ready:
	case <-e.done:
		return nil, fmt.Errorf("the Firestore emulator exited at start:\n%s", e.log.String())
	case <-deadline.C:
		e.Stop()
		return nil, fmt.Errorf("the Firestore emulator on %s did not start within 90s:\n%s", e.Addr, e.log.String())
	}
	// The line may come before the server answers, and its first
	// answers are slow while the JVM warms up: wait for one.
	client := &http.Client{Timeout: 30 * time.Second}
	for i := 0; ; i++ {
		resp, err := client.Get("http://" + e.Addr + "/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return e, nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if i == 100 {
			e.Stop()
			return nil, fmt.Errorf("the Firestore emulator on %s does not answer: %v", e.Addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop ends the emulator's JVM (and anything in its process group) and
// waits for it to exit. It is safe to call more than once.
func (e *Emulator) Stop() {
	e.once.Do(func() {
		pgid := e.cmd.Process.Pid
		syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-e.done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-pgid, syscall.SIGKILL)
			<-e.done
		}
	})
}

// Main runs a test binary's tests against an emulator in mode, with env
// (FIRESTORE_EMULATOR_HOST or DATASTORE_EMULATOR_HOST) set to its
// address, as Google's clients read it, and stops it at the end. Call it
// from TestMain. Without an emulator it fails the run.
func Main(m *testing.M, mode Mode) {
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		os.Exit(m.Run()) // a fuzz target needs no database
	}
	if os.Getenv(ChildEnv) != "" {
		os.Exit(m.Run()) // a child of a test: its parent's emulator is in the environment
	}
	e, err := Start(mode)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	env := "FIRESTORE_EMULATOR_HOST"
	if mode == Datastore {
		env = "DATASTORE_EMULATOR_HOST"
	}
	os.Setenv(env, e.Addr)
	running = e
	code := m.Run()
	e.Stop()
	os.Exit(code)
}

// ChildEnv, set in the environment of a test binary that a test runs as
// a child process (a crash test, say), makes Main use the parent's
// emulator, whose address the child inherits, instead of starting one.
const ChildEnv = "SHARDCOUNTER_EMULATOR_CHILD"

// running is the emulator Main started.
var running *Emulator

// Running returns the emulator Main started for this test binary, or
// fails the test.
func Running(tb testing.TB) *Emulator {
	tb.Helper()
	if running == nil {
		tb.Fatal("no Firestore emulator: the package's TestMain must call firestoretest.Main")
	}
	return running
}

var projects struct {
	sync.Mutex
	n int
}

// Project returns a project id no other test of this binary uses, so that
// tests that need a database of their own (an empty one) get it: the
// emulator keeps one database per project.
func Project(tb testing.TB) string {
	tb.Helper()
	projects.Lock()
	defer projects.Unlock()
	projects.n++
	return fmt.Sprintf("demo-test-%d-%d", os.Getpid(), projects.n)
}

// freePort returns a loopback port that is free now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail keeps the last lines of the emulator's output, for errors.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(line string) {
	if line == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > 40 {
		t.lines = t.lines[len(t.lines)-40:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "")
}
