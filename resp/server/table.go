package server

import "github.com/shardcounter/shardcounter"

// The command table: every command the server knows, with what COMMAND
// and COMMAND DOCS report of it. docs/RESP.md has the same table for
// people, with the differences from Redis.

// Flags of COMMAND INFO, as Redis gives them.
var (
	fWrite     = []string{"write", "denyoom", "fast"}
	fWriteSlow = []string{"write"}
	fRead      = []string{"readonly", "fast"}
	fReadSlow  = []string{"readonly"}
	fConn      = []string{"noscript", "loading", "stale", "fast", "no_auth"}
	fTx        = []string{"noscript", "loading", "stale", "fast", "allow_busy"}
	fServer    = []string{"loading", "stale"}
)

// Why commands cannot be part of a transaction.
const (
	noTxDelete  = "it deletes key by key, outside the batch a transaction commits; send it before MULTI or after EXEC"
	noTxAdmin   = "it is not a write of the batch a transaction commits; send it before MULTI or after EXEC"
	noTxConnect = "it changes the connection; send it before MULTI or after EXEC"
)

func init() {
	for _, cmd := range []*command{
		// The connection.
		{name: "ping", arity: -1, flags: []string{"fast"}, run: cmdPing, group: "connection", summary: "Returns PONG, or the message given."},
		{name: "echo", arity: 2, flags: []string{"fast"}, run: cmdEcho, group: "connection", summary: "Returns the message given."},
		{name: "hello", arity: -1, flags: fConn, noAuth: true, noTx: noTxConnect, run: cmdHello, group: "connection", summary: "Chooses RESP2 or RESP3, authenticates, names the connection; replies with the server's properties."},
		{name: "auth", arity: -2, flags: fConn, noAuth: true, noTx: noTxConnect, run: cmdAuth, group: "connection", summary: "Authenticates the connection with a token of --auth-token-file (user default)."},
		{name: "select", arity: 2, flags: []string{"loading", "stale", "fast"}, run: cmdSelect, group: "connection", summary: "Selects database 0, the only one."},
		{name: "quit", arity: -1, flags: fConn, noAuth: true, txControl: true, run: cmdQuit, group: "connection", summary: "Closes the connection after the reply."},
		{name: "reset", arity: 1, flags: fConn, noAuth: true, txControl: true, run: cmdReset, group: "connection", summary: "Resets the connection: RESP2, no name, no transaction, not authenticated when a token is needed."},
		{name: "client", arity: -2, flags: []string{"noscript", "loading", "stale"}, run: cmdClient, group: "connection", summary: "CLIENT SETNAME, GETNAME, ID, SETINFO and INFO, for this connection."},

		// The server.
		{name: "command", arity: -1, flags: fServer, run: cmdCommand, group: "server", summary: "Describes the commands of this table: COMMAND, COUNT, LIST, INFO, DOCS."},
		{name: "config", arity: -2, flags: []string{"admin", "noscript", "loading", "stale"}, run: cmdConfig, group: "server", summary: "CONFIG GET of the parameters that describe shardcounter in Redis's terms; CONFIG SET is refused."},
		{name: "info", arity: -1, flags: fServer, run: cmdInfo, group: "server", summary: "The server's state, with the engine's group commit, in INFO's format."},
		{name: "dbsize", arity: 1, flags: fReadSlow, run: cmdDBSize, group: "server", summary: "The number of keys (counters, and hashes with a field), counted by listing them all: O(N)."},
		{name: "flushdb", arity: -1, flags: []string{"write"}, noTx: noTxAdmin, run: cmdFlush, group: "server", summary: "Deletes every counter, one by one; refused unless serve was started with --resp-allow-flush."},
		{name: "flushall", arity: -1, flags: []string{"write"}, noTx: noTxAdmin, run: cmdFlush, group: "server", summary: "As FLUSHDB: there is one database."},
		{name: "function", arity: -2, flags: []string{"noscript"}, run: cmdFunction, group: "scripting", summary: "FUNCTION FLUSH succeeds and FUNCTION LIST lists none: there are no functions."},

		// Transactions.
		{name: "multi", arity: 1, flags: fTx, txControl: true, run: cmdMulti, group: "transactions", summary: "Starts a transaction: commands are queued (+QUEUED) until EXEC."},
		{name: "exec", arity: 1, flags: []string{"noscript", "loading", "stale", "skip_slowlog"}, txControl: true, write: writeExec, group: "transactions", summary: "Applies the transaction's writes as one batch (one commit) and replies with every command's reply; EXECABORT after a queueing error."},
		{name: "discard", arity: 1, flags: fTx, txControl: true, run: cmdDiscard, group: "transactions", summary: "Drops the queued transaction."},
		{name: "watch", arity: -2, flags: fTx, txControl: true, run: cmdWatch, group: "transactions", summary: "Refused: keys cannot be watched; MULTI/EXEC without WATCH is atomic."},
		{name: "unwatch", arity: 1, flags: fTx, run: cmdUnwatch, group: "transactions", summary: "Succeeds: nothing is ever watched."},

		// The keyspace.
		{name: "del", arity: -2, flags: fWriteSlow, firstKey: 1, lastKey: -1, step: 1, noTx: noTxDelete, run: cmdDel, group: "generic", summary: "Deletes counters (with their shards, members, buckets, request ids) and hashes (every field)."},
		{name: "exists", arity: -2, flags: fRead, firstKey: 1, lastKey: -1, step: 1, readIDs: existsIDs, readReply: replyExists, group: "generic", summary: "How many of the keys are counters or hashes."},
		{name: "type", arity: 2, flags: fRead, firstKey: 1, lastKey: 1, step: 1, run: cmdType, group: "generic", summary: "string for a sum or approx counter, set for a distinct one, hash, or none."},
		{name: "expire", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: writeExpire, reply: replyExpire, group: "generic", summary: "Gives a counter or a whole hash a deadline in seconds; NX, XX, GT, LT. A write of the group commit: in a transaction, in its turn among the writes."},
		{name: "pexpire", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: writePExpire, reply: replyExpire, group: "generic", summary: "EXPIRE in milliseconds."},
		{name: "expireat", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: writeExpireAt, reply: replyExpire, group: "generic", summary: "EXPIRE at a Unix time in seconds."},
		{name: "pexpireat", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: writePExpireAt, reply: replyExpire, group: "generic", summary: "EXPIRE at a Unix time in milliseconds."},
		{name: "ttl", arity: 2, flags: fRead, firstKey: 1, lastKey: 1, step: 1, afterCommit: true, run: cmdTTL, group: "generic", summary: "Seconds left before a key's deadline; -1 without one, -2 for a missing key."},
		{name: "pttl", arity: 2, flags: fRead, firstKey: 1, lastKey: 1, step: 1, afterCommit: true, run: cmdPTTL, group: "generic", summary: "TTL in milliseconds."},
		{name: "expiretime", arity: 2, flags: fRead, firstKey: 1, lastKey: 1, step: 1, afterCommit: true, run: cmdExpireTime, group: "generic", summary: "A key's deadline as a Unix time in seconds; -1, -2 as TTL."},
		{name: "pexpiretime", arity: 2, flags: fRead, firstKey: 1, lastKey: 1, step: 1, afterCommit: true, run: cmdPExpireTime, group: "generic", summary: "EXPIRETIME in milliseconds."},
		{name: "persist", arity: 2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, afterCommit: true, run: cmdPersist, group: "generic", summary: "Removes a key's deadline."},
		{name: "scan", arity: -2, flags: fReadSlow, run: cmdScan, group: "generic", summary: "A page of keys in byte order, with MATCH, COUNT (counters listed) and TYPE; each key once."},

		// Counters, as Redis strings.
		{name: "incr", arity: 2, flags: fWrite, firstKey: 1, lastKey: 1, step: 1, write: writeIncr, reply: replyValue, group: "string", summary: "Adds 1 to a counter, created when missing; replies its value after the commit."},
		{name: "decr", arity: 2, flags: fWrite, firstKey: 1, lastKey: 1, step: 1, write: writeDecr, reply: replyValue, group: "string", summary: "Subtracts 1, as INCR."},
		{name: "incrby", arity: 3, flags: fWrite, firstKey: 1, lastKey: 1, step: 1, write: writeIncrBy, reply: replyValue, group: "string", summary: "Adds n, as INCR."},
		{name: "increx", arity: -2, flags: fWrite, firstKey: 1, lastKey: 1, step: 1, write: writeIncrEx, reply: replyIncrEx, group: "string", summary: "Adds BYINT n (1) within LBOUND and UBOUND: out of bounds skipped, or clamped with SATURATE; replies [value, increment applied]."},
		{name: "decrby", arity: 3, flags: fWrite, firstKey: 1, lastKey: 1, step: 1, write: writeDecrBy, reply: replyValue, group: "string", summary: "Subtracts n, as INCR."},
		{name: "get", arity: 2, flags: fRead, firstKey: 1, lastKey: 1, step: 1, readReply: replyGet, valueRead: true, group: "string", summary: "A counter's value (a strong read), nil when missing."},
		{name: "set", arity: -3, flags: []string{"write", "denyoom"}, firstKey: 1, lastKey: 1, step: 1, noTx: noTxReset, run: cmdSet, group: "string", summary: "Resets a counter to an integer in one step with the server's writes of it; NX, XX, GET, EX, PX, EXAT, PXAT, KEEPTTL. Replaces a hash or distinct counter of the name."},
		{name: "getset", arity: 3, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1, noTx: noTxReset, run: cmdGetSet, group: "string", summary: "SET key n GET: resets a counter and replies the value before."},
		{name: "getdel", arity: 2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, noTx: noTxReset, run: cmdGetDel, group: "string", summary: "Replies a counter's value and deletes it, in one step with the server's writes of it."},
		{name: "mget", arity: -2, flags: fRead, firstKey: 1, lastKey: -1, step: 1, readReply: replyMGet, valueRead: true, group: "string", summary: "Counters' values, one snapshot of up to 1000."},

		// Distinct counters, as Redis sets.
		{name: "sadd", arity: -3, flags: fWrite, firstKey: 1, lastKey: 1, step: 1, write: writeSAdd, reply: replyChanged, group: "set", summary: "Adds members to a distinct counter, created when missing."},
		{name: "srem", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: writeSRem, reply: replyChanged, group: "set", summary: "Removes members from a distinct counter."},
		{name: "sismember", arity: 3, flags: fRead, firstKey: 1, lastKey: 1, step: 1, run: cmdSIsMember, group: "set", summary: "Whether a member is in a distinct counter."},
		{name: "scard", arity: 2, flags: fRead, firstKey: 1, lastKey: 1, step: 1, run: cmdSCard, group: "set", summary: "A distinct counter's member count (a strong read)."},
		{name: "smembers", arity: 2, flags: fReadSlow, firstKey: 1, lastKey: 1, step: 1, run: cmdSMembers, group: "set", summary: "Every member of a distinct counter, read page by page."},
		{name: "sscan", arity: -3, flags: fReadSlow, firstKey: 1, lastKey: 1, step: 1, run: cmdSScan, group: "set", summary: "A page of a distinct counter's members in byte order, with MATCH and COUNT."},

		// Approx counters, as Redis HyperLogLogs.
		{name: "pfadd", arity: -2, flags: fWrite, firstKey: 1, lastKey: 1, step: 1, write: writePFAdd, reply: replyPFAdd, group: "hyperloglog", summary: "Adds members to an approx counter (a HyperLogLog sketch per shard), created when missing; 1 when a commit changed a sketch, per commit and shard."},
		{name: "pfcount", arity: -2, flags: fReadSlow, firstKey: 1, lastKey: -1, step: 1, run: cmdPFCount, group: "hyperloglog", summary: "An approx counter's estimate (a strong read); of several keys, the estimate of their union, read key by key."},
		{name: "pfmerge", arity: -2, flags: []string{"write", "denyoom"}, firstKey: 1, lastKey: -1, step: 1, noTx: noTxMerge, run: cmdPFMerge, group: "hyperloglog", summary: "Merges the sources' sketches into dest shard by shard; dest is created with the first source's shard count."},

		// Hashes of counters.
		{name: "hincrby", arity: 4, flags: fWrite, firstKey: 1, lastKey: 1, step: 1, write: writeHIncrBy, reply: replyHIncrBy, group: "hash", summary: "Adds n to a field, a counter of its own, created when missing; replies its value after the commit."},
		{name: "hget", arity: 3, flags: fRead, firstKey: 1, lastKey: 1, step: 1, readIDs: hgetIDs, readReply: replyHGet, valueRead: true, group: "hash", summary: "A field's value (a strong read), nil when missing."},
		{name: "hmget", arity: -3, flags: fRead, firstKey: 1, lastKey: 1, step: 1, readIDs: hmgetIDs, readReply: replyHMGet, valueRead: true, group: "hash", summary: "Fields' values, one snapshot of up to 1000."},
		{name: "hgetall", arity: 2, flags: fReadSlow, firstKey: 1, lastKey: 1, step: 1, run: cmdHGetAll, group: "hash", summary: "Every field and its value: a listing, then snapshots of 1000 fields."},
		{name: "hkeys", arity: 2, flags: fReadSlow, firstKey: 1, lastKey: 1, step: 1, run: cmdHKeys, group: "hash", summary: "Every field, in byte order."},
		{name: "hvals", arity: 2, flags: fReadSlow, firstKey: 1, lastKey: 1, step: 1, run: cmdHVals, group: "hash", summary: "Every field's value, in the fields' byte order."},
		{name: "hlen", arity: 2, flags: fReadSlow, firstKey: 1, lastKey: 1, step: 1, run: cmdHLen, group: "hash", summary: "The number of fields, counted by listing them: O(N)."},
		{name: "hexists", arity: 3, flags: fRead, firstKey: 1, lastKey: 1, step: 1, run: cmdHExists, group: "hash", summary: "Whether a field exists."},
		{name: "hdel", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, noTx: noTxDelete, run: cmdHDel, group: "hash", summary: "Deletes fields, each a counter with its shards."},

		// What Redis has no word for.
		{name: "sc.create", arity: -2, flags: fWriteSlow, firstKey: 1, lastKey: 1, step: 1, noTx: noTxAdmin, run: cmdSCCreate, group: "shardcounter", summary: "Creates a counter: SHARDS, KIND sum|distinct|approx, MIN, MAX, WINDOW."},
		{name: "sc.incrby", arity: -3, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1, write: writeSCIncrBy, reply: replyApplied, group: "shardcounter", summary: "A retry-safe increment with REQUEST-ID: 1 applied, 0 a duplicate."},
		{name: "sc.get", arity: -2, flags: fRead, firstKey: 1, lastKey: 1, step: 1, run: cmdSCGet, group: "shardcounter", summary: "A reading: value, shards, consistency (STRONG or CACHED), as_of, max_staleness_ms."},
		{name: "sc.reshard", arity: 3, flags: fWriteSlow, firstKey: 1, lastKey: 1, step: 1, noTx: noTxAdmin, run: cmdSCReshard, group: "shardcounter", summary: "Changes a counter's shard count, keeping its value."},
		{name: "sc.shards", arity: 2, flags: fReadSlow, firstKey: 1, lastKey: 1, step: 1, run: cmdSCShards, group: "shardcounter", summary: "Each shard's value and the node that holds it."},
	} {
		register(cmd)
	}
}

// writeExec marks EXEC as a write of the batch, so that the executor puts
// it in one; writeBatch calls execWrites and execReply for it instead.
func writeExec(c *conn, args [][]byte, ws []shardcounter.Write) ([]shardcounter.Write, string) {
	panic("resp/server: EXEC's writes are execWrites'")
}
