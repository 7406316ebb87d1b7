package shardcounter_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/shardcounter/shardcounter"
)

func TestValidateID(t *testing.T) {
	for _, ok := range []string{"a", "likes", "post/42/likes", "пост ❤", "a b%2F?#", strings.Repeat("x", 256), "\u00a0"} {
		if err := shardcounter.ValidateID("id", ok); err != nil {
			t.Errorf("ValidateID(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", 257), "a\x00", "\t", "a\x7f", "\u0085", "\xff", "a\nb"} {
		err := shardcounter.ValidateID("id", bad)
		if !errors.Is(err, shardcounter.ErrInvalid) {
			t.Errorf("ValidateID(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestValidateWrite(t *testing.T) {
	for _, w := range []shardcounter.Write{{Counter: "", Delta: 1}, {Counter: "c"}, {Counter: "c", Delta: 1, RequestID: "a\x01"}} {
		if err := shardcounter.ValidateWrite(w); !errors.Is(err, shardcounter.ErrInvalid) {
			t.Errorf("ValidateWrite(%+v) = %v, want ErrInvalid", w, err)
		}
	}
	if err := shardcounter.ValidateWrite(shardcounter.Write{Counter: "c", Delta: math.MinInt64, RequestID: "r"}); err != nil {
		t.Errorf("ValidateWrite of a valid write = %v", err)
	}
}

func TestErrorCode(t *testing.T) {
	if got := shardcounter.ErrorCode(errors.New("boom")); got != shardcounter.EINTERNAL {
		t.Errorf("ErrorCode(plain error) = %q, want internal", got)
	}
	if got := shardcounter.ErrorMessage(errors.New("secret detail")); got != "internal error" {
		t.Errorf("ErrorMessage(plain error) = %q, want it hidden", got)
	}
	wrapped := errors.Join(errors.New("context"), shardcounter.Errorf(shardcounter.ENOTFOUND, "counter %q not found", "x"))
	if shardcounter.ErrorCode(wrapped) != shardcounter.ENOTFOUND || !errors.Is(wrapped, shardcounter.ErrNotFound) || errors.Is(wrapped, shardcounter.ErrExists) {
		t.Errorf("wrapped not-found: code %q", shardcounter.ErrorCode(wrapped))
	}
	if shardcounter.ErrorCode(nil) != "" || shardcounter.IsOutcomeUnknown(nil) {
		t.Error("nil error has a code or an unknown outcome")
	}
}

func FuzzValidateID(f *testing.F) {
	for _, s := range []string{"likes", "", "a\x00b", "пост", "\xff", strings.Repeat("x", 257)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := shardcounter.ValidateID("id", s)
		if err != nil {
			if !errors.Is(err, shardcounter.ErrInvalid) || shardcounter.ErrorMessage(err) == "" {
				t.Fatalf("ValidateID(%q) = %v: want an invalid_argument with a message", s, err)
			}
			return
		}
		if s == "" || len(s) > shardcounter.MaxIDLen || !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Fatalf("ValidateID(%q) accepted an id it must refuse", s)
		}
	})
}
