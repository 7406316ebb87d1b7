package resp_test

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter/resp"
)

// chunkReader returns at most n bytes a read.
type chunkReader struct {
	r io.Reader
	n int
}

func (c chunkReader) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// fuzzLimits are small, so that the fuzzer reaches every limit.
var fuzzLimits = resp.Limits{MaxBulk: 40, MaxArgs: 8, MaxInline: 60, MaxBuffer: 200}

// FuzzReader checks that no input crashes the Reader, that the commands
// read do not depend on how the input was split into reads, that they
// respect the limits, and that a command re-encoded as an array of bulk
// strings reads back the same.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"*2\r\n$4\r\nINCR\r\n$5\r\nlikes\r\n",
		"PING\r\nGET k\r\n",
		`ECHO "a\x41\n" 'b\'c'` + "\r\n",
		"*1\r\n$-1\r\n", "*-1\r\n", "*0\r\n", "*1\r\n:1\r\n", "*3\r\n$1\r\n",
		"*1\r\n$4\r\nPINGxx", "\x00\xff\r\n", "*99999999999999999999\r\n",
	} {
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		whole, werr := readAll(t, bytes.NewReader(data), fuzzLimits)
		split, serr := readAll(t, chunkReader{bytes.NewReader(data), 1 + int(chunk%16)}, fuzzLimits)
		if !reflect.DeepEqual(whole, split) || !sameError(werr, serr) {
			t.Fatalf("whole: %q, %v\nsplit by %d: %q, %v", whole, werr, 1+int(chunk%16), split, serr)
		}
		var pe *resp.ProtocolError
		if !errors.Is(werr, io.EOF) && !errors.Is(werr, io.ErrUnexpectedEOF) && !errors.As(werr, &pe) {
			t.Fatalf("unexpected error %v", werr)
		}
		var enc bytes.Buffer
		for _, args := range whole {
			if len(args) > fuzzLimits.MaxArgs {
				t.Fatalf("command of %d arguments read", len(args))
			}
			enc.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
			for _, a := range args {
				if len(a) > max(fuzzLimits.MaxBulk, fuzzLimits.MaxInline) {
					t.Fatalf("argument of %d bytes read", len(a))
				}
				enc.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
			}
		}
		lim := resp.Limits{MaxBulk: fuzzLimits.MaxInline, MaxArgs: fuzzLimits.MaxArgs}
		again, err := readAll(t, &enc, lim)
		if !errors.Is(err, io.EOF) || len(again) != len(whole) || (len(whole) > 0 && !reflect.DeepEqual(again, whole)) {
			t.Fatalf("re-encoded: %q, %v; want %q", again, err, whole)
		}
	})
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error()
}

// TestLongPipelineSmallBuffer checks that a pipeline far longer than the
// buffer is read whole: the limit bounds a command, not a pipeline.
func TestLongPipelineSmallBuffer(t *testing.T) {
	in := strings.Repeat("*2\r\n$4\r\nINCR\r\n$5\r\nlikes\r\n", 10000)
	got, err := readAll(t, strings.NewReader(in), resp.Limits{MaxBuffer: 64})
	if !errors.Is(err, io.EOF) || len(got) != 10000 {
		t.Fatalf("got %d commands, %v; want 10000", len(got), err)
	}
}
