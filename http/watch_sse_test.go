package http_test

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// TestReadSSE follows the examples and rules of the WHATWG standard's
// event-stream section.
func TestReadSSE(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []shttp.SSEEvent
		err      bool
	}{
		{"Simple", "data: a\n\n", []shttp.SSEEvent{{Data: "a"}}, false},
		{"MultiLine", "data: YHOO\ndata: +2\ndata: 10\n\n", []shttp.SSEEvent{{Data: "YHOO\n+2\n10"}}, false},
		{"NoSpace", "data:a\n\n", []shttp.SSEEvent{{Data: "a"}}, false},
		{"OnlyOneSpaceDropped", "data:  a\n\n", []shttp.SSEEvent{{Data: " a"}}, false},
		{"CRLF", "data: a\r\nid: 1\r\n\r\n", []shttp.SSEEvent{{Data: "a", LastID: "1"}}, false},
		{"CR", "data: a\rid: 1\r\r", []shttp.SSEEvent{{Data: "a", LastID: "1"}}, false},
		{"BOM", "\uFEFFdata: a\n\n", []shttp.SSEEvent{{Data: "a"}}, false},
		{"Comments", ": keep-alive\n\n: x\ndata: a\n\n", []shttp.SSEEvent{{Data: "a"}}, false},
		{"IDKeptAcrossEvents", "id: 7\ndata: a\n\ndata: b\n\n", []shttp.SSEEvent{{Data: "a", LastID: "7"}, {Data: "b", LastID: "7"}}, false},
		{"IDWithoutData", "id: 9\n\ndata: b\n\n", []shttp.SSEEvent{{Data: "b", LastID: "9"}}, false},
		{"IDWithNUL", "id: 1\x002\ndata: b\n\n", []shttp.SSEEvent{{Data: "b"}}, false},
		{"EventType", "event: error\ndata: x\n\ndata: y\n\n", []shttp.SSEEvent{{Type: "error", Data: "x"}, {Data: "y"}}, false},
		{"Retry", "retry: 2500\n\ndata: a\n\n", []shttp.SSEEvent{{Data: "a", Retry: 2500 * time.Millisecond}}, false},
		{"RetryNotDigits", "retry: 25x\ndata: a\n\n", []shttp.SSEEvent{{Data: "a"}}, false},
		{"UnknownField", "foo: bar\ndata: a\n\n", []shttp.SSEEvent{{Data: "a"}}, false},
		{"CutOffEventDropped", "data: a\n\ndata: b\n", []shttp.SSEEvent{{Data: "a"}}, false},
		{"CutOffLine", "data: a\n\ndata: b", []shttp.SSEEvent{{Data: "a"}}, true},
		{"TooLong", "data: " + strings.Repeat("x", 70<<10) + "\n\n", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := shttp.ReadSSE(strings.NewReader(tc.in))
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want error %v", err, tc.err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// FuzzReadSSE: no input crashes the client's parser, and what it returns
// holds to the format: a retry is whole milliseconds, an id has no NUL,
// and an event decodes to a reading or a coded error.
func FuzzReadSSE(f *testing.F) {
	for _, s := range []string{
		"retry: 1500\n\nid: 5\ndata: {\"id\":\"c\",\"value\":5}\n\n",
		"event: error\ndata: {\"error\":{\"code\":\"unavailable\",\"message\":\"m\"}}\n\n",
		": keep-alive\r\n\r\n", "\uFEFFdata:x\rdata:y\r\r", "id\ndata\n\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		events, _ := shttp.ReadSSE(strings.NewReader(in))
		for _, ev := range events {
			if ev.Retry%time.Millisecond != 0 || ev.Retry < 0 {
				t.Fatalf("retry %v", ev.Retry)
			}
			if strings.ContainsRune(ev.LastID, 0) {
				t.Fatalf("id %q has NUL", ev.LastID)
			}
			if r, err := shttp.DecodeWatchEvent(ev.Type, ev.Data); r != nil && err != nil {
				t.Fatalf("decode %+v: both a reading and %v", ev, err)
			}
		}
	})
}

// FuzzWatchQuery: the watch's interval and Last-Event-ID are accepted only
// when usable, and an accepted one means what it says.
func FuzzWatchQuery(f *testing.F) {
	for _, s := range []string{"1s", "100ms", "99ms", "1h", "1h1ns", "-1s", "1", "", "5", "-5", "+5", "007", "9223372036854775808", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := shttp.ParseWatchInterval(s)
		if err != nil {
			if shardcounter.ErrorCode(err) != shardcounter.EINVALID {
				t.Fatalf("interval %q: %v, want invalid_argument", s, err)
			}
		} else {
			if d < shttp.MinWatchInterval || d > shttp.MaxWatchInterval {
				t.Fatalf("interval %q accepted as %v, out of range", s, d)
			}
			if s != "" {
				if want, _ := time.ParseDuration(s); want != d {
					t.Fatalf("interval %q accepted as %v, want %v", s, d, want)
				}
			}
		}
		v, ok, err := shttp.ParseLastEventID(s)
		switch {
		case err != nil:
			if shardcounter.ErrorCode(err) != shardcounter.EINVALID {
				t.Fatalf("Last-Event-ID %q: %v, want invalid_argument", s, err)
			}
		case s == "":
			if ok {
				t.Fatal("empty Last-Event-ID taken for a value")
			}
		case !ok || strconv.FormatInt(v, 10) != s:
			t.Fatalf("Last-Event-ID %q accepted as %d", s, v)
		}
	})
}
