package resp_test

import (
	"fmt"
	"strings"

	"github.com/shardcounter/shardcounter/resp"
)

// A pipeline arrives in one read: ReadCommands returns all of it, framed
// as arrays or sent as inline lines.
func ExampleReader_ReadCommands() {
	in := "*2\r\n$4\r\nINCR\r\n$5\r\nlikes\r\nGET likes\r\n"
	rd := resp.NewReader(strings.NewReader(in), resp.Limits{})
	cmds, err := rd.ReadCommands()
	if err != nil {
		panic(err)
	}
	for _, c := range cmds {
		fmt.Printf("%q\n", c.Args)
	}
	// Output:
	// ["INCR" "likes"]
	// ["GET" "likes"]
}

// The same reply in both protocols: a map in RESP3 is a flat array of
// names and values in RESP2.
func ExampleWriter_Map() {
	for _, proto := range []int{2, 3} {
		var w resp.Writer
		w.SetProto(proto)
		w.Map(1)
		w.BulkString("value")
		w.Int(42)
		fmt.Printf("RESP%d: %q\n", proto, w.Bytes())
	}
	// Output:
	// RESP2: "*2\r\n$5\r\nvalue\r\n:42\r\n"
	// RESP3: "%1\r\n$5\r\nvalue\r\n:42\r\n"
}
