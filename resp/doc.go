// Package resp is a small, strict codec for the Redis serialization
// protocol (RESP2 and RESP3) as a server speaks it: a Reader that parses
// the commands clients send, and a Writer that encodes replies.
//
// # Reading
//
// Clients send a command as an array of bulk strings
// ("*2\r\n$4\r\nINCR\r\n$5\r\nlikes\r\n"), or, from telnet and redis-cli's
// inline mode, as one line of words ("INCR likes\r\n") with Redis's
// quoting rules. Reader.ReadCommands returns every command already
// buffered on the connection at once, so that a server can serve a
// pipeline as one unit of work.
//
// Every size is bounded (see Limits): a client cannot make the server hold
// more than Limits.MaxBuffer bytes of its input, however it frames it. The
// bounds are much tighter than Redis's own (proto-max-bulk-len is 512 MB
// there) because every argument a counter server takes is a short name or
// number. Input the Reader cannot use is a *ProtocolError, whose message
// is the text Redis replies with before it closes the connection.
//
// # Writing
//
// Writer encodes replies into a buffer for either protocol version: RESP3
// types (maps, nulls, booleans, doubles, verbatim strings) fall back to
// their RESP2 spelling, as Redis does, when the connection speaks RESP2.
//
// The codec was written for shardcounter's RESP front end after reading the
// RESP specification on redis.io and go-redis's internal/proto/reader.go.
package resp
