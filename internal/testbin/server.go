package testbin

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Server is a running `shardcounter serve`, started by Start.
type Server struct {
	URL  string // http://host:port
	RESP string // host:port, when serve was given --resp-listen
	Cmd  *exec.Cmd
	Logs Output // everything it has written to stderr

	done chan struct{}
}

var (
	httpAddrRE = regexp.MustCompile(`msg="shardcounter serving" addr=(\S+)`)
	respAddrRE = regexp.MustCompile(`msg="serving the Redis protocol" addr=(\S+)`)
)

// Start runs `bin serve args...` in the directory dir (serve's default
// store is under its working directory), with this process's environment
// less every SHARDCOUNTER_ variable (so that only args configure it), and
// waits until it serves HTTP and, when args hold --resp-listen, RESP: it
// reads the addresses from serve's log, so a listen address may give port
// 0. A server that exits or does not listen within timeout is an error
// holding its log. The caller ends it with Kill.
func Start(bin, dir string, timeout time.Duration, args ...string) (*Server, error) {
	s := &Server{done: make(chan struct{})}
	s.Cmd = exec.Command(bin, append([]string{"serve"}, args...)...)
	s.Cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHARDCOUNTER_") {
			s.Cmd.Env = append(s.Cmd.Env, kv)
		}
	}
	stderr, err := s.Cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := s.Cmd.Start(); err != nil {
		return nil, err
	}
	wantRESP := slices.Contains(args, "--resp-listen")
	addrs := make(chan [2]string, 1)
	go func() {
		var h, r string
		sent := false
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.Logs.Write([]byte(sc.Text() + "\n"))
			if m := httpAddrRE.FindStringSubmatch(sc.Text()); m != nil {
				h = m[1]
			}
			if m := respAddrRE.FindStringSubmatch(sc.Text()); m != nil {
				r = m[1]
			}
			if !sent && h != "" && (r != "" || !wantRESP) {
				addrs <- [2]string{h, r}
				sent = true
			}
		}
		io.Copy(io.Discard, stderr)
		s.Cmd.Wait()
		close(s.done)
	}()
	select {
	case a := <-addrs:
		s.URL, s.RESP = "http://"+a[0], a[1]
		return s, nil
	case <-s.done:
		return nil, fmt.Errorf("serve exited before listening:\n%s", s.Logs.String())
	case <-time.After(timeout):
		s.Kill()
		return nil, fmt.Errorf("serve did not listen within %v:\n%s", timeout, s.Logs.String())
	}
}

// Kill ends the server with SIGKILL, as a crash would, and waits until it
// has exited. It may be called more than once.
func (s *Server) Kill() {
	s.Cmd.Process.Kill()
	<-s.done
}

// Done is closed once the server has exited.
func (s *Server) Done() <-chan struct{} { return s.done }
