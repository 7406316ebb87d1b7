// Package redistest starts real redis-server processes for tests: a single
// server, or a Redis Cluster of several masters, each on a free loopback
// port in a temporary directory, stopped when the test (or the caller)
// ends; a cluster may have a replica per master, for failover tests. It
// fails, never skips, when redis-server is missing: run
// scripts/ensure-redis.sh to install it.
package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
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

// Server is one redis-server process.
type Server struct {
	Addr string // 127.0.0.1:PORT
	Dir  string

	cmd  *exec.Cmd
	done chan struct{}

	mu      sync.Mutex
	stopped bool
}

// Binary returns the path of redis-server, or an error saying how to get it.
func Binary() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redis-server is not on PATH: run scripts/ensure-redis.sh (installs the Debian package redis-server)")
	}
	return p, nil
}

// freePort returns a loopback port that is free, and whose cluster bus port
// (port + 10000) is free too.
func freePort() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port+10000 > 65535 {
			continue
		}
		if b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000)); err == nil {
			b.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port pair found")
}

// Start starts a redis-server with no persistence, and extra config
// directives ("name value"), in a new directory under dir. The caller
// stops it with Stop.
func Start(dir string, extra ...string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	d, err := os.MkdirTemp(dir, "redis-"+strconv.Itoa(port)+"-")
	if err != nil {
		return nil, err
	}
	conf := []string{
		"port " + strconv.Itoa(port),
		"bind 127.0.0.1",
		"dir " + d,
		"save \"\"",
		"appendonly no",
		"protected-mode no",
		"logfile " + filepath.Join(d, "redis.log"),
	}
	conf = append(conf, extra...)
	if err := os.WriteFile(filepath.Join(d, "redis.conf"), []byte(strings.Join(conf, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Dir: d}
	if err := s.launch(bin); err != nil {
		return nil, err
	}
	return s, nil
}

// launch runs redis-server on the configuration in s.Dir and waits until
// it answers.
func (s *Server) launch(bin string) error {
	s.done = make(chan struct{})
	s.cmd = exec.Command(bin, filepath.Join(s.Dir, "redis.conf"))
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // no orphans if the test binary dies
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	cmd, done := s.cmd, s.done
	go func() { cmd.Wait(); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if reply, err := s.Do("PING"); err == nil && reply == "+PONG" {
			return nil
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
			return fmt.Errorf("redis-server on %s exited at start:\n%s", s.Addr, log)
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("redis-server on %s did not answer within 10s", s.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Restart stops the server if it runs and starts it again on the same
// port, directory and configuration, as an operator restarting it would.
// Whether data survives depends on the persistence directives given to
// Start (appendonly yes keeps it).
func (s *Server) Restart() error {
	s.Stop()
	bin, err := Binary()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.stopped = false
	s.mu.Unlock()
	return s.launch(bin)
}

// MustStart starts a server for the test and stops it when the test ends.
func MustStart(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	s, err := Start(tb.TempDir(), extra...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// Do sends one command in the inline protocol and returns the first line of
// the reply (e.g. "+OK", ":1", "$5") followed, for a bulk reply, by its
// body. It is enough to set a cluster up without a client library.
func (s *Server) Do(args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if strings.HasPrefix(line, "-") {
		return "", fmt.Errorf("%s: %s", strings.Join(args, " "), line[1:])
	}
	if strings.HasPrefix(line, "$") {
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		body := make([]byte, n+2)
		if _, err := io.ReadFull(r, body); err != nil {
			return "", err
		}
		return string(body[:n]), nil
	}
	return line, nil
}

// Kill ends the server with SIGKILL, as a crash would, and waits for it.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped {
		s.stopped = true
		s.cmd.Process.Kill()
		<-s.done
	}
}

// Pause stops the server's process (SIGSTOP) without ending it, as a
// machine that hangs or a network that drops everything would: it neither
// answers nor replicates until Resume.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return fmt.Errorf("redistest: %s is stopped", s.Addr)
	}
	return s.cmd.Process.Signal(sig)
}

// Stop ends the server and waits for it.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped {
		s.stopped = true
		s.cmd.Process.Signal(syscall.SIGCONT) // a paused server must run to end
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
		}
	}
}

// Cluster is a Redis Cluster: its masters and, when it was started with
// some, their replicas (Replicas[i] replicates Masters[i]).
type Cluster struct {
	Masters  []*Server
	Replicas []*Server
}

// Addrs returns the masters' addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, m := range c.Masters {
		out = append(out, m.Addr)
	}
	return out
}

// Stop stops every node.
func (c *Cluster) Stop() {
	for _, m := range append(c.Masters, c.Replicas...) {
		m.Stop()
	}
}

// clusterConfig is the configuration of every node: fast failure
// detection, the slots of live masters served when one is down, and a
// replica that may always take over (its data's age does not matter for
// tests, which kill masters on purpose).
var clusterConfig = []string{"cluster-enabled yes", "cluster-config-file nodes.conf",
	"cluster-node-timeout 1000", "cluster-require-full-coverage no",
	"cluster-replica-validity-factor 0", "repl-diskless-sync yes", "repl-diskless-sync-delay 0"}

// StartCluster starts n masters with no replicas, gives master i the i-th
// contiguous range of the 16384 slots (CLUSTER ADDSLOTSRANGE), joins them
// (CLUSTER MEET) and waits until every master reports cluster_state:ok and
// knows every slot's owner.
func StartCluster(dir string, n int) (*Cluster, error) {
	return StartClusterReplicas(dir, n, false)
}

// StartClusterReplicas starts a cluster as StartCluster does, and with
// replicas one replica per master, attached with CLUSTER REPLICATE; it
// returns once every replica is in sync with its master.
func StartClusterReplicas(dir string, n int, replicas bool) (*Cluster, error) {
	c := &Cluster{}
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()
	for range n {
		s, err := Start(dir, clusterConfig...)
		if err != nil {
			return nil, err
		}
		c.Masters = append(c.Masters, s)
	}
	if replicas {
		for range n {
			s, err := Start(dir, clusterConfig...)
			if err != nil {
				return nil, err
			}
			c.Replicas = append(c.Replicas, s)
		}
	}
	for i, s := range c.Masters {
		lo, hi := i*16384/n, (i+1)*16384/n-1
		if _, err := s.Do("CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			return nil, err
		}
	}
	all := append(append([]*Server(nil), c.Masters...), c.Replicas...)
	for _, s := range all[1:] {
		host, port, _ := net.SplitHostPort(s.Addr)
		if _, err := c.Masters[0].Do("CLUSTER", "MEET", host, port); err != nil {
			return nil, err
		}
	}
	if err := waitFor(30*time.Second, "every node to know every other", func() bool {
		for _, s := range all {
			if info, err := s.Do("CLUSTER", "INFO"); err != nil || !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(all))) {
				return false
			}
		}
		return true
	}); err != nil {
		return nil, err
	}
	for i, r := range c.Replicas {
		id, err := c.Masters[i].Do("CLUSTER", "MYID")
		if err != nil {
			return nil, err
		}
		// A replica may not know the master's id as a master yet: retry.
		if err := waitFor(10*time.Second, "CLUSTER REPLICATE to succeed", func() bool {
			_, err := r.Do("CLUSTER", "REPLICATE", id)
			return err == nil
		}); err != nil {
			return nil, err
		}
	}
	if err := waitFor(30*time.Second, fmt.Sprintf("a cluster of %d masters to be ready", n), func() bool {
		for _, s := range c.Masters {
			info, err := s.Do("CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_assigned:16384") {
				return false
			}
		}
		for _, r := range c.Replicas {
			if info, err := r.Do("INFO", "replication"); err != nil || !strings.Contains(info, "master_link_status:up") {
				return false
			}
		}
		return true
	}); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// WaitFailover waits until a replica has taken over the slots of the
// master m, killed by the caller, as the surviving masters see it, and
// returns the new master.
func (c *Cluster) WaitFailover(m *Server, timeout time.Duration) (*Server, error) {
	var promoted *Server
	err := waitFor(timeout, "a replica to take over from "+m.Addr, func() bool {
		for _, r := range c.Replicas {
			info, err := r.Do("INFO", "replication")
			if err != nil || !strings.Contains(info, "role:master") {
				continue
			}
			// Its slots must be known as its own by another master.
			for _, o := range c.Masters {
				if o == m {
					continue
				}
				nodes, err := o.Do("CLUSTER", "NODES")
				if err != nil {
					return false
				}
				for _, line := range strings.Split(nodes, "\n") {
					f := strings.Fields(line)
					if len(f) > 8 && strings.HasPrefix(f[1], r.Addr+"@") && strings.Contains(f[2], "master") {
						promoted = r
						return true
					}
				}
			}
		}
		return false
	})
	return promoted, err
}

// waitFor polls done every 50ms until it holds or timeout passes.
func waitFor(timeout time.Duration, what string, done func() bool) error {
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// MustStartCluster starts a cluster for the test and stops it when the
// test ends.
func MustStartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	c, err := StartCluster(tb.TempDir(), n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Stop)
	return c
}

// MustStartClusterReplicas starts a cluster of n masters, each with one
// replica, for the test and stops it when the test ends.
func MustStartClusterReplicas(tb testing.TB, n int) *Cluster {
	tb.Helper()
	c, err := StartClusterReplicas(tb.TempDir(), n, true)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Stop)
	return c
}
