package redis

import (
	"fmt"
	"testing"
)

// FuzzParseTake feeds the reader of takeScript's answers any text: it
// never panics, and what it accepts, written back as the script writes
// it, reads as the same decision.
func FuzzParseTake(f *testing.F) {
	f.Add("11:1:4:1000:0:0:1")
	f.Add("11:0:0:59000:-1:1:0")
	f.Add("11:1:4:1000:0:0")
	f.Add("8:12")
	f.Fuzz(func(t *testing.T, s string) {
		r, ok := parseTake(s)
		if !ok {
			return
		}
		b := func(x bool) int {
			if x {
				return 1
			}
			return 0
		}
		l := r.limit
		again, ok := parseTake(fmt.Sprintf("11:%d:%d:%d:%d:%d:%d", b(l.Allowed), l.Remaining, l.ResetAfterMS, l.RetryAfterMS, b(l.Duplicate), b(r.recorded)))
		if !ok || *again.limit != *l || again.recorded != r.recorded || again.code != resTake {
			t.Fatalf("parseTake(%q) = %+v %+v; written back it reads %+v %+v", s, r, *l, again, again.limit)
		}
	})
}
