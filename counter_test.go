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

func TestValidateIncrementKind(t *testing.T) {
	delta := shardcounter.Increment{Counter: "c", Delta: 1}
	member := shardcounter.Increment{Counter: "c", Delta: 1, Member: "m"}
	for _, tc := range []struct {
		name string
		inc  shardcounter.Increment
		kind shardcounter.Kind
		ok   bool
	}{
		{"DeltaToSum", delta, shardcounter.KindSum, true},
		{"DeltaToUnsetKind", delta, "", true},
		{"MemberToDistinct", member, shardcounter.KindDistinct, true},
		{"MemberToSum", member, shardcounter.KindSum, false},
		{"DeltaToDistinct", delta, shardcounter.KindDistinct, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := shardcounter.ValidateIncrementKind(tc.inc, tc.kind)
			if tc.ok && err != nil || !tc.ok && !errors.Is(err, shardcounter.ErrInvalid) {
				t.Errorf("ValidateIncrementKind(%+v, %q) = %v, want ok %v", tc.inc, tc.kind, err, tc.ok)
			}
		})
	}
}

func TestErrorHelpers(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want *shardcounter.Error
		name string
	}{
		{shardcounter.CounterNotFound("likes"), shardcounter.ErrNotFound, `"likes"`},
		{shardcounter.CollectionNotFound("posts"), shardcounter.ErrNotFound, `"posts"`},
		{shardcounter.DocumentNotFound("posts", "p1"), shardcounter.ErrNotFound, `"p1"`},
		{shardcounter.CounterHasNoMembers("views"), shardcounter.ErrInvalid, `"views"`},
		{shardcounter.CounterHasNoWindow("views"), shardcounter.ErrInvalid, `"views"`},
		{shardcounter.OutcomeUnknownf("commit of %q timed out", "likes"), shardcounter.ErrOutcomeUnknown, `"likes"`},
	} {
		if !errors.Is(tc.err, tc.want) || !strings.Contains(tc.err.Error(), tc.name) {
			t.Errorf("%v: want code %s naming %s", tc.err, tc.want.Code, tc.name)
		}
	}
	if err := shardcounter.OutcomeUnknownf("x"); !shardcounter.IsOutcomeUnknown(err) || !strings.Contains(err.Message, "same request id") {
		t.Errorf("OutcomeUnknownf = %+v: want outcome unknown, naming the retry", err)
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
