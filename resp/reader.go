package resp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Defaults of Limits. Every argument shardcounter takes is a name of at
// most 256 bytes, a number, or a token of at most 4096 bytes, so these are
// generous for real use and small enough that a connection cannot make the
// server hold much of its input.
const (
	// DefaultMaxBulk bounds one bulk string argument: 64 KiB (Redis's
	// proto-max-bulk-len is 512 MB).
	DefaultMaxBulk = 64 << 10
	// DefaultMaxArgs bounds the arguments of one command, its name
	// included: 4096, enough for an MGET of the most counters one batch
	// read takes (1000) several times over (Redis allows 1,048,576).
	DefaultMaxArgs = 4096
	// DefaultMaxInline bounds one inline command line: 64 KiB, as Redis
	// (PROTO_INLINE_MAX_SIZE).
	DefaultMaxInline = 64 << 10
	// DefaultMaxBuffer bounds the input buffered for one connection, and
	// so the largest command: 1 MiB (Redis's client-query-buffer-limit is
	// 1 GB).
	DefaultMaxBuffer = 1 << 20
)

// Limits bound what a Reader accepts. A zero field takes its default.
type Limits struct {
	MaxBulk   int // bytes of one bulk string; default DefaultMaxBulk
	MaxArgs   int // elements of one command array; default DefaultMaxArgs
	MaxInline int // bytes of one inline command line; default DefaultMaxInline
	MaxBuffer int // bytes of unparsed input held; default DefaultMaxBuffer

	// Pipeline, when positive, is the most commands one ReadCommands
	// returns; the rest stay buffered, unparsed, for the next call. A
	// server that reads an unauthenticated connection one command at a
	// time parses what follows AUTH under the limits AUTH sets.
	Pipeline int

	// Budget, when set, bounds the input buffered by this Reader and
	// every other Reader of the same Budget together; see Budget. A
	// Reader keeps the Budget it was made with.
	Budget *Budget
}

func (l Limits) withDefaults() Limits {
	if l.MaxBulk <= 0 {
		l.MaxBulk = DefaultMaxBulk
	}
	if l.MaxArgs <= 0 {
		l.MaxArgs = DefaultMaxArgs
	}
	if l.MaxInline <= 0 {
		l.MaxInline = DefaultMaxInline
	}
	if l.MaxBuffer <= 0 {
		l.MaxBuffer = DefaultMaxBuffer
	}
	return l
}

// ProtocolError is returned by Reader.ReadCommands for input that is not a
// command the Reader accepts: malformed framing or a size over its
// Limits. Its Error text is what Redis replies (an "ERR Protocol error: "
// line) before it closes the connection, which a server should do too:
// after a framing error nothing that follows can be trusted to start a
// command.
type ProtocolError struct {
	Msg string
}

func (e *ProtocolError) Error() string { return "Protocol error: " + e.Msg }

func protocolErrorf(format string, args ...any) *ProtocolError {
	return &ProtocolError{Msg: fmt.Sprintf(format, args...)}
}

// ErrWouldBlock is what the io.Reader under a Reader returns when it has
// no input now but may have later: a non-blocking connection served by an
// event loop. ReadCommands passes it on and does not keep it, so the next
// call reads again; the input buffered so far stays.
var ErrWouldBlock = errors.New("resp: no input available now")

// Command is one command a client sent: Args[0] is its name, the rest
// its arguments. The slices alias the Reader's buffer: they are valid
// until the next call of ReadCommands, and must not be modified.
type Command struct {
	Args [][]byte
}

// Reader reads commands from a connection. It is not safe for concurrent
// use.
type Reader struct {
	rd     io.Reader
	lim    Limits
	budget *Budget
	buf    []byte // nil until the first read, and after Release
	r, w   int    // buf[r:w] is read and not yet parsed
	cmds   []Command
	args   [][]byte
	err    error // met after the commands last returned; returned next
}

// initialBuffer is the buffer a Reader starts with, and returns to when
// it is empty after holding a large command: a pipeline of a few hundred
// short commands fits. Buffers of this size are pooled: a server that
// releases the buffers of idle connections (Release) takes them back
// from the pool as input comes.
const initialBuffer = 16 << 10

var buffers = sync.Pool{New: func() any { return new([initialBuffer]byte) }}

// NewReader returns a Reader of rd with the given limits. It holds no
// buffer until it first reads.
func NewReader(rd io.Reader, lim Limits) *Reader {
	lim = lim.withDefaults()
	return &Reader{rd: rd, lim: lim, budget: lim.Budget}
}

// SetLimits changes the limits for the input to come (the Budget stays
// the one the Reader was made with). Input already buffered is held to
// them as it is parsed: lowering MaxBuffer under what is buffered makes
// the next incomplete command an error. The buffer, which the commands
// last returned point into, is kept until the next read.
func (r *Reader) SetLimits(lim Limits) {
	lim = lim.withDefaults()
	lim.Budget = r.budget
	r.lim = lim
}

// Release gives back the Reader's buffer, to the pool and to its Budget,
// when it holds no unparsed input; the next read takes one again. The
// commands last returned point into the buffer: call it only once they
// are done with. An event loop releases the buffers of the connections
// it has served, so that idle connections hold no input memory.
func (r *Reader) Release() {
	if r.r != r.w || r.buf == nil {
		return
	}
	r.dropBuffer()
}

// Close gives back the Reader's buffer, whatever it holds: the
// connection is gone. The Reader returns no more commands.
func (r *Reader) Close() {
	if r.buf != nil {
		r.dropBuffer()
	}
	if r.err == nil {
		r.err = io.ErrClosedPipe
	}
}

func (r *Reader) dropBuffer() {
	r.budget.give(len(r.buf))
	if len(r.buf) == initialBuffer {
		buffers.Put((*[initialBuffer]byte)(r.buf))
	}
	r.buf, r.r, r.w = nil, 0, 0
}

// newBuffer returns a buffer of n bytes taken from the budget, or nil.
func (r *Reader) newBuffer(n int) []byte {
	if !r.budget.take(n) {
		return nil
	}
	if n == initialBuffer {
		return buffers.Get().(*[initialBuffer]byte)[:]
	}
	return make([]byte, n)
}

// errBudget is the error of a Reader whose Budget has no room for the
// buffer it needs.
func (r *Reader) errBudget(n int) error {
	return protocolErrorf("the server's input buffers are full (%d bytes for all connections): %d more bytes cannot be held; send shorter commands or pipelines, or try again later", r.budget.Limit(), n)
}

// ReadCommands returns the commands that are complete in the buffer,
// reading from the connection first only when there is none, so that one
// call returns a whole pipeline as far as it has arrived. It returns at
// least one command or an error: a *ProtocolError for input it cannot use
// (returned after the commands that came before it), io.EOF when the
// connection closed between commands, io.ErrUnexpectedEOF when it closed
// within one, or the connection's own error.
//
// The commands and their arguments are valid until the next call.
func (r *Reader) ReadCommands() ([]Command, error) {
	r.cmds, r.args = r.cmds[:0], r.args[:0]
	if r.err != nil {
		return nil, r.err
	}
	empty := 0
	for {
		for r.r < r.w {
			cmd, n, err := r.parse(r.buf[r.r:r.w])
			if err != nil {
				r.err = err
				if len(r.cmds) > 0 {
					return r.cmds, nil
				}
				return nil, err
			}
			if n == 0 {
				break // incomplete
			}
			r.r += n
			if len(cmd.Args) > 0 {
				r.cmds = append(r.cmds, cmd)
				if len(r.cmds) == r.lim.Pipeline {
					return r.cmds, nil
				}
			}
		}
		if len(r.cmds) > 0 {
			return r.cmds, nil
		}
		n, err := r.fill()
		switch {
		case n > 0:
			empty = 0
		case errors.Is(err, ErrWouldBlock):
			return nil, err
		case err != nil:
			r.err = err
			return nil, err
		default:
			if empty++; empty > 100 {
				r.err = io.ErrNoProgress
				return nil, r.err
			}
		}
	}
}

// Buffered returns the number of bytes read from the connection and not
// yet returned as commands.
func (r *Reader) Buffered() int { return r.w - r.r }

// Pending reports whether the next ReadCommands may return without reading
// the connection: input is buffered, or an error met after the commands
// last returned waits to be returned. An event loop calls it after
// serving a pipeline, since the connection may not become readable again.
func (r *Reader) Pending() bool { return r.err != nil || r.r < r.w }

// fill reads more input after what is buffered, moving it to the front of
// the buffer and growing the buffer, up to MaxBuffer, when it is full.
func (r *Reader) fill() (int, error) {
	if r.r == r.w && len(r.buf) > min(initialBuffer, r.lim.MaxBuffer) {
		r.dropBuffer() // drop a large buffer once it is empty
	}
	if r.buf == nil {
		n := min(initialBuffer, r.lim.MaxBuffer)
		if r.buf = r.newBuffer(n); r.buf == nil {
			return 0, r.errBudget(n)
		}
	}
	if r.r > 0 {
		copy(r.buf, r.buf[r.r:r.w])
		r.w -= r.r
		r.r = 0
	}
	if r.w == len(r.buf) {
		if len(r.buf) >= r.lim.MaxBuffer {
			return 0, protocolErrorf("query buffer limit of %d bytes reached: send shorter commands or pipelines", r.lim.MaxBuffer)
		}
		n := min(2*len(r.buf), r.lim.MaxBuffer)
		if !r.budget.take(n - len(r.buf)) { // the old buffer is dropped at once
			return 0, r.errBudget(n - len(r.buf))
		}
		nb := make([]byte, n)
		copy(nb, r.buf[:r.w])
		if len(r.buf) == initialBuffer {
			buffers.Put((*[initialBuffer]byte)(r.buf))
		}
		r.buf = nb
	}
	n, err := r.rd.Read(r.buf[r.w:])
	r.w += n
	if n > 0 {
		return n, nil // an error comes back on the next read
	}
	if errors.Is(err, io.EOF) && r.w > 0 {
		err = io.ErrUnexpectedEOF
	}
	return 0, err
}

// parse parses the command at the start of b. It returns the number of
// bytes the command took, or 0 when b holds only part of it. A command
// with no arguments (an empty line, "*0") takes bytes and has no Args.
func (r *Reader) parse(b []byte) (Command, int, error) {
	if b[0] == '*' {
		return r.parseArray(b)
	}
	return r.parseInline(b)
}

// maxLenLine is the longest length line accepted, type byte and CRLF
// included: a sign and 19 digits.
const maxLenLine = 1 + 20 + 2

// parseLen parses the length line that starts at b[0] (the type byte),
// returning the length and the offset after its CRLF, or next 0 when the
// line is not complete yet. what names the length in errors, as Redis
// does: "multibulk" or "bulk".
func parseLen(b []byte, what string) (n int64, next int, err error) {
	end := bytes.IndexByte(b[:min(len(b), maxLenLine)], '\n')
	if end < 0 {
		if len(b) >= maxLenLine {
			return 0, 0, protocolErrorf("invalid %s length", what)
		}
		return 0, 0, nil
	}
	if end < 2 || b[end-1] != '\r' {
		return 0, 0, protocolErrorf("invalid %s length", what)
	}
	n, ok := ParseInt(b[1 : end-1])
	if !ok {
		return 0, 0, protocolErrorf("invalid %s length", what)
	}
	return n, end + 1, nil
}

// parseArray parses a command sent as an array of bulk strings.
func (r *Reader) parseArray(b []byte) (Command, int, error) {
	count, i, err := parseLen(b, "multibulk")
	if err != nil || i == 0 {
		return Command{}, 0, err
	}
	switch {
	case count == 0:
		return Command{}, i, nil // Redis ignores an empty array
	case count < 0:
		return Command{}, 0, protocolErrorf("invalid multibulk length")
	case count > int64(r.lim.MaxArgs):
		return Command{}, 0, protocolErrorf("invalid multibulk length: %d arguments, the limit is %d", count, r.lim.MaxArgs)
	}
	first := len(r.args)
	for range count {
		if i >= len(b) {
			return r.incomplete(first, len(b)+1)
		}
		if b[i] != '$' {
			r.args = r.args[:first]
			return Command{}, 0, protocolErrorf("expected '$', got '%s'", printable(b[i]))
		}
		size, next, err := parseLen(b[i:], "bulk")
		if err != nil || next == 0 {
			r.args = r.args[:first]
			if err != nil {
				return Command{}, 0, err
			}
			return r.incomplete(first, len(b)+1)
		}
		if size < 0 {
			r.args = r.args[:first]
			return Command{}, 0, protocolErrorf("invalid bulk length")
		}
		if size > int64(r.lim.MaxBulk) {
			r.args = r.args[:first]
			return Command{}, 0, protocolErrorf("invalid bulk length: %d bytes, the limit is %d", size, r.lim.MaxBulk)
		}
		start := i + next
		end := start + int(size)
		if end+2 > len(b) {
			return r.incomplete(first, end+2)
		}
		if b[end] != '\r' || b[end+1] != '\n' {
			r.args = r.args[:first]
			return Command{}, 0, protocolErrorf("expected CRLF after a bulk string of %d bytes", size)
		}
		r.args = append(r.args, b[start:end:end])
		i = end + 2
	}
	return Command{Args: r.args[first:len(r.args):len(r.args)]}, i, nil
}

// incomplete drops the arguments of a command not complete yet, which
// needs at least need bytes: an error when that can never fit the buffer.
func (r *Reader) incomplete(first, need int) (Command, int, error) {
	r.args = r.args[:first]
	if need > r.lim.MaxBuffer {
		return Command{}, 0, protocolErrorf("query buffer limit of %d bytes reached: send shorter commands or pipelines", r.lim.MaxBuffer)
	}
	return Command{}, 0, nil
}

// parseInline parses a command sent as one line of words, as telnet and
// redis-cli's inline mode send them.
func (r *Reader) parseInline(b []byte) (Command, int, error) {
	end := bytes.IndexByte(b[:min(len(b), r.lim.MaxInline+1)], '\n')
	if end < 0 {
		if len(b) > r.lim.MaxInline {
			return Command{}, 0, protocolErrorf("too big inline request: the limit is %d bytes", r.lim.MaxInline)
		}
		return Command{}, 0, nil
	}
	line := b[:end]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	first := len(r.args)
	args, err := splitArgs(r.args, line)
	if err != nil {
		r.args = r.args[:first]
		return Command{}, 0, err
	}
	if len(args)-first > r.lim.MaxArgs {
		r.args = r.args[:first]
		return Command{}, 0, protocolErrorf("invalid multibulk length: %d arguments, the limit is %d", len(args)-first, r.lim.MaxArgs)
	}
	r.args = args
	if len(args) == first {
		return Command{}, end + 1, nil
	}
	return Command{Args: args[first:len(args):len(args)]}, end + 1, nil
}

var errUnbalancedQuotes = protocolErrorf("unbalanced quotes in request")

// splitArgs appends the words of an inline command line to args, with the
// rules of Redis's sdssplitargs: words are separated by white space;
// "double quotes" take the escapes \n \r \t \b \a \xHH and \<any>; 'single
// quotes' take \' only; a closing quote must end the word. A NUL outside
// quotes ends the line. Words without quotes alias line; quoted ones are
// copies.
func splitArgs(args [][]byte, line []byte) ([][]byte, error) {
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) || line[i] == 0 {
			return args, nil
		}
		start := i
		var word []byte // set once a quote makes the word a copy
		for i < len(line) {
			c := line[i]
			if isSpace(c) || c == 0 {
				break
			}
			if c != '"' && c != '\'' {
				if word != nil {
					word = append(word, c)
				}
				i++
				continue
			}
			if word == nil {
				word = append([]byte{}, line[start:i]...)
			}
			var err error
			if word, i, err = unquote(word, line, i); err != nil {
				return args, err
			}
			// A closing quote must be followed by a space or the end.
			if i < len(line) && !isSpace(line[i]) {
				return args, errUnbalancedQuotes
			}
		}
		if word == nil {
			word = line[start:i:i]
		}
		args = append(args, word)
	}
}

// unquote appends the quoted string that starts at line[i] to word and
// returns the offset after its closing quote.
func unquote(word, line []byte, i int) ([]byte, int, error) {
	q := line[i]
	i++
	for i < len(line) {
		c := line[i]
		switch {
		case c == q:
			return word, i + 1, nil
		case c == '\\' && q == '\'' && i+1 < len(line) && line[i+1] == '\'':
			word = append(word, '\'')
			i += 2
		case c == '\\' && q == '"' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
			word = append(word, unhex(line[i+2])<<4|unhex(line[i+3]))
			i += 4
		case c == '\\' && q == '"' && i+1 < len(line):
			switch e := line[i+1]; e {
			case 'n':
				word = append(word, '\n')
			case 'r':
				word = append(word, '\r')
			case 't':
				word = append(word, '\t')
			case 'b':
				word = append(word, '\b')
			case 'a':
				word = append(word, '\a')
			default:
				word = append(word, e)
			}
			i += 2
		default:
			word = append(word, c)
			i++
		}
	}
	return word, i, errUnbalancedQuotes
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// printable spells a byte for an error line: itself when printable, \xHH
// otherwise, so that junk cannot break the reply's framing.
func printable(c byte) string {
	if c > ' ' && c <= '~' {
		return string(c)
	}
	return fmt.Sprintf("\\x%02x", c)
}

// ParseInt parses a decimal int64 the way Redis's string2ll does, for
// lengths and for commands' integer arguments: an optional minus sign,
// digits, no leading zeros (but "0"), no plus sign, no spaces, no "-0", no
// overflow.
func ParseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	if len(b) > 1 && b[0] == '0' {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if u > (1<<64-1-d)/10 {
			return 0, false
		}
		u = u*10 + d
	}
	switch {
	case neg && u <= 1<<63:
		if u == 1<<63 {
			return -1 << 63, true
		}
		if u == 0 {
			return 0, false // "-0"
		}
		return -int64(u), true
	case !neg && u < 1<<63:
		return int64(u), true
	}
	return 0, false
}
