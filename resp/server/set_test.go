package server

import (
	"bytes"
	"testing"
	"time"
)

// FuzzParseSet checks SET's option parser: it never panics, and what it
// accepts holds together: at most one of NX and XX, a deadline or KEEPTTL
// and not both, and a deadline after now within MaxTTL's bound.
func FuzzParseSet(f *testing.F) {
	for _, s := range []string{"NX GET EX 10", "XX PX 1500", "EXAT 1900000000", "PXAT 1900000000000 KEEPTTL", "KEEPTTL GET", "EX", "EX 0", "EX -1", "NX XX", "EX 9223372036854775807", "get nx px 3"} {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, in []byte) {
		opts := bytes.Fields(in)
		o, msg := parseSet(opts, now)
		if msg != "" {
			return
		}
		if o.nx && o.xx {
			t.Fatalf("%q: accepted NX and XX", in)
		}
		if o.at != nil && o.keepTTL {
			t.Fatalf("%q: accepted a deadline and KEEPTTL", in)
		}
		if o.at != nil && (!o.at.After(now.Add(-time.Duration(1<<62))) || o.at.After(now.Add(100*365*24*time.Hour))) {
			t.Fatalf("%q: deadline %v out of bounds", in, o.at)
		}
	})
}

// FuzzExpireCondition checks EXPIRE's option parser against Redis's rules:
// NX with any other option, and GT with LT, are refused.
func FuzzExpireCondition(f *testing.F) {
	for _, s := range []string{"NX", "XX GT", "GT LT", "nx xx", "LT XX", "FOO", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		opts := bytes.Fields(in)
		cond, msg := expireCondition(opts)
		if msg != "" {
			return
		}
		has := map[string]bool{}
		for _, o := range opts {
			has[lower(o)] = true
		}
		if (has["nx"] && len(has) > 1) || (has["gt"] && has["lt"]) {
			t.Fatalf("%q: accepted as %q", in, cond)
		}
	})
}
