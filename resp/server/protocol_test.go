package server_test

import (
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"testing"
)

// TestMalformedFrames checks each way a frame can be malformed: the
// connection that sent it gets Redis's error reply (when Redis sends one)
// after the replies to the commands before it, and is closed; another
// connection is served throughout.
func TestMalformedFrames(t *testing.T) {
	_, addr := MustServe(t, MustEngine(t), serverOptions())
	other := MustRaw(t, addr)
	n := 0
	incrOther := func() {
		t.Helper()
		n++
		other.send("INCR other\r\n")
		other.expect(":" + strconv.Itoa(n) + "\r\n")
	}
	incrOther()
	for _, tc := range []struct{ name, in, want string }{
		{"HugeBulk", "*2\r\n$4\r\nINCR\r\n$1000000000\r\n", "-ERR Protocol error: invalid bulk length: 1000000000 bytes, the limit is 65536\r\n"},
		{"HugeArray", "*100000000\r\n", "-ERR Protocol error: invalid multibulk length: 100000000 arguments, the limit is 4096\r\n"},
		{"NegativeBulk", "*2\r\n$4\r\nINCR\r\n$-5\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"NegativeArray", "*-2\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"BadTypeByte", "*1\r\n+PING\r\n", "-ERR Protocol error: expected '$', got '+'\r\n"},
		{"BinaryJunk", "*\x00\xff\xfe\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"BinaryJunkTypeByte", "*1\r\n\x00\xff\r\n", "-ERR Protocol error: expected '$', got '\\x00'\r\n"},
		{"NoCRLFAfterBulk", "*1\r\n$4\r\nPINGPING\r\n", "-ERR Protocol error: expected CRLF after a bulk string of 4 bytes\r\n"},
		{"UnbalancedQuotes", "ECHO \"a\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
		{"InlineTooBig", strings.Repeat("a", 70000), "-ERR Protocol error: too big inline request: the limit is 65536 bytes\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := MustRaw(t, addr)
			c.send("PING\r\n*1\r\n$4\r\nPING\r\n" + tc.in)
			c.expect("+PONG\r\n", "+PONG\r\n", tc.want)
			c.expectClosed()
			incrOther()
		})
	}
	t.Run("Truncated", func(t *testing.T) {
		c := MustRaw(t, addr)
		c.send("PING\r\n*2\r\n$4\r\nINCR\r\n$5\r\nli")
		c.nc.(*net.TCPConn).CloseWrite()
		c.expect("+PONG\r\n")
		c.expectClosed()
		incrOther()
	})
	t.Run("InlineJunkIsAnUnknownCommand", func(t *testing.T) {
		// As in Redis: a line of junk is a command nobody has, not a
		// framing error, and the connection goes on.
		c := MustRaw(t, addr)
		c.send("\xff\xfe \x01\r\nPING\r\n")
		c.expect("-ERR unknown command '\xff\xfe', with args beginning with: '\x01' \r\n", "+PONG\r\n")
		incrOther()
	})
	t.Run("RandomJunk", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for range 200 {
			c := MustRaw(t, addr)
			junk := make([]byte, rng.IntN(300))
			for i := range junk {
				junk[i] = byte(rng.IntN(256))
				if rng.IntN(8) == 0 {
					junk[i] = "*$\r\n0123456789-"[rng.IntN(15)]
				}
			}
			c.send(string(junk))
			c.nc.Close()
		}
		incrOther()
	})
}

// TestInline checks commands sent as lines, as telnet sends them.
func TestInline(t *testing.T) {
	_, addr := MustServe(t, MustEngine(t), serverOptions())
	c := MustRaw(t, addr)
	// The two writes are pipelined, so they are one WriteBatch, which
	// commits them together: both reply the value after that commit.
	c.send("INCR likes\r\nINCRBY likes 41\nGET likes\r\n\r\nECHO \"a b\\x21\"\r\nGET 'likes'\r\n")
	c.expect(":42\r\n", ":42\r\n", "$2\r\n42\r\n", "$4\r\na b!\r\n", "$2\r\n42\r\n")
}

// TestPipelineOrder checks that the commands of one pipeline take effect
// in the order sent, across writes, reads and other commands.
func TestPipelineOrder(t *testing.T) {
	_, addr := MustServe(t, MustEngine(t), serverOptions())
	c := MustRaw(t, addr)
	c.send("INCR k\r\nGET k\r\nINCRBY k 2\r\nINCRBY k x\r\nDEL k\r\nGET k\r\nINCR k\r\nEXISTS k\r\nDECR k\r\nGET k\r\n")
	c.expect(":1\r\n", "$1\r\n1\r\n", ":3\r\n", "-ERR value is not an integer or out of range\r\n",
		":1\r\n", "$-1\r\n", ":1\r\n", ":1\r\n", ":0\r\n", "$1\r\n0\r\n")
}
