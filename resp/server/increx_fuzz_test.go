package server

import (
	"bytes"
	"testing"
	"time"
)

// FuzzIncrExArgs checks INCREX's argument parser on any arguments: it
// never panics, and what it accepts has its bounds in order and the
// options it was given.
func FuzzIncrExArgs(f *testing.F) {
	for _, s := range []string{
		"k", "k BYINT 5", "k BYINT -3 LBOUND 0 UBOUND 10 SATURATE", "k ubound 5 saturate",
		"k BYFLOAT 1.5", "k EX 10", "k PX 5 ENX", "k PERSIST", "k EXAT 1 ENX", "k ENX", "k LBOUND 3 UBOUND 2", "k BYINT", "k BYINT x", "k SATURATE SATURATE",
		"k BYINT 9223372036854775807 LBOUND -9223372036854775808",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := bytes.Fields([]byte("INCREX " + s))
		if len(args) < 2 {
			return
		}
		x, msg := parseIncrEx(args, time.Unix(1_800_000_000, 0))
		if msg != "" {
			return
		}
		if x.bound.Lower > x.bound.Upper {
			t.Fatalf("%q: accepted with lower %d above upper %d", s, x.bound.Lower, x.bound.Upper)
		}
		saturate := false
		for _, a := range args[2:] {
			saturate = saturate || bytes.EqualFold(a, []byte("saturate"))
		}
		if x.expire != nil && x.expire.At != 0 && x.expire.At <= 1_800_000_000_000 {
			t.Fatalf("%q: accepted a deadline %d not in the future", s, x.expire.At)
		}
		if x.bound.Saturate != saturate {
			t.Fatalf("%q: saturate %v", s, x.bound.Saturate)
		}
	})
}
