package server

import (
	"fmt"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter/acl"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/internal/authtoken"
	"github.com/shardcounter/shardcounter/resp"
)

// This file holds the commands about the connection and the server:
// PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET, CLIENT, COMMAND, CONFIG
// and INFO, answered as Redis answers them.

// redisVersion is the Redis version whose commands the server follows,
// reported as redis_version so that clients that gate features on it
// (RESP3, CLIENT SETINFO) find what they need.
const redisVersion = "7.2.0"

func cmdPing(c *conn, args [][]byte) {
	switch len(args) {
	case 1:
		c.w.Simple("PONG")
	case 2:
		c.w.Bulk(args[1])
	default:
		c.w.Error("ERR wrong number of arguments for 'ping' command")
	}
}

func cmdEcho(c *conn, args [][]byte) { c.w.Bulk(args[1]) }

// cmdHello is HELLO [protover [AUTH username password] [SETNAME name]]:
// it switches the protocol, authenticates, names the connection, and
// replies with a map about the server.
func cmdHello(c *conn, args [][]byte) {
	proto := c.w.Proto()
	i := 1
	if len(args) > 1 {
		v, ok := resp.ParseInt(args[1])
		if !ok {
			c.w.Error("ERR Protocol version is not an integer or out of range")
			return
		}
		if v != 2 && v != 3 {
			c.w.Error("NOPROTO unsupported protocol version")
			return
		}
		proto, i = int(v), 2
	}
	var user, pass, name []byte
	auth, setName := false, false
	for ; i < len(args); i++ {
		switch opt := lower(args[i]); {
		case opt == "auth" && i+2 < len(args):
			auth, user, pass = true, args[i+1], args[i+2]
			i += 2
		case opt == "setname" && i+1 < len(args):
			setName, name = true, args[i+1]
			i++
		default:
			c.w.Error("ERR Syntax error in HELLO option '" + clip(args[i]) + "'")
			return
		}
	}
	if auth {
		if msg := c.auth(user, pass); msg != "" {
			c.w.Error(msg)
			return
		}
	}
	if !c.authOK() {
		c.w.Error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	if setName {
		if msg := validName(name); msg != "" {
			c.w.Error(msg)
			return
		}
		c.name = string(name)
	}
	c.w.SetProto(proto)
	c.w.Map(7)
	c.w.BulkString("server")
	c.w.BulkString("shardcounter")
	c.w.BulkString("version")
	c.w.BulkString(c.s.opts.Version)
	c.w.BulkString("proto")
	c.w.Int(int64(proto))
	c.w.BulkString("id")
	c.w.Int(c.id)
	c.w.BulkString("mode")
	c.w.BulkString("standalone")
	c.w.BulkString("role")
	c.w.BulkString("master")
	c.w.BulkString("modules")
	c.w.Array(0)
}

// cmdAuth is AUTH password or AUTH username password.
func cmdAuth(c *conn, args [][]byte) {
	switch len(args) {
	case 2:
		if !c.s.users.Required() {
			c.w.Error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
			return
		}
		if msg := c.auth([]byte("default"), args[1]); msg != "" {
			c.w.Error(msg)
			return
		}
	case 3:
		if msg := c.auth(args[1], args[2]); msg != "" {
			c.w.Error(msg)
			return
		}
	default:
		c.w.Error(errSyntax)
		return
	}
	c.w.Simple("OK")
}

// auth checks a user name and password, returning the error reply when
// they do not match. Without users (no --users-file, no token file) the
// only user is "default", which takes any password, as Redis's default
// user does with nopass; the token file's tokens are default's passwords.
//
// A failure is written to the audit trail, with the user name tried and
// never the password, and counted by the server's AuthGuard; past its address's
// burst, the reply is held back (conn.delay) by the Guard's wait, at least
// 100 ms. A right password is never slowed.
func (c *conn) auth(user, pass []byte) string {
	gen := c.s.users.Generation() // before the check: a change after it is seen by authOK
	u := c.s.users.Authenticate(user, pass)
	if u == nil {
		outcome := "refused: wrong user name or password, or the user is off"
		if v := c.s.opts.AuthGuard.Fail(authtoken.RESP, c.raddr.String()); v.Throttled {
			c.delay = max(c.delay, v.Delay)
			outcome += "; reply delayed, too many failures from the address"
		}
		c.s.opts.Audit.Log("resp", c.raddr.String(), clip(user), "auth", nil, outcome)
		return errWrongPass
	}
	if !c.authed {
		c.rd.SetLimits(c.s.opts.Limits)
	}
	d := acl.DigestOf(pass)
	c.authed, c.user, c.pass, c.userGen = true, u, &d, gen
	return ""
}

func cmdSelect(c *conn, args [][]byte) {
	switch v, ok := resp.ParseInt(args[1]); {
	case !ok:
		c.w.Error(errNotInteger)
	case v != 0:
		c.w.Error("ERR DB index is out of range")
	default:
		c.w.Simple("OK")
	}
}

func cmdQuit(c *conn, args [][]byte) {
	c.w.Simple("OK")
	c.quit = true
}

// cmdReset puts the connection back as it was when it connected: RESP2, no
// name, and not authenticated when the server needs AUTH.
func cmdReset(c *conn, args [][]byte) {
	c.w.SetProto(2)
	c.name = ""
	c.tx = nil
	c.user, c.pass, c.userGen = c.s.users.Unauthenticated(), nil, c.s.users.Generation()
	if c.authed = c.user != nil; !c.authed {
		c.rd.SetLimits(c.s.preAuth)
	}
	c.w.Simple("RESET")
}

// validName checks a connection name as Redis does: printable ASCII
// without spaces.
func validName(name []byte) string {
	for _, ch := range name {
		if ch < '!' || ch > '~' {
			return "ERR Client names cannot contain spaces, newlines or special characters."
		}
	}
	return ""
}

// cmdClient is CLIENT SETNAME, GETNAME, ID, SETINFO and INFO.
func cmdClient(c *conn, args [][]byte) {
	sub := lower(args[1])
	wrong := func() { c.w.Error("ERR wrong number of arguments for 'client|" + sub + "' command") }
	switch sub {
	case "setname":
		if len(args) != 3 {
			wrong()
			return
		}
		if msg := validName(args[2]); msg != "" {
			c.w.Error(msg)
			return
		}
		c.name = string(args[2])
		c.w.Simple("OK")
	case "getname":
		if len(args) != 2 {
			wrong()
			return
		}
		if c.name == "" {
			c.w.Null()
			return
		}
		c.w.BulkString(c.name)
	case "id":
		if len(args) != 2 {
			wrong()
			return
		}
		c.w.Int(c.id)
	case "setinfo":
		if len(args) != 4 {
			wrong()
			return
		}
		if msg := validName(args[3]); msg != "" {
			c.w.Error("ERR " + sub + " cannot contain spaces, newlines or special characters.")
			return
		}
		switch lower(args[2]) {
		case "lib-name":
			c.libName = string(args[3])
		case "lib-ver":
			c.libVer = string(args[3])
		default:
			c.w.Error("ERR Unrecognized option '" + clip(args[2]) + "'")
			return
		}
		c.w.Simple("OK")
	case "info":
		if len(args) != 2 {
			wrong()
			return
		}
		c.w.Verbatim("txt", c.info()+"\n")
	default:
		c.w.Error("ERR unknown subcommand '" + clip(args[1]) + "'. Try CLIENT HELP.")
	}
}

// info is the connection's line of CLIENT INFO.
func (c *conn) info() string {
	return fmt.Sprintf("id=%d addr=%s laddr=%s name=%s age=%d db=0 resp=%d lib-name=%s lib-ver=%s",
		c.id, c.raddr, c.laddr, c.name, int64(time.Since(c.created).Seconds()), c.w.Proto(), c.libName, c.libVer)
}

// cmdCommand is COMMAND, COMMAND COUNT, COMMAND INFO name..., COMMAND LIST
// and COMMAND DOCS [name...]: for each command its summary (what it does
// here, as docs/RESP.md says) and Redis's group.
func cmdCommand(c *conn, args [][]byte) {
	if len(args) == 1 {
		names := commandNames()
		c.w.Array(len(names))
		for _, n := range names {
			c.commandInfo(commands[n])
		}
		return
	}
	switch sub := lower(args[1]); sub {
	case "count":
		c.w.Int(int64(len(commands)))
	case "list":
		names := commandNames()
		c.w.Array(len(names))
		for _, n := range names {
			c.w.BulkString(n)
		}
	case "info":
		if len(args) == 2 {
			names := commandNames()
			c.w.Array(len(names))
			for _, n := range names {
				c.commandInfo(commands[n])
			}
			return
		}
		c.w.Array(len(args) - 2)
		for _, a := range args[2:] {
			if cmd := commands[lower(a)]; cmd != nil {
				c.commandInfo(cmd)
			} else {
				c.w.NullArray()
			}
		}
	case "docs":
		names := commandNames()
		if len(args) > 2 {
			names = names[:0]
			for _, a := range args[2:] {
				if commands[lower(a)] != nil {
					names = append(names, lower(a))
				}
			}
		}
		c.w.Map(len(names))
		for _, n := range names {
			cmd := commands[n]
			c.w.BulkString(n)
			c.w.Map(2)
			c.w.BulkString("summary")
			c.w.BulkString(cmd.summary)
			c.w.BulkString("group")
			c.w.BulkString(cmd.group)
		}
	default:
		c.w.Error("ERR unknown subcommand '" + clip(args[1]) + "'. Try COMMAND HELP.")
	}
}

// commandInfo writes one command's entry of COMMAND, in Redis 7's shape:
// name, arity, flags, first key, last key, step, ACL categories, tips,
// key specifications, subcommands.
func (c *conn) commandInfo(cmd *command) {
	c.w.Array(10)
	c.w.BulkString(cmd.name)
	c.w.Int(int64(cmd.arity))
	c.w.Set(len(cmd.flags))
	for _, f := range cmd.flags {
		c.w.Simple(f)
	}
	c.w.Int(int64(cmd.firstKey))
	c.w.Int(int64(cmd.lastKey))
	c.w.Int(int64(cmd.step))
	c.w.Set(0)
	c.w.Set(0)
	c.w.Array(0)
	c.w.Array(0)
}

// cmdConfig is CONFIG GET pattern...: the few parameters clients ask
// about (redis-benchmark asks for save and appendonly), describing
// shardcounter in Redis's terms. CONFIG SET and the rest are refused:
// shardcounter is configured by its command line.
func cmdConfig(c *conn, args [][]byte) {
	if lower(args[1]) != "get" {
		c.w.Error("ERR CONFIG " + strings.ToUpper(clip(args[1])) + " is not supported: shardcounter is configured by the flags of shardcounter serve")
		return
	}
	if len(args) < 3 {
		c.w.Error("ERR wrong number of arguments for 'config|get' command")
		return
	}
	fsync := "always" // durable: a write is answered once committed
	if c.s.opts.Durability == engine.Async {
		fsync = "everysec"
	}
	params := [][2]string{
		{"appendfsync", fsync},
		{"appendonly", "yes"},
		{"databases", "1"},
		{"maxclients", strconv.Itoa(c.s.opts.MaxClients)},
		{"save", ""},
	}
	var found [][2]string
	for _, p := range params {
		for _, a := range args[2:] {
			if ok, _ := path.Match(lower(a), p[0]); ok {
				found = append(found, p)
				break
			}
		}
	}
	c.w.Map(len(found))
	for _, p := range found {
		c.w.BulkString(p[0])
		c.w.BulkString(p[1])
	}
}

// cmdInfo is INFO [section...]: the sections server, clients, stats,
// persistence and engine (the group commit at work: writes, batches,
// commit times), or all of them.
func cmdInfo(c *conn, args [][]byte) {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[lower(a)] = true
	}
	all := len(want) == 0 || want["all"] || want["everything"] || want["default"]
	var b strings.Builder
	section := func(name string, lines ...string) {
		if !all && !want[strings.ToLower(name)] {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + name + "\r\n")
		for _, l := range lines {
			b.WriteString(l + "\r\n")
		}
	}
	s := c.s
	port := ""
	if _, p, err := net.SplitHostPort(c.laddr.String()); err == nil {
		port = p
	}
	// multiplexing_api is Redis's field; here it says how this
	// connection is served: "epoll", by the event loop, or "goroutine".
	api := "goroutine"
	if c.lc != nil {
		api = "epoll"
	}
	section("Server",
		"redis_version:"+redisVersion,
		"redis_mode:standalone",
		"multiplexing_api:"+api,
		"shardcounter_version:"+s.opts.Version,
		"process_id:"+strconv.Itoa(os.Getpid()),
		"tcp_port:"+port,
		"uptime_in_seconds:"+strconv.FormatInt(int64(time.Since(s.start).Seconds()), 10),
	)
	section("Clients",
		"connected_clients:"+strconv.FormatInt(s.stats.connected.Load(), 10),
		"maxclients:"+strconv.Itoa(s.opts.MaxClients),
		"input_buffers_bytes:"+strconv.FormatInt(s.budget.Used(), 10),
		"input_buffers_limit:"+strconv.FormatInt(s.budget.Limit(), 10),
	)
	section("Persistence",
		"loading:0",
		"durability:"+string(s.opts.Durability),
	)
	section("Stats",
		"total_connections_received:"+strconv.FormatInt(s.stats.connections.Load(), 10),
		"total_commands_processed:"+strconv.FormatInt(s.stats.commands.Load(), 10),
		"rejected_connections:"+strconv.FormatInt(s.stats.rejected.Load(), 10),
		"total_protocol_errors:"+strconv.FormatInt(s.stats.protocolErrors.Load(), 10),
		"total_read_timeouts:"+strconv.FormatInt(s.stats.readTimeouts.Load(), 10),
		"total_sessions_revoked:"+strconv.FormatInt(s.stats.revoked.Load(), 10),
		"total_auth_failures:"+strconv.FormatInt(s.opts.AuthGuard.Failures(authtoken.RESP), 10),
		"total_auth_throttled:"+strconv.FormatInt(s.opts.AuthGuard.Throttled(authtoken.RESP), 10),
	)
	if e := s.opts.Engine; e != nil {
		flushes := e.Flushes.Load()
		settled := e.Writes.Load() + e.Duplicates.Load() + e.Errors.Load()
		meanBatch, meanCommit := 0.0, 0.0
		if flushes > 0 {
			meanBatch = float64(settled) / float64(flushes)
			meanCommit = float64(e.FlushNanos.Load()) / float64(flushes) / 1e6
		}
		section("Engine",
			"engine_writes:"+strconv.FormatInt(e.Writes.Load(), 10),
			"engine_duplicates:"+strconv.FormatInt(e.Duplicates.Load(), 10),
			"engine_errors:"+strconv.FormatInt(e.Errors.Load(), 10),
			"engine_async_lost:"+strconv.FormatInt(e.AsyncLost.Load(), 10),
			"engine_queued:"+strconv.FormatInt(e.Queued.Load(), 10),
			"engine_commits:"+strconv.FormatInt(flushes, 10),
			"engine_increments_sent:"+strconv.FormatInt(e.Items.Load(), 10),
			"engine_mean_writes_per_commit:"+strconv.FormatFloat(meanBatch, 'f', 2, 64),
			"engine_mean_commit_ms:"+strconv.FormatFloat(meanCommit, 'f', 3, 64),
		)
	}
	c.w.Verbatim("txt", b.String())
}
