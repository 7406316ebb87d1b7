package server_test

import (
	"context"
	"testing"

	"github.com/shardcounter/shardcounter/resp/server"
)

func TestAuth(t *testing.T) {
	s, addr := MustServe(t, MustEngine(t), server.Options{AuthTokens: []string{"s3cret", "other"}})
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		t.Run("RESP"+string(rune('0'+proto)), func(t *testing.T) {
			wantPrefix(t, "no password", MustClient(t, addr, proto, "").Incr(ctx, "k").Err(), "NOAUTH ")
			wantErr(t, "wrong password", MustClient(t, addr, proto, "wrong").Incr(ctx, "k").Err(), "WRONGPASS invalid username-password pair or user is disabled.")
			if err := MustClient(t, addr, proto, "s3cret").Incr(ctx, "k").Err(); err != nil {
				t.Errorf("with the token: %v", err)
			}
		})
	}

	c := MustRaw(t, addr)
	c.send("PING\r\nINCR k\r\nNOPE\r\nINCR\r\n")
	// As Redis, an unknown command or a wrong argument count is said
	// before authentication is asked for.
	c.expect("-NOAUTH Authentication required.\r\n", "-NOAUTH Authentication required.\r\n",
		"-ERR unknown command 'NOPE', with args beginning with: \r\n",
		"-ERR wrong number of arguments for 'incr' command\r\n")
	c.send("AUTH wrong\r\nAUTH someone s3cret\r\nHELLO 3\r\nPING\r\n")
	c.expect("-WRONGPASS invalid username-password pair or user is disabled.\r\n",
		"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
		"-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n",
		"-NOAUTH Authentication required.\r\n")
	// AUTH applies to the commands pipelined after it, not before.
	c.send("INCR p\r\nAUTH s3cret\r\nINCR p\r\nRESET\r\nINCR p\r\nAUTH default other\r\nINCR p\r\n")
	c.expect("-NOAUTH Authentication required.\r\n", "+OK\r\n", ":1\r\n", "+RESET\r\n",
		"-NOAUTH Authentication required.\r\n", "+OK\r\n", ":2\r\n")

	h := MustRaw(t, addr)
	h.send("HELLO 3 AUTH default s3cret SETNAME app\r\nCLIENT GETNAME\r\n")
	if first := h.skipReply(); first != "%7" {
		t.Errorf("HELLO 3 AUTH: reply starts %q, want a map of 7", first)
	}
	h.expect("$3\r\napp\r\n")

	// Tokens can be replaced while serving: a connection whose token is
	// still accepted stays in; one whose token was removed gets -NOAUTH
	// on its next command, and no more: it is closed.
	s.SetAuthTokens([]string{"rotated", "other"})
	n := MustRaw(t, addr)
	n.send("AUTH s3cret\r\nAUTH rotated\r\nPING\r\n")
	n.expect("-WRONGPASS invalid username-password pair or user is disabled.\r\n", "+OK\r\n", "+PONG\r\n")
	c.send("PING\r\n")
	c.expect("+PONG\r\n")
	h.send("PING\r\nINCR p\r\nPING\r\n")
	h.expect("-NOAUTH Authentication required.\r\n")
	h.expectClosed()
	s.SetAuthTokens([]string{"rotated"})
	c.send("INCR p\r\n")
	c.expect("-NOAUTH Authentication required.\r\n")
	c.expectClosed()
	n.send("INCR p\r\n")
	n.expect(":3\r\n") // the two INCR p sent with removed tokens did nothing
}

func TestAuthWithoutTokens(t *testing.T) {
	_, addr := MustServe(t, MustEngine(t), serverOptions())
	c := MustRaw(t, addr)
	c.send("AUTH x\r\nAUTH default x\r\nAUTH someone x\r\nPING\r\n")
	c.expect("-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n",
		"+OK\r\n", "-WRONGPASS invalid username-password pair or user is disabled.\r\n", "+PONG\r\n")
}
