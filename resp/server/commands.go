package server

import (
	"sort"

	"github.com/shardcounter/shardcounter"
)

// command is one command the server knows. A write command has write and
// reply: write turns its arguments into service writes (or an error
// reply), which are applied in one WriteBatch with the writes of the
// commands pipelined with it, and reply encodes the reply from their
// results. A strong read of keys (GET, MGET, EXISTS) has readReply: its
// counters are read in one batch read with those of the read commands
// executed with it (executor.readBatch), and readReply encodes the reply
// from their results. Every other command has run, which executes it and
// encodes the reply.
type command struct {
	name  string // lower case
	arity int    // as in Redis: n exactly, or -n at least n, the name included
	flags []string
	// The positions of the first and last key arguments and the step
	// between keys, as COMMAND reports them (0 when there is none).
	firstKey, lastKey, step int
	noAuth                  bool // may run before AUTH

	run   func(c *conn, args [][]byte)
	write func(c *conn, args [][]byte, ws []shardcounter.Write) ([]shardcounter.Write, string)
	reply func(c *conn, args [][]byte, ws []shardcounter.Write, res []shardcounter.WriteResult)
	// readReply replies to a strong read of the counters args[1:]: rs
	// holds a result per key, ErrNotFound for a counter that does not
	// exist.
	readReply func(c *conn, rs []shardcounter.ReadResult)
}

func (cmd *command) arityOK(n int) bool {
	if cmd.arity >= 0 {
		return n == cmd.arity
	}
	return n >= -cmd.arity
}

// commands holds every command by its lower-case name.
var commands = map[string]*command{}

func init() {
	for _, cmd := range []*command{
		// The connection.
		{name: "ping", arity: -1, flags: []string{"fast"}, run: cmdPing},
		{name: "echo", arity: 2, flags: []string{"fast"}, run: cmdEcho},
		{name: "hello", arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, noAuth: true, run: cmdHello},
		{name: "auth", arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, noAuth: true, run: cmdAuth},
		{name: "select", arity: 2, flags: []string{"loading", "stale", "fast"}, run: cmdSelect},
		{name: "quit", arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, noAuth: true, run: cmdQuit},
		{name: "reset", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, noAuth: true, run: cmdReset},
		{name: "client", arity: -2, flags: []string{"noscript", "loading", "stale"}, run: cmdClient},
		{name: "command", arity: -1, flags: []string{"loading", "stale"}, run: cmdCommand},
		{name: "config", arity: -2, flags: []string{"admin", "noscript", "loading", "stale"}, run: cmdConfig},
		{name: "info", arity: -1, flags: []string{"loading", "stale"}, run: cmdInfo},

		// Counters, as Redis strings.
		{name: "incr", arity: 2, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: writeIncr, reply: replyValue},
		{name: "decr", arity: 2, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: writeDecr, reply: replyValue},
		{name: "incrby", arity: 3, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: writeIncrBy, reply: replyValue},
		{name: "decrby", arity: 3, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: writeDecrBy, reply: replyValue},
		{name: "get", arity: 2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1, readReply: replyGet},
		{name: "mget", arity: -2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: -1, step: 1, readReply: replyMGet},
		{name: "exists", arity: -2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: -1, step: 1, readReply: replyExists},
		{name: "del", arity: -2, flags: []string{"write"}, firstKey: 1, lastKey: -1, step: 1, run: cmdDel},

		// Distinct counters, as Redis sets.
		{name: "sadd", arity: -3, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: writeSAdd, reply: replyChanged},
		{name: "srem", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: writeSRem, reply: replyChanged},
		{name: "sismember", arity: 3, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1, run: cmdSIsMember},
		{name: "scard", arity: 2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1, run: cmdSCard},

		// What Redis has no word for.
		{name: "sc.create", arity: -2, flags: []string{"write"}, firstKey: 1, lastKey: 1, step: 1, run: cmdSCCreate},
		{name: "sc.incrby", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: writeSCIncrBy, reply: replyApplied},
		{name: "sc.get", arity: -2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1, run: cmdSCGet},
		{name: "sc.reshard", arity: 3, flags: []string{"write"}, firstKey: 1, lastKey: 1, step: 1, run: cmdSCReshard},
		{name: "sc.shards", arity: 2, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, run: cmdSCShards},
	} {
		commands[cmd.name] = cmd
	}
}

// commandNames returns the commands' names in order.
func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// lower returns b in lower case, for matching subcommands and options.
func lower(b []byte) string {
	out := make([]byte, len(b))
	for i, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		out[i] = ch
	}
	return string(out)
}
