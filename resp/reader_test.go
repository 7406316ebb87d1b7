package resp_test

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/shardcounter/shardcounter/resp"
)

// readAll reads every command from in, returning them as string slices and
// the error that ended the reading.
func readAll(t testing.TB, r io.Reader, lim resp.Limits) ([][]string, error) {
	t.Helper()
	rd := resp.NewReader(r, lim)
	var got [][]string
	for {
		cmds, err := rd.ReadCommands()
		for _, c := range cmds {
			if len(c.Args) == 0 {
				t.Fatalf("a command with no arguments was returned")
			}
			args := make([]string, len(c.Args))
			for i, a := range c.Args {
				args[i] = string(a)
			}
			got = append(got, args)
		}
		if err != nil {
			return got, err
		}
		if len(cmds) == 0 {
			t.Fatalf("ReadCommands returned neither commands nor an error")
		}
	}
}

func TestReadCommands(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     [][]string
	}{
		{"Array", "*2\r\n$4\r\nINCR\r\n$5\r\nlikes\r\n", [][]string{{"INCR", "likes"}}},
		{"EmptyBulk", "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", [][]string{{"ECHO", ""}}},
		{"BinaryBulk", "*2\r\n$4\r\nECHO\r\n$4\r\n\r\n\x00\xff\r\n", [][]string{{"ECHO", "\r\n\x00\xff"}}},
		{"Pipeline", "*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n", [][]string{{"PING"}, {"GET", "k"}, {"PING"}}},
		{"EmptyArrayIgnored", "*0\r\n*1\r\n$4\r\nPING\r\n", [][]string{{"PING"}}},
		{"Inline", "INCR likes\r\n", [][]string{{"INCR", "likes"}}},
		{"InlineLF", "GET  likes \n", [][]string{{"GET", "likes"}}},
		{"InlineEmptyLinesIgnored", "\r\n\n   \r\nPING\r\n", [][]string{{"PING"}}},
		{"InlineDoubleQuotes", `SET "a b" "x\"y\n\x41\\"` + "\r\n", [][]string{{"SET", "a b", "x\"y\nA\\"}}},
		{"InlineSingleQuotes", `ECHO 'it\'s "so"'` + "\r\n", [][]string{{"ECHO", `it's "so"`}}},
		{"InlineQuoteInWord", `ECHO ab"c d"` + "\r\n", [][]string{{"ECHO", "abc d"}}},
		{"InlineEmptyQuoted", `ECHO ""` + "\r\n", [][]string{{"ECHO", ""}}},
		{"InlineTabs", "ECHO\ta\tb\r\n", [][]string{{"ECHO", "a", "b"}}},
		{"InlineNULEndsLine", "ECHO a\x00b c\r\n", [][]string{{"ECHO", "a"}}},
		{"InlineJunkIsWords", "\xff\xfe \x01\r\n", [][]string{{"\xff\xfe", "\x01"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(t, strings.NewReader(tc.in), resp.Limits{})
			if !errors.Is(err, io.EOF) {
				t.Fatalf("err = %v, want io.EOF", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			// One byte at a time gives the same commands.
			got, err = readAll(t, iotest.OneByteReader(strings.NewReader(tc.in)), resp.Limits{})
			if !errors.Is(err, io.EOF) || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("one byte at a time: got %q, %v; want %q, io.EOF", got, err, tc.want)
			}
		})
	}
}

// TestReadCommandsWholePipeline checks that one call returns every
// command already buffered, and keeps a partial one for later.
func TestReadCommandsWholePipeline(t *testing.T) {
	pr, pw := io.Pipe()
	rd := resp.NewReader(pr, resp.Limits{})
	go pw.Write([]byte(strings.Repeat("*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n", 100) + "*2\r\n$3\r\nGE"))
	cmds, err := rd.ReadCommands()
	if err != nil || len(cmds) != 100 {
		t.Fatalf("got %d commands, %v; want 100", len(cmds), err)
	}
	go pw.Write([]byte("T\r\n$1\r\nk\r\n"))
	cmds, err = rd.ReadCommands()
	if err != nil || len(cmds) != 1 || string(cmds[0].Args[0]) != "GET" {
		t.Fatalf("got %d commands, %v; want the GET", len(cmds), err)
	}
	pw.Close()
	if _, err := rd.ReadCommands(); !errors.Is(err, io.EOF) {
		t.Fatalf("err = %v, want io.EOF", err)
	}
}

// TestProtocolErrors checks each path by which the Reader refuses input:
// the commands before the bad one are returned first, then a
// *ProtocolError with Redis's text, and the Reader stays failed.
func TestProtocolErrors(t *testing.T) {
	small := resp.Limits{MaxBulk: 10, MaxArgs: 3, MaxInline: 20, MaxBuffer: 64}
	ping := "*1\r\n$4\r\nPING\r\n"
	for _, tc := range []struct {
		name, in string
		lim      resp.Limits
		want     string
	}{
		{"BadTypeByte", "*2\r\n$3\r\nGET\r\n:1\r\n", small, "expected '$', got ':'"},
		{"BinaryJunkTypeByte", "*1\r\n\xff\xfe", small, `expected '$', got '\xff'`},
		{"HugeArray", "*4\r\n", small, "invalid multibulk length: 4 arguments, the limit is 3"},
		{"HugeArrayDefault", "*1048577\r\n", resp.Limits{}, "invalid multibulk length: 1048577 arguments, the limit is 4096"},
		{"HugeBulk", "*1\r\n$11\r\n", small, "invalid bulk length: 11 bytes, the limit is 10"},
		{"HugeBulkDefault", "*1\r\n$536870912\r\n", resp.Limits{}, "invalid bulk length: 536870912 bytes, the limit is 65536"},
		{"NegativeArray", "*-1\r\n", small, "invalid multibulk length"},
		{"NegativeBulk", "*1\r\n$-1\r\n", small, "invalid bulk length"},
		{"ArrayLengthNotANumber", "*x\r\n", small, "invalid multibulk length"},
		{"ArrayLengthEmpty", "*\r\n", small, "invalid multibulk length"},
		{"ArrayLengthLeadingZero", "*01\r\n", small, "invalid multibulk length"},
		{"ArrayLengthPlus", "*+1\r\n", small, "invalid multibulk length"},
		{"ArrayLengthOverflow", "*99999999999999999999\r\n", small, "invalid multibulk length"},
		{"ArrayLengthTooLong", "*1111111111111111111111111", small, "invalid multibulk length"},
		{"ArrayLengthLFOnly", "*1\n", small, "invalid multibulk length"},
		{"BulkLengthNotANumber", "*1\r\n$1a\r\n", small, "invalid bulk length"},
		{"BulkLengthLFOnly", "*1\r\n$1\n", small, "invalid bulk length"},
		{"NoCRLFAfterBulk", "*1\r\n$4\r\nPINGxx", small, "expected CRLF after a bulk string of 4 bytes"},
		{"InlineTooBig", strings.Repeat("a", 21), small, "too big inline request: the limit is 20 bytes"},
		{"InlineLineTooBig", strings.Repeat("a", 21) + "\r\n", small, "too big inline request: the limit is 20 bytes"},
		{"InlineTooManyArgs", "a b c d\r\n", small, "invalid multibulk length: 4 arguments, the limit is 3"},
		{"UnbalancedDoubleQuote", "ECHO \"ab\r\n", small, "unbalanced quotes in request"},
		{"UnbalancedSingleQuote", "ECHO 'ab\r\n", small, "unbalanced quotes in request"},
		{"TextAfterClosingQuote", "ECHO \"ab\"c\r\n", small, "unbalanced quotes in request"},
		{"QueryBufferCommand", "*3\r\n$10\r\n0123456789\r\n$10\r\n0123456789\r\n$10\r\n01234567", resp.Limits{MaxBulk: 10, MaxArgs: 3, MaxBuffer: 40}, "query buffer limit of 40 bytes reached: send shorter commands or pipelines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunked := range []bool{false, true} {
				var r io.Reader = strings.NewReader(ping + tc.in)
				if chunked {
					r = iotest.OneByteReader(r)
				}
				rd := resp.NewReader(r, tc.lim)
				cmds, err := rd.ReadCommands()
				if err != nil || len(cmds) != 1 {
					t.Fatalf("chunked %v: first call got %d commands, %v; want the PING", chunked, len(cmds), err)
				}
				cmds, err = rd.ReadCommands()
				var pe *resp.ProtocolError
				if !errors.As(err, &pe) || len(cmds) != 0 {
					t.Fatalf("chunked %v: got %d commands, %v; want a protocol error", chunked, len(cmds), err)
				}
				if pe.Msg != tc.want {
					t.Fatalf("chunked %v: message %q, want %q", chunked, pe.Msg, tc.want)
				}
				if !strings.HasPrefix(pe.Error(), "Protocol error: ") {
					t.Fatalf("Error() = %q, want Redis's prefix", pe.Error())
				}
				if _, err2 := rd.ReadCommands(); err2 != err {
					t.Fatalf("after the error: %v, want the same error again", err2)
				}
			}
		})
	}
}

// TestTruncated checks how a connection that closes ends the reading:
// io.EOF between commands, io.ErrUnexpectedEOF within one.
func TestTruncated(t *testing.T) {
	full := "*2\r\n$3\r\nGET\r\n$5\r\nlikes\r\n"
	for n := 1; n < len(full); n++ {
		got, err := readAll(t, strings.NewReader(full[:n]), resp.Limits{})
		if len(got) != 0 || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%q: got %q, %v; want io.ErrUnexpectedEOF", full[:n], got, err)
		}
	}
	got, err := readAll(t, strings.NewReader("PING\r\nPI"), resp.Limits{})
	if len(got) != 1 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %q, %v; want the PING, then io.ErrUnexpectedEOF", got, err)
	}
}

// TestLargeCommands checks that commands up to the limits are read, and
// that the buffer grows to hold them and shrinks after.
func TestLargeCommands(t *testing.T) {
	lim := resp.Limits{}
	big := strings.Repeat("x", resp.DefaultMaxBulk)
	var in bytes.Buffer
	in.WriteString("*3\r\n$4\r\nECHO\r\n")
	for range 2 {
		in.WriteString("$65536\r\n" + big + "\r\n")
	}
	in.WriteString("*" + "4096" + "\r\n")
	for range 4096 {
		in.WriteString("$1\r\nk\r\n")
	}
	in.WriteString(strings.Repeat("a", resp.DefaultMaxInline-2) + "\r\n")
	got, err := readAll(t, &in, lim)
	if !errors.Is(err, io.EOF) || len(got) != 3 {
		t.Fatalf("got %d commands, %v; want 3", len(got), err)
	}
	if len(got[0]) != 3 || got[0][1] != big || len(got[1]) != 4096 || len(got[2][0]) != resp.DefaultMaxInline-2 {
		t.Fatalf("commands not read whole")
	}
}

func TestParseInt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"1", 1, true}, {"-1", -1, true}, {"42", 42, true},
		{"9223372036854775807", 1<<63 - 1, true}, {"-9223372036854775808", -1 << 63, true},
		{"9223372036854775808", 0, false}, {"-9223372036854775809", 0, false},
		{"18446744073709551616", 0, false}, {"", 0, false}, {"-", 0, false}, {"-0", 0, false},
		{"+1", 0, false}, {"01", 0, false}, {" 1", 0, false}, {"1 ", 0, false}, {"1.0", 0, false}, {"0x1", 0, false},
	} {
		got, ok := resp.ParseInt([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseInt(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// blocking is a non-blocking connection's input: each chunk is one read,
// and between chunks a read finds nothing (ErrWouldBlock).
type blocking struct {
	chunks []string
	gap    bool
}

func (b *blocking) Read(p []byte) (int, error) {
	if b.gap || len(b.chunks) == 0 {
		b.gap = false
		return 0, resp.ErrWouldBlock
	}
	n := copy(p, b.chunks[0])
	b.chunks[0] = b.chunks[0][n:]
	if b.chunks[0] == "" {
		b.chunks = b.chunks[1:]
		b.gap = true
	}
	return n, nil
}

// TestReaderWouldBlock checks that ErrWouldBlock is passed on and not
// kept: a command split over reads with nothing between them is returned
// once it is whole, and the part already read is kept.
func TestReaderWouldBlock(t *testing.T) {
	in := &blocking{chunks: []string{"*2\r\n$4\r\nIN", "CR\r\n$1\r\nk\r\nGET", " k\r\n"}}
	r := resp.NewReader(in, resp.Limits{})
	var got [][]string
	blocked := 0
	for len(got) < 2 && blocked < 10 {
		cmds, err := r.ReadCommands()
		if errors.Is(err, resp.ErrWouldBlock) {
			blocked++
			continue
		}
		if err != nil {
			t.Fatalf("ReadCommands: %v", err)
		}
		for _, c := range cmds {
			var args []string
			for _, a := range c.Args {
				args = append(args, string(a))
			}
			got = append(got, args)
		}
		// After INCR, "GET" is buffered; after GET, nothing.
		if pending := len(got) == 1; r.Pending() != pending {
			t.Errorf("Pending %v after %q, want %v", r.Pending(), got, pending)
		}
	}
	if want := [][]string{{"INCR", "k"}, {"GET", "k"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if blocked != 2 {
		t.Errorf("%d reads found nothing, want 2 (one after each incomplete chunk)", blocked)
	}
	// An error met after a pipeline waits: Pending says so.
	r = resp.NewReader(strings.NewReader("PING\r\n*x\r\n"), resp.Limits{})
	if cmds, err := r.ReadCommands(); err != nil || len(cmds) != 1 {
		t.Fatalf("ReadCommands: %d commands, %v", len(cmds), err)
	}
	if !r.Pending() {
		t.Error("Pending is false with a protocol error waiting")
	}
}

// TestReaderPipelineLimit checks Limits.Pipeline: one call returns at most
// that many commands, and the rest come, in order, from the next calls,
// under the limits in force when they are parsed.
func TestReaderPipelineLimit(t *testing.T) {
	in := "AUTH tok\r\n*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$1\r\nb\r\nPING\r\n"
	rd := resp.NewReader(strings.NewReader(in), resp.Limits{Pipeline: 1, MaxArgs: 2})
	cmds, err := rd.ReadCommands()
	if err != nil || len(cmds) != 1 || string(cmds[0].Args[0]) != "AUTH" {
		t.Fatalf("first call: %d commands, %v; want AUTH alone", len(cmds), err)
	}
	if !rd.Pending() {
		t.Fatal("Pending is false with commands buffered")
	}
	rd.SetLimits(resp.Limits{}) // as AUTH would: MGET's three arguments are fine now
	cmds, err = rd.ReadCommands()
	if err != nil || len(cmds) != 2 || string(cmds[0].Args[0]) != "MGET" || string(cmds[1].Args[0]) != "PING" {
		t.Fatalf("second call: %d commands, %v; want MGET and PING", len(cmds), err)
	}
}

// TestReaderBudget checks that Readers of one Budget together hold no
// more than it, that one with no room fails with a protocol error, and
// that Release and Close give their buffers back.
func TestReaderBudget(t *testing.T) {
	b := resp.NewBudget(40 << 10)
	pr, pw := io.Pipe()
	defer pw.Close()
	// Most of a command that needs a 32 KiB buffer.
	go pw.Write([]byte("*2\r\n$4\r\nECHO\r\n$30000\r\n" + strings.Repeat("x", 20000)))
	big := resp.NewReader(pr, resp.Limits{Budget: b})
	small := resp.NewReader(strings.NewReader("PING\r\n"), resp.Limits{Budget: b})
	done := make(chan struct{})
	go func() {
		big.ReadCommands()
		close(done)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for b.Used() < 32<<10 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if b.Used() != 32<<10 {
		t.Fatalf("Used = %d with one reader waiting for a 30,000-byte bulk, want %d", b.Used(), 32<<10)
	}
	var pe *resp.ProtocolError
	if _, err := small.ReadCommands(); !errors.As(err, &pe) {
		t.Fatalf("a reader past the budget: %v, want a protocol error", err)
	}
	if b.Used() != 32<<10 {
		t.Fatalf("Used = %d after a refused buffer, want it unchanged", b.Used())
	}
	ok := resp.NewReader(strings.NewReader("PING\r\n"), resp.Limits{Budget: b, MaxBuffer: 4 << 10})
	if cmds, err := ok.ReadCommands(); err != nil || len(cmds) != 1 {
		t.Fatalf("a 4 KiB reader within the budget: %v", err)
	}
	ok.Release()
	if b.Used() != 32<<10 {
		t.Fatalf("Used = %d after Release of an idle reader, want %d", b.Used(), 32<<10)
	}
	pw.Close()
	<-done
	big.Close()
	if b.Used() != 0 {
		t.Fatalf("Used = %d after Close, want 0", b.Used())
	}
}
