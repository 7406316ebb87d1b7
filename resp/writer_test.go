package resp_test

import (
	"math"
	"testing"

	"github.com/shardcounter/shardcounter/resp"
)

func TestWriter(t *testing.T) {
	for _, tc := range []struct {
		name         string
		write        func(w *resp.Writer)
		want2, want3 string
	}{
		{"Simple", func(w *resp.Writer) { w.Simple("OK") }, "+OK\r\n", "+OK\r\n"},
		{"SimpleNoCRLF", func(w *resp.Writer) { w.Simple("a\r\nb") }, "+a  b\r\n", "+a  b\r\n"},
		{"Error", func(w *resp.Writer) { w.Error("ERR bad\nthing") }, "-ERR bad thing\r\n", "-ERR bad thing\r\n"},
		{"Int", func(w *resp.Writer) { w.Int(-42) }, ":-42\r\n", ":-42\r\n"},
		{"Bulk", func(w *resp.Writer) { w.Bulk([]byte("a\r\nb")) }, "$4\r\na\r\nb\r\n", "$4\r\na\r\nb\r\n"},
		{"BulkEmpty", func(w *resp.Writer) { w.BulkString("") }, "$0\r\n\r\n", "$0\r\n\r\n"},
		{"BulkInt", func(w *resp.Writer) { w.BulkInt(math.MinInt64) }, "$20\r\n-9223372036854775808\r\n", "$20\r\n-9223372036854775808\r\n"},
		{"Null", func(w *resp.Writer) { w.Null() }, "$-1\r\n", "_\r\n"},
		{"NullArray", func(w *resp.Writer) { w.NullArray() }, "*-1\r\n", "_\r\n"},
		{"Array", func(w *resp.Writer) { w.Array(2); w.Int(1); w.Null() }, "*2\r\n:1\r\n$-1\r\n", "*2\r\n:1\r\n_\r\n"},
		{"Set", func(w *resp.Writer) { w.Set(1); w.BulkString("a") }, "*1\r\n$1\r\na\r\n", "~1\r\n$1\r\na\r\n"},
		{"Map", func(w *resp.Writer) { w.Map(1); w.BulkString("k"); w.Int(1) }, "*2\r\n$1\r\nk\r\n:1\r\n", "%1\r\n$1\r\nk\r\n:1\r\n"},
		{"True", func(w *resp.Writer) { w.Bool(true) }, ":1\r\n", "#t\r\n"},
		{"False", func(w *resp.Writer) { w.Bool(false) }, ":0\r\n", "#f\r\n"},
		{"Double", func(w *resp.Writer) { w.Double(1.5) }, "$3\r\n1.5\r\n", ",1.5\r\n"},
		{"DoubleInf", func(w *resp.Writer) { w.Double(math.Inf(-1)) }, "$4\r\n-inf\r\n", ",-inf\r\n"},
		{"Verbatim", func(w *resp.Writer) { w.Verbatim("txt", "a:1\r\n") }, "$5\r\na:1\r\n\r\n", "=9\r\ntxt:a:1\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []int{2, 3} {
				var w resp.Writer
				w.SetProto(v)
				tc.write(&w)
				want := tc.want2
				if v == 3 {
					want = tc.want3
				}
				if got := string(w.Bytes()); got != want {
					t.Errorf("RESP%d: got %q, want %q", v, got, want)
				}
				w.Reset()
				if w.Len() != 0 {
					t.Errorf("Reset left %d bytes", w.Len())
				}
			}
		})
	}
}
