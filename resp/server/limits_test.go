package server_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/internal/authtoken"
	"github.com/shardcounter/shardcounter/resp/server"
)

// bigMGET is an MGET of n keys of 100 bytes, as one RESP array.
func bigMGET(n int) string {
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(n+1) + "\r\n$4\r\nMGET\r\n")
	key := strings.Repeat("k", 100)
	for range n {
		b.WriteString("$100\r\n" + key + "\r\n")
	}
	return b.String()
}

// TestPreAuthLimits checks that, with tokens required, a connection that
// has not authenticated may send only small commands (CVE-2021-32675 in
// Redis): an array announcing many arguments, or a command larger than
// 4 KiB, is a protocol error that closes the connection at once; AUTH
// pipelined with a large command is read first, and the command after it
// under the limits of an authenticated connection.
func TestPreAuthLimits(t *testing.T) {
	_, addr := MustServe(t, MustEngine(t), server.Options{AuthTokens: []string{"s3cret"}})

	c := MustRaw(t, addr)
	c.send("*4000\r\n$4\r\nMGET\r\n")
	if got := c.line(); !strings.HasPrefix(got, "-ERR Protocol error: invalid multibulk length") || !strings.Contains(got, "before AUTH") {
		t.Fatalf("4,000 arguments before AUTH: %q", got)
	}
	c.expectClosed()

	c = MustRaw(t, addr)
	c.send("*2\r\n$4\r\nECHO\r\n$5000\r\n" + strings.Repeat("x", 100))
	if got := c.line(); !strings.HasPrefix(got, "-ERR Protocol error:") {
		t.Fatalf("a 5,000-byte argument before AUTH: %q", got)
	}
	c.expectClosed()

	c = MustRaw(t, addr)
	c.send("AUTH s3cret\r\n" + bigMGET(300)) // 32 KiB after AUTH: fine once authenticated
	if got := c.line(); got != "+OK" {
		t.Fatalf("AUTH: %q", got)
	}
	if got := c.skipReply(); got != "*300" {
		t.Fatalf("MGET of 300 keys after AUTH: %q", got)
	}
	// RESET makes the connection unauthenticated again, with the small limits.
	c.send("RESET\r\n")
	c.expect("+RESET\r\n")
	c.send(bigMGET(20))
	if got := c.line(); !strings.HasPrefix(got, "-ERR Protocol error:") {
		t.Fatalf("20 arguments after RESET: %q", got)
	}
	c.expectClosed()
}

// TestReadTimeout checks --resp-read-timeout: a command whose first bytes
// came and whose rest does not is answered with a protocol error and the
// connection closed within the timeout, also when the rest trickles in;
// an idle connection, with nothing buffered, stays open.
func TestReadTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	_, addr := MustServe(t, MustEngine(t), server.Options{ReadTimeout: timeout})
	idle := MustRaw(t, addr)
	half := MustRaw(t, addr)
	trickle := MustRaw(t, addr)
	start := time.Now()
	half.send("*2\r\n$4\r\nINCR\r\n$3\r\nab")
	trickle.send("*2\r\n$4\r\nINCR\r\n$100\r\n")
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(timeout / 10):
				trickle.nc.Write([]byte("x"))
			}
		}
	}()
	defer close(stop)
	for _, c := range []*raw{half, trickle} {
		if got := c.line(); !strings.Contains(got, "did not arrive in full") {
			t.Fatalf("half-sent command: %q", got)
		}
		c.expectClosed()
	}
	if took := time.Since(start); took > 10*timeout {
		t.Errorf("half-sent commands were closed after %v, want about %v", took, timeout)
	}
	idle.send("PING\r\n")
	idle.expect("+PONG\r\n")
	// A command that completes starts the time afresh: a pipeline sent in
	// parts, each within the timeout, is served whole.
	p := MustRaw(t, addr)
	for range 4 {
		p.send("PING\r\nPI")
		time.Sleep(timeout / 2)
		p.send("NG\r\n")
	}
	p.expect(strings.Repeat("+PONG\r\n", 8))
}

// TestInputMemory checks MaxInputMemory: a connection whose input would
// take the buffers of all connections past it is answered with a
// protocol error and closed, and the others are served.
func TestInputMemory(t *testing.T) {
	_, addr := MustServe(t, MustEngine(t), server.Options{MaxInputMemory: 100 << 10})
	a, b := MustRaw(t, addr), MustRaw(t, addr)
	a.send("*2\r\n$4\r\nECHO\r\n$60000\r\n" + strings.Repeat("x", 50000)) // holds 64 KiB, waiting
	time.Sleep(100 * time.Millisecond)
	b.send("*2\r\n$4\r\nECHO\r\n$60000\r\n" + strings.Repeat("x", 50000))
	if got := b.line(); !strings.Contains(got, "input buffers are full") {
		t.Fatalf("a second 64 KiB command within 100 KiB: %q", got)
	}
	b.expectClosed()
	a.send(strings.Repeat("x", 10000) + "\r\n")
	if got := a.skipReply(); got != "$60000" {
		t.Fatalf("the first command, completed: %q", got)
	}
	c := MustRaw(t, addr)
	c.send("PING\r\n")
	c.expect("+PONG\r\n")
}

// TestWrongPassThrottle checks that after a burst of 100 failed AUTH from
// one address, each further -WRONGPASS is delayed by at least 100 ms,
// while the right token is answered at once and works, and INFO counts
// them.
func TestWrongPassThrottle(t *testing.T) {
	// An allowance that comes back slowly, so that a slow test run still
	// makes its 100 failures within the burst.
	guard := &authtoken.Guard{Interval: time.Hour}
	_, addr := MustServe(t, MustEngine(t), server.Options{AuthTokens: []string{"s3cret"}, AuthGuard: guard})
	c := MustRaw(t, addr)
	for range 100 {
		c.send("AUTH wrong\r\n")
		c.expect("-WRONGPASS invalid username-password pair or user is disabled.\r\n")
	}
	for range 3 {
		start := time.Now()
		c.send("AUTH wrong\r\n")
		c.expect("-WRONGPASS invalid username-password pair or user is disabled.\r\n")
		if took := time.Since(start); took < authtoken.DefaultDelay {
			t.Fatalf("a failure past the burst was answered after %v, want ≥ 100ms", took)
		}
	}
	c.send("AUTH s3cret\r\nINCR k\r\n")
	c.expect("+OK\r\n", ":1\r\n")
	info, err := MustClient(t, addr, 2, "s3cret").Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"total_auth_failures:103\r\n", "total_auth_throttled:3\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO stats lacks %q:\n%s", want, info)
		}
	}
}
