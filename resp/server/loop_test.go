package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter/resp/server"
)

// heldLoop serves an engine through the event loop behind a faulty
// service, connects 11 clients, each served once (a PING answered), and
// sends INCR key from the first. It returns while the loop waits in that
// INCR's WriteBatch, until the test closes f.gate: what the others send
// meanwhile is read in the loop's next cycle. It skips where the loop
// does not serve: off Linux, and in the goroutine pass of the tests.
func heldLoop(t *testing.T, key string) (*faulty, []*raw) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the event loop serves connections on Linux only")
	}
	if connGoroutines {
		t.Skip("SHARDCOUNTER_RESP_GOROUTINES=1: this pass tests serving on goroutines, and the first tested the loop")
	}
	f := &faulty{CounterService: MustEngine(t), entered: make(chan struct{}, 1), gate: make(chan struct{})}
	_, addr := MustServe(t, f, server.Options{})
	conns := make([]*raw, 11)
	for i := range conns {
		conns[i] = MustRaw(t, addr)
		conns[i].send("PING\r\n")
		conns[i].expect("+PONG\r\n")
	}
	conns[0].send("INCR " + key + "\r\n")
	<-f.entered // the loop waits in this WriteBatch
	f.set(func(f *faulty) { f.entered = nil })
	return f, conns
}

// TestLoopBatchesConnections checks that the event loop executes the
// writes of every connection with input in one WriteBatch: ten clients
// that send an INCR while the loop waits for another client's commit get
// theirs in the next batch, one call, which leaves the counter at 11.
func TestLoopBatchesConnections(t *testing.T) {
	f, conns := heldLoop(t, "k")
	first, others := conns[0], conns[1:]
	for _, o := range others {
		// On loopback the command is in the server's socket when the
		// write returns, and the loop reads every ready socket in one
		// cycle once the first batch is done.
		o.send("INCR k\r\n")
	}
	close(f.gate)
	first.expect(":1\r\n")
	for _, o := range others {
		// INCR's value is the counter's after its batch: 11 here.
		if got := o.line(); got != ":11" {
			t.Errorf("INCR of a client in the second batch: %s, want :11", got)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.writes; n != 2 {
		t.Errorf("%d WriteBatch calls for the 11 INCRs, want 2: the first, and one for the ten that came while it ran", n)
	}
}

// TestClientThatStopsReading checks that a client that sends commands
// and never reads their replies is disconnected after WriteTimeout, while
// the server goes on serving another client meanwhile. Its replies fill
// the socket's buffers, so sending them waits; in the event loop, that
// connection is then no longer read.
func TestClientThatStopsReading(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		t.Run(fmt.Sprintf("ConnGoroutines=%v", goroutines), func(t *testing.T) {
			_, addr := MustServe(t, MustEngine(t), server.Options{ConnGoroutines: goroutines, WriteTimeout: 300 * time.Millisecond})
			stuck, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer stuck.Close()
			stuck.(*net.TCPConn).SetReadBuffer(4096)
			// ECHO replies as long as the command: 64 KiB a command, until
			// the server stops taking them or closes.
			big := strings.Repeat("x", 60000)
			cmd := fmt.Sprintf("*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", len(big), big)
			closed := make(chan error, 1)
			go func() {
				for {
					stuck.SetWriteDeadline(time.Now().Add(20 * time.Second))
					if _, err := stuck.Write([]byte(cmd)); err != nil {
						closed <- err
						return
					}
				}
			}()
			other := MustRaw(t, addr)
			for i := 0; i < 20; i++ {
				other.send("INCR k\r\n")
				other.expect(fmt.Sprintf(":%d\r\n", i+1))
				time.Sleep(10 * time.Millisecond)
			}
			select {
			case <-closed:
			case <-time.After(15 * time.Second):
				t.Fatal("the client that stopped reading is still connected after 15 s, want closed after the write timeout")
			}
			other.send("PING\r\n")
			other.expect("+PONG\r\n")
		})
	}
}

// TestLoopBatchesReads checks that the strong reads (GET, MGET, EXISTS)
// of every connection the loop reads in one cycle are one batch read: ten
// clients whose commands arrive while the loop waits for a commit make one
// ReadCounters call between them.
func TestLoopBatchesReads(t *testing.T) {
	f, conns := heldLoop(t, "a")
	for i, c := range conns[1:] {
		switch i % 3 {
		case 0:
			c.send("MGET a b\r\n")
		case 1:
			c.send("GET a\r\n")
		default:
			c.send("EXISTS a b a\r\n")
		}
	}
	close(f.gate)
	conns[0].expect(":1\r\n")
	for i, c := range conns[1:] {
		switch i % 3 {
		case 0:
			c.expect("*2\r\n$1\r\n1\r\n$-1\r\n")
		case 1:
			c.expect("$1\r\n1\r\n")
		default:
			c.expect(":2\r\n")
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reads != 1 {
		t.Errorf("%d ReadCounters calls for the reads of ten connections, want 1", f.reads)
	}
}

// TestLongPipelineAndSplitFrames checks what a server reading sockets
// that are not ready must get right, both ways of serving: a pipeline far
// longer than one read (20,000 INCRs, about 600 KB), a command that
// arrives in pieces with pauses between them, and more connections at
// once than one epoll_wait returns (300).
func TestLongPipelineAndSplitFrames(t *testing.T) {
	_, addr := MustServe(t, MustEngine(t), serverOptions())
	ctx := context.Background()
	rdb := MustClient(t, addr, 2, "")
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for range 20000 {
			p.Incr(ctx, "long")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v := cmds[len(cmds)-1].(*redis.IntCmd).Val(); v != 20000 {
		t.Errorf("the last of 20,000 pipelined INCRs: %d, want 20000", v)
	}

	r := MustRaw(t, addr)
	for _, piece := range []string{"*2\r\n$4\r\nIN", "CR\r\n$5", "\r\nsplit\r", "\n"} {
		r.send(piece)
		time.Sleep(20 * time.Millisecond)
	}
	r.expect(":1\r\n")

	conns := make([]*raw, 300)
	for i := range conns {
		conns[i] = MustRaw(t, addr)
	}
	for _, c := range conns {
		c.send("INCR many\r\n")
	}
	for _, c := range conns {
		if v := c.line(); !strings.HasPrefix(v, ":") {
			t.Fatalf("INCR many: %q", v)
		}
	}
	if got := MustClient(t, addr, 2, "").Get(ctx, "many").Val(); got != "300" {
		t.Errorf("after 300 connections' INCRs: %s, want 300", got)
	}
}

// TestReplyBackPressureThenError checks that commands a connection sent
// are all served, and its malformed frame answered, when its replies
// filled the socket while everything it sent was already read: a pipeline
// of 1,800 COMMANDs (about 4 MB of replies from 16 KB of input, one read)
// then a bad frame, from a client that reads its replies only after a
// pause. The loop does not read a connection while its replies wait, and
// no new input will wake it: it must go back to what it buffered.
func TestReplyBackPressureThenError(t *testing.T) {
	_, addr := MustServe(t, MustEngine(t), serverOptions())
	// A small receive buffer, set before connecting so that the window
	// is small from the start, makes the replies wait for the client.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte(strings.Repeat("COMMAND\r\n", 1800) + "*x\r\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	out, err := io.ReadAll(nc)
	if err != nil {
		t.Fatalf("after %d bytes of replies (ending %q): %v, want them all and the connection closed", len(out), string(out[max(0, len(out)-60):]), err)
	}
	if n := strings.Count(string(out), "\r\n$4\r\nincr\r\n"); n != 1800 {
		t.Errorf("%d COMMAND replies, want 1800", n)
	}
	if !strings.HasSuffix(string(out), "-ERR Protocol error: invalid multibulk length\r\n") {
		t.Errorf("the replies end with %q, want the protocol error", string(out[max(0, len(out)-80):]))
	}
}
