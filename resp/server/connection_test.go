package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestConnectionCommands(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) {
		ctx := context.Background()
		if v, err := rdb.Ping(ctx).Result(); err != nil || v != "PONG" {
			t.Errorf("PING: %q, %v", v, err)
		}
		if v, err := rdb.Do(ctx, "PING", "hi").Text(); err != nil || v != "hi" {
			t.Errorf("PING hi: %q, %v", v, err)
		}
		wantErr(t, "PING a b", rdb.Do(ctx, "PING", "a", "b").Err(), "ERR wrong number of arguments for 'ping' command")
		if v, err := rdb.Echo(ctx, "a\r\nb").Result(); err != nil || v != "a\r\nb" {
			t.Errorf("ECHO: %q, %v", v, err)
		}
		if err := rdb.Do(ctx, "SELECT", 0).Err(); err != nil {
			t.Errorf("SELECT 0: %v", err)
		}
		wantErr(t, "SELECT 1", rdb.Do(ctx, "SELECT", 1).Err(), "ERR DB index is out of range")
		wantErr(t, "SELECT x", rdb.Do(ctx, "SELECT", "x").Err(), "ERR value is not an integer or out of range")
		wantErr(t, "unknown", rdb.Do(ctx, "LPUSH", "l", "x").Err(), "ERR unknown command 'LPUSH', with args beginning with: 'l' 'x' ")

		// CLIENT: one connection, so that the name sticks.
		conn := rdb.Conn()
		defer conn.Close()
		if v, err := conn.ClientGetName(ctx).Result(); err != redis.Nil {
			t.Errorf("CLIENT GETNAME before SETNAME: %q, %v; want nil", v, err)
		}
		if err := conn.ClientSetName(ctx, "worker-1").Err(); err != nil {
			t.Errorf("CLIENT SETNAME: %v", err)
		}
		if v, err := conn.ClientGetName(ctx).Result(); err != nil || v != "worker-1" {
			t.Errorf("CLIENT GETNAME: %q, %v", v, err)
		}
		wantPrefix(t, "CLIENT SETNAME with a space", conn.Do(ctx, "CLIENT", "SETNAME", "a b").Err(), "ERR Client names cannot contain spaces")
		id, err := conn.ClientID(ctx).Result()
		if err != nil || id <= 0 {
			t.Errorf("CLIENT ID: %d, %v", id, err)
		}
		if err := conn.Do(ctx, "CLIENT", "SETINFO", "LIB-NAME", "mylib").Err(); err != nil {
			t.Errorf("CLIENT SETINFO: %v", err)
		}
		info, err := conn.ClientInfo(ctx).Result()
		if err != nil || info.ID != id || info.Name != "worker-1" || info.LibName != "mylib" || info.Resp != proto {
			t.Errorf("CLIENT INFO: %+v, %v", info, err)
		}
		wantErr(t, "CLIENT KILL", conn.Do(ctx, "CLIENT", "KILL", "x").Err(), "ERR unknown subcommand 'KILL'. Try CLIENT HELP.")

		// HELLO switches the protocol of the connection.
		hello, err := conn.Do(ctx, "HELLO", 3).Result()
		if err != nil {
			t.Fatalf("HELLO 3: %v", err)
		}
		if m := hello.(map[any]any); m["proto"] != int64(3) || m["server"] != "shardcounter" || m["id"] != id {
			t.Errorf("HELLO 3: %v", m)
		}
		wantErr(t, "HELLO 4", conn.Do(ctx, "HELLO", 4).Err(), "NOPROTO unsupported protocol version")
		wantPrefix(t, "HELLO junk", conn.Do(ctx, "HELLO", 3, "FOO").Err(), "ERR Syntax error in HELLO option 'FOO'")

		// COMMAND as go-redis parses it.
		cmds, err := rdb.Command(ctx).Result()
		if err != nil {
			t.Fatalf("COMMAND: %v", err)
		}
		for _, name := range []string{"incr", "get", "mget", "sadd", "sc.incrby", "hello", "info"} {
			if cmds[name] == nil {
				t.Errorf("COMMAND lacks %s", name)
			}
		}
		if c := cmds["incr"]; c != nil && (c.Arity != 2 || c.FirstKeyPos != 1 || !contains(c.Flags, "write")) {
			t.Errorf("COMMAND incr: %+v", c)
		}
		if n, err := rdb.Do(ctx, "COMMAND", "COUNT").Int(); err != nil || n != len(cmds) {
			t.Errorf("COMMAND COUNT: %d, %v; want %d", n, err, len(cmds))
		}
		if err := rdb.Do(ctx, "COMMAND", "DOCS").Err(); err != nil {
			t.Errorf("COMMAND DOCS: %v", err)
		}

		cfg, err := rdb.ConfigGet(ctx, "save").Result()
		if err != nil || len(cfg) != 1 || cfg["save"] != "" {
			t.Errorf("CONFIG GET save: %v, %v", cfg, err)
		}
		if cfg, err := rdb.ConfigGet(ctx, "append*").Result(); err != nil || cfg["appendonly"] != "yes" || cfg["appendfsync"] != "always" {
			t.Errorf("CONFIG GET append*: %v, %v", cfg, err)
		}
		wantPrefix(t, "CONFIG SET", rdb.ConfigSet(ctx, "save", "").Err(), "ERR CONFIG SET is not supported")

		rdb.Incr(ctx, "x")
		text, err := rdb.Info(ctx).Result()
		for _, want := range []string{"# Server\r\n", "redis_version:", "connected_clients:", "# Engine\r\n", "engine_writes:1\r\n", "engine_commits:"} {
			if !strings.Contains(text, want) {
				t.Errorf("INFO lacks %q: %q, %v", want, text, err)
			}
		}
		if text, err := rdb.Info(ctx, "clients").Result(); err != nil || strings.Contains(text, "# Server") || !strings.Contains(text, "# Clients") {
			t.Errorf("INFO clients: %q, %v", text, err)
		}
	})
}

// TestQuitReset checks QUIT (an OK, then the connection closes) and RESET
// (back to RESP2, no name).
func TestQuitReset(t *testing.T) {
	_, addr := MustServe(t, MustEngine(t), serverOptions())
	c := MustRaw(t, addr)
	c.send("HELLO 3\r\nCLIENT SETNAME me\r\nRESET\r\nCLIENT GETNAME\r\nQUIT\r\nPING\r\n")
	c.skipReply() // the HELLO map
	c.expect("+OK\r\n", "+RESET\r\n", "$-1\r\n", "+OK\r\n")
	c.expectClosed()
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}
