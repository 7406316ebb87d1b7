package main

import (
	"fmt"
	"strconv"

	"github.com/shardcounter/shardcounter"
)

// Flag values that parse strictly and say what they want; the flag
// package turns their errors into usage errors (exit 2).

// int64Flag is an optional int64 flag: nil until given.
type int64Flag struct{ v *int64 }

func (f *int64Flag) String() string {
	if f.v == nil {
		return ""
	}
	return strconv.FormatInt(*f.v, 10)
}

func (f *int64Flag) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not a whole number from %d to %d", s, int64(-1<<63), int64(1<<63-1))
	}
	f.v = &n
	return nil
}

// durationFlag is a span of time as shardcounter.ParseDuration reads it
// (7d, 24h, 90m); 0 until given.
type durationFlag struct{ d shardcounter.Duration }

func (f *durationFlag) String() string {
	if f.d == 0 {
		return ""
	}
	return f.d.String()
}

func (f *durationFlag) Set(s string) error {
	d, err := shardcounter.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%s", shardcounter.ErrorMessage(err))
	}
	f.d = d
	return nil
}

// windowFlag is a counter's window as BUCKET:RETENTION (1h:7d); nil
// until given.
type windowFlag struct{ w *shardcounter.Window }

func (f *windowFlag) String() string {
	if f.w == nil {
		return ""
	}
	return f.w.Bucket.String() + ":" + f.w.Retention.String()
}

func (f *windowFlag) Set(s string) error {
	w, err := shardcounter.ParseWindow(s)
	if err != nil {
		return fmt.Errorf("%s", shardcounter.ErrorMessage(err))
	}
	f.w = w
	return nil
}

// kindFlag is a counter kind: sum, distinct or approx.
type kindFlag struct{ k shardcounter.Kind }

func (f *kindFlag) String() string { return string(f.k) }

func (f *kindFlag) Set(s string) error {
	switch k := shardcounter.Kind(s); k {
	case shardcounter.KindSum, shardcounter.KindDistinct, shardcounter.KindApprox:
		f.k = k
		return nil
	}
	return fmt.Errorf("%q is not a kind: give sum, distinct or approx", s)
}
