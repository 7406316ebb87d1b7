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
	perm                    perm // the categories and keys a user needs (perms.go)

	run   func(c *conn, args [][]byte)
	write func(c *conn, args [][]byte, ws []shardcounter.Write) ([]shardcounter.Write, string)
	reply func(c *conn, args [][]byte, ws []shardcounter.Write, res []shardcounter.WriteResult)
	// readReply replies to a strong read of the counters readIDs names
	// (args[1:] unless readIDs is set): rs holds a result per counter,
	// ErrNotFound for one that does not exist.
	readReply func(c *conn, args [][]byte, rs []shardcounter.ReadResult)
	readIDs   func(args [][]byte) ([]string, string)
	// valueRead marks a read of counters' values (GET, MGET, HGET,
	// HMGET), which EXEC answers for the counters its transaction writes
	// from the commit's totals (multi.go).
	valueRead bool

	// txControl marks the commands a transaction does not queue: MULTI,
	// EXEC, DISCARD, WATCH, QUIT and RESET run when sent. noTx, when set,
	// says why the command cannot be part of a transaction: queueing it
	// is refused, and EXEC aborts.
	txControl bool
	noTx      string
	// noTxOn, when set, says why the command cannot be part of a
	// transaction on this server's service ("" when it can): queueing it
	// is then refused as for noTx.
	noTxOn func(s *Server) string
	// afterCommit marks PERSIST, TTL and their kin, which a transaction
	// runs after its writes commit (expire.go).
	afterCommit bool

	// group and summary are the command's COMMAND DOCS: Redis's group,
	// and what it does here, differences from Redis included.
	group, summary string
}

func (cmd *command) arityOK(n int) bool {
	if cmd.arity >= 0 {
		return n == cmd.arity
	}
	return n >= -cmd.arity
}

// commands holds every command by its lower-case name (table.go).
var commands = map[string]*command{}

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
