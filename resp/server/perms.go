package server

import (
	"strings"

	"github.com/shardcounter/shardcounter/acl"
)

// This file is the permission half of the command table: each command's
// categories (package acl) and where its keys are, and the check every
// command passes before it runs, on its own, in a batch or in a
// transaction. docs/OPERATIONS.md lists the table for people;
// TestPermissionMatrix holds every command of the table to it.

// perm is what a command needs: all of cats, and its keys. keys, when
// set, says where the keys are for a command whose keys are not
// firstKey..lastKey with the access its categories imply.
type perm struct {
	cats acl.Category
	keys func(args [][]byte) []keyUse
}

// keyUse is one key a command touches, or a prefix of keys.
type keyUse struct {
	key    string
	prefix bool // every key that starts with key
	access acl.Access
}

const (
	conn_    = acl.Connection
	read     = acl.Read
	write    = acl.Write
	keyspace = acl.Keyspace | acl.Write
)

// permissions holds every command's perm by name; register attaches it
// to the command.
var permissions = map[string]perm{
	"ping": {cats: conn_}, "echo": {cats: conn_}, "hello": {cats: conn_}, "auth": {cats: conn_},
	"select": {cats: conn_}, "quit": {cats: conn_}, "reset": {cats: conn_}, "client": {cats: conn_},
	"command": {cats: conn_}, "function": {cats: conn_}, "acl": {cats: conn_},
	"multi": {cats: conn_}, "exec": {cats: conn_}, "discard": {cats: conn_}, "watch": {cats: conn_}, "unwatch": {cats: conn_},

	"config": {cats: read}, "info": {cats: read},
	"dbsize":   {cats: read, keys: storeKeys(acl.AccessRead)},
	"flushdb":  {cats: acl.Admin | keyspace, keys: storeKeys(acl.AccessWrite)},
	"flushall": {cats: acl.Admin | keyspace, keys: storeKeys(acl.AccessWrite)},

	"del": {cats: keyspace}, "exists": {cats: read}, "type": {cats: read},
	"expire": {cats: keyspace}, "pexpire": {cats: keyspace}, "expireat": {cats: keyspace}, "pexpireat": {cats: keyspace},
	"persist": {cats: keyspace},
	"ttl":     {cats: acl.Keyspace | read}, "pttl": {cats: acl.Keyspace | read},
	"expiretime": {cats: acl.Keyspace | read}, "pexpiretime": {cats: acl.Keyspace | read},
	"scan": {cats: read, keys: scanKeys},

	"incr": {cats: write}, "decr": {cats: write}, "incrby": {cats: write}, "decrby": {cats: write}, "increx": {cats: write},
	"get": {cats: read}, "mget": {cats: read},
	"set": {cats: keyspace}, "getset": {cats: keyspace}, "getdel": {cats: keyspace},

	"sadd": {cats: write}, "srem": {cats: write},
	"sismember": {cats: read}, "scard": {cats: read}, "smembers": {cats: read}, "sscan": {cats: read},

	"pfadd": {cats: write}, "pfcount": {cats: read},
	"pfmerge": {cats: write, keys: pfmergeKeys},

	"hincrby": {cats: write}, "hget": {cats: read}, "hmget": {cats: read}, "hgetall": {cats: read},
	"hkeys": {cats: read}, "hvals": {cats: read}, "hlen": {cats: read}, "hexists": {cats: read},
	"hdel": {cats: keyspace},

	"sc.create": {cats: keyspace}, "sc.incrby": {cats: write}, "sc.get": {cats: read},
	"sc.reshard": {cats: keyspace}, "sc.shards": {cats: read},
	"sc.top": {cats: read}, "zrevrange": {cats: read},
	"cl.throttle": {cats: write},
}

// register adds cmd to the command table with its permission.
func register(cmd *command) {
	cmd.perm = permissions[cmd.name]
	commands[cmd.name] = cmd
}

// Permissions returns every command's categories by name: what a users
// file's +command and -command rules may name (acl.Parse).
func Permissions() map[string]acl.Category {
	out := make(map[string]acl.Category, len(commands))
	for n, cmd := range commands {
		out[n] = cmd.perm.cats
	}
	return out
}

// storeKeys is the keys of a command of the whole store (DBSIZE,
// FLUSHDB): every key, the prefix "".
func storeKeys(a acl.Access) func([][]byte) []keyUse {
	return func([][]byte) []keyUse { return []keyUse{{prefix: true, access: a}} }
}

// scanKeys is SCAN's: the keys of its MATCH pattern's literal prefix
// (every key without one), which a pattern P* of the user must cover.
func scanKeys(args [][]byte) []keyUse {
	prefix := ""
	for i := 2; i+1 < len(args); i += 2 {
		if strings.EqualFold(string(args[i]), "match") {
			prefix = globPrefix(string(args[i+1]))
		}
	}
	return []keyUse{{key: prefix, prefix: true, access: acl.AccessRead}}
}

// pfmergeKeys is PFMERGE's: it writes its destination and reads its
// sources.
func pfmergeKeys(args [][]byte) []keyUse {
	ks := []keyUse{{key: string(args[1]), access: acl.AccessWrite}}
	for _, a := range args[2:] {
		ks = append(ks, keyUse{key: string(a), access: acl.AccessRead})
	}
	return ks
}

// Redis's words for a refusal.
func errNoPermCommand(user, cmd string) string {
	return "NOPERM User " + user + " has no permissions to run the '" + cmd + "' command"
}

const errNoPermKey = "NOPERM No permissions to access a key"

// permit returns the NOPERM reply that refuses cmd with args to the
// connection's user, or "" when it may run: it needs every category of
// the command and every key it touches. A refusal, and an @admin or
// @keyspace command allowed, is written to the audit trail when audit is
// set (a check made twice for one command audits once).
func (c *conn) permit(cmd *command, args [][]byte, audit bool) string {
	u := c.user
	if u == nil || u == acl.Everyone {
		return "" // not authenticated (the caller says NOAUTH), or no users at all
	}
	msg := ""
	if !u.Allowed(cmd.name, cmd.perm.cats) {
		msg = errNoPermCommand(u.Name(), cmd.name)
	} else if !c.keysAllowed(u, cmd, args) {
		msg = errNoPermKey
	}
	if audit && c.s.opts.Audit.Wants(cmd.perm.cats, msg != "") {
		outcome := "allowed"
		if msg != "" {
			outcome = "refused: " + msg
		}
		c.s.opts.Audit.Log("resp", c.raddr.String(), u.Name(), cmd.name, auditKeys(cmd, args), outcome)
	}
	return msg
}

// keysAllowed reports whether u may touch every key of cmd with args.
func (c *conn) keysAllowed(u *acl.User, cmd *command, args [][]byte) bool {
	if cmd.perm.keys != nil {
		for _, k := range cmd.perm.keys(args) {
			if k.prefix && !u.Prefix(k.key, k.access) || !k.prefix && !u.Key(k.key, k.access) {
				return false
			}
		}
		return true
	}
	if cmd.firstKey == 0 {
		return true
	}
	a := acl.AccessOf(cmd.perm.cats)
	last := cmd.lastKey
	if last < 0 {
		last += len(args)
	}
	for i := cmd.firstKey; i <= last && i < len(args); i += cmd.step {
		if !u.Key(string(args[i]), a) {
			return false
		}
	}
	return true
}

// permitRanking reports whether the connection's user may read a ranking
// over prefix, replying NOPERM and writing the audit line when not: a
// ranking's entries are counters of its prefix, which the user cannot
// name in advance, so reading them needs a pattern P* covering the
// prefix, as a listing of it does, beside the ranking's name, which the
// command's key check took.
func (c *conn) permitRanking(cmd, prefix string) bool {
	u := c.user
	if u == nil || u == acl.Everyone || u.Prefix(prefix, acl.AccessRead) {
		return true
	}
	c.s.opts.Audit.Log("resp", c.raddr.String(), u.Name(), cmd, []string{prefix + "*"}, "refused: "+errNoPermKey)
	c.w.Error(errNoPermKey)
	return false
}

// auditKeys returns the keys of a command for its audit line.
func auditKeys(cmd *command, args [][]byte) []string {
	var keys []string
	if cmd.perm.keys != nil {
		for _, k := range cmd.perm.keys(args) {
			if k.prefix {
				keys = append(keys, k.key+"*")
			} else {
				keys = append(keys, k.key)
			}
		}
		return keys
	}
	if cmd.firstKey == 0 {
		return nil
	}
	last := cmd.lastKey
	if last < 0 {
		last += len(args)
	}
	for i := cmd.firstKey; i <= last && i < len(args) && len(keys) <= acl.MaxAuditKeys; i += cmd.step {
		keys = append(keys, string(args[i]))
	}
	return keys
}

// globPrefix returns the literal bytes a glob pattern starts with.
func globPrefix(p string) string {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '*', '?', '[', '\\':
			return p[:i]
		}
	}
	return p
}

// cmdACL is ACL WHOAMI and ACL CAT [category].
func cmdACL(c *conn, args [][]byte) {
	switch sub := lower(args[1]); {
	case sub == "whoami" && len(args) == 2:
		c.w.BulkString(c.user.Name())
	case sub == "cat" && len(args) == 2:
		names := acl.Categories()
		c.w.Array(len(names))
		for _, n := range names {
			c.w.BulkString(n)
		}
	case sub == "cat" && len(args) == 3:
		cat, ok := acl.ParseCategory(string(args[2]))
		if !ok {
			c.w.Error("ERR Unknown category '" + clip(args[2]) + "'")
			return
		}
		var names []string
		for _, n := range commandNames() {
			if cmd := commands[n]; cmd.perm.cats != acl.Connection && cmd.perm.cats&cat != 0 {
				names = append(names, n)
			}
		}
		c.w.Array(len(names))
		for _, n := range names {
			c.w.BulkString(n)
		}
	case sub == "whoami" || sub == "cat":
		c.w.Error("ERR wrong number of arguments for 'acl|" + sub + "' command")
	default:
		c.w.Error("ERR unknown subcommand '" + clip(args[1]) + "'. Try ACL HELP.")
	}
}

func init() {
	register(&command{name: "acl", arity: -2, flags: []string{"noscript", "loading", "stale"}, noTx: noTxConnect, run: cmdACL, group: "server",
		summary: "ACL WHOAMI: the connection's user; ACL CAT [category]: the categories, or a category's commands (docs/OPERATIONS.md)."})
}

// PermissionRow is one command's row of docs/OPERATIONS.md's permission
// table: its name, categories and the keys it checks.
type PermissionRow struct{ Command, Categories, Keys string }

// PermissionTable returns every command's row, by name.
func PermissionTable() []PermissionRow {
	special := map[string]string{
		"dbsize": "every key: a pattern `*` (read)", "flushdb": "every key: a pattern `*` (write)", "flushall": "every key: a pattern `*` (write)",
		"scan":      "the literal prefix of MATCH (every key without it): a pattern P* covering it (read)",
		"pfmerge":   "the destination (write), the sources (read)",
		"sc.top":    "the first argument, and the ranking's prefix: a pattern P* covering it (read)",
		"zrevrange": "the first argument, and the ranking's prefix: a pattern P* covering it (read)",
	}
	var rows []PermissionRow
	for _, n := range commandNames() {
		cmd := commands[n]
		cats := "(every user)"
		if cmd.perm.cats != acl.Connection {
			cats = cmd.perm.cats.String()
		}
		keys, ok := special[n]
		switch a := "read"; {
		case ok:
		case cmd.firstKey == 0:
			keys = ""
		default:
			if acl.AccessOf(cmd.perm.cats) == acl.AccessWrite {
				a = "write"
			}
			switch {
			case cmd.lastKey < 0:
				keys = "every argument from the first (" + a + ")"
			default:
				keys = "the first argument (" + a + ")"
			}
		}
		rows = append(rows, PermissionRow{Command: strings.ToUpper(n), Categories: cats, Keys: keys})
	}
	return rows
}
