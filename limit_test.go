package shardcounter_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

func TestParseLimitPolicy(t *testing.T) {
	sec := shardcounter.Duration(time.Second)
	for _, tc := range []struct {
		in   string
		want shardcounter.LimitPolicy
	}{
		{"fixed 300/10s", shardcounter.LimitPolicy{Kind: shardcounter.LimitFixed, Limit: 300, Period: 10 * sec}},
		{"sliding 300/10s", shardcounter.LimitPolicy{Kind: shardcounter.LimitSliding, Limit: 300, Period: 10 * sec, Bucket: sec}},
		{"sliding 100/1h", shardcounter.LimitPolicy{Kind: shardcounter.LimitSliding, Limit: 100, Period: 3600 * sec, Bucket: 60 * sec}},
		{"sliding 100/90s", shardcounter.LimitPolicy{Kind: shardcounter.LimitSliding, Limit: 100, Period: 90 * sec, Bucket: 2 * sec}},
		{"sliding 5/1m bucket 30s", shardcounter.LimitPolicy{Kind: shardcounter.LimitSliding, Limit: 5, Period: 60 * sec, Bucket: 30 * sec}},
		{"gcra 10/1s", shardcounter.LimitPolicy{Kind: shardcounter.LimitGCRA, Limit: 10, Period: sec, Burst: 10}},
		{"gcra 10/1s burst 20", shardcounter.LimitPolicy{Kind: shardcounter.LimitGCRA, Limit: 10, Period: sec, Burst: 20}},
	} {
		got, err := shardcounter.ParseLimitPolicy(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseLimitPolicy(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if again, err := shardcounter.ParseLimitPolicy(got.String()); err != nil || again != got {
			t.Errorf("ParseLimitPolicy(%q) = %+v, %v; want %+v", got.String(), again, err, got)
		}
	}
}

func TestParseLimitPolicyInvalid(t *testing.T) {
	for _, in := range []string{
		"", "fixed", "fixed 300", "fixed 300/", "fixed x/10s", "fixed 0/10s", "fixed -1/10s",
		"fixed 300/500ms", "fixed 300/0s", "fixed 300/400d", "leaky 300/10s",
		"fixed 300/10s burst 2", "gcra 10/1s bucket 1s", "sliding 10/10s burst 2",
		"sliding 10/10s bucket 3s", "sliding 10/10s bucket 500ms", "sliding 10/1500ms",
		"sliding 10/1h bucket 1s", "gcra 10/1s burst 0", "gcra 10/1s burst x", "gcra 10/1s size 2",
		"gcra 2000000000/1s", "fixed 2000000000000/1s", "fixed 300/10s bucket",
	} {
		p, err := shardcounter.ParseLimitPolicy(in)
		if !errors.Is(err, shardcounter.ErrInvalid) {
			t.Errorf("ParseLimitPolicy(%q) = %+v, %v; want invalid_argument", in, p, err)
		}
	}
}

func TestLimitIDs(t *testing.T) {
	p, _ := shardcounter.ParseLimitPolicy("fixed 300/10s")
	q, _ := shardcounter.ParseLimitPolicy("fixed 301/10s")
	name := "api; tenant"
	def := shardcounter.LimitDefinitionID(name, p)
	if err := shardcounter.ValidateID(shardcounter.CounterIDKind, def); err != nil {
		t.Fatalf("definition id %q: %v", def, err)
	}
	if !strings.HasPrefix(def, shardcounter.LimitDefinitionPrefix(name)) || !strings.HasPrefix(def, shardcounter.LimitDefinitionPrefix("")) {
		t.Errorf("definition id %q lacks its prefixes", def)
	}
	gotName, gotP, ok := shardcounter.ParseLimitDefinitionID(def)
	if !ok || gotName != name || gotP != p {
		t.Errorf("ParseLimitDefinitionID(%q) = %q, %+v, %v", def, gotName, gotP, ok)
	}
	if _, _, ok := shardcounter.ParseLimitDefinitionID(shardcounter.LimitKeyID(name, p, "k")); ok {
		t.Errorf("a key's id reads as a definition")
	}
	long := strings.Repeat("k", shardcounter.MaxIDLen)
	key := shardcounter.LimitKeyID(strings.Repeat("n", shardcounter.MaxLimitNameLen), p, long)
	if err := shardcounter.ValidateID(shardcounter.CounterIDKind, key); err != nil {
		t.Errorf("key id of a longest key: %v", err)
	}
	if !strings.HasPrefix(shardcounter.LimitKeyID(name, p, "k"), shardcounter.LimitKeysPrefix(name)) {
		t.Errorf("key id lacks the limit's prefix")
	}
	if shardcounter.LimitKeyID(name, p, "k") == shardcounter.LimitKeyID(name, q, "k") {
		t.Errorf("a changed policy keeps the key's state")
	}
}

func TestValidateIncrementRefusesTakes(t *testing.T) {
	p, _ := shardcounter.ParseLimitPolicy("gcra 10/1s")
	err := shardcounter.ValidateIncrement(shardcounter.Increment{Counter: "k", Take: &shardcounter.LimitTake{Policy: p, Cost: 1}})
	if !shardcounter.IsLimitsUnsupported(err) {
		t.Errorf("ValidateIncrement of a take = %v; want ErrLimitsUnsupported", err)
	}
	if shardcounter.IsLimitsUnsupported(shardcounter.ErrInvalid) {
		t.Errorf("IsLimitsUnsupported(ErrInvalid) = true")
	}
}

// FuzzParseLimitPolicy: any text parses to a valid policy that writes
// back to text reading the same, or fails with invalid_argument.
func FuzzParseLimitPolicy(f *testing.F) {
	for _, s := range []string{"fixed 300/10s", "sliding 300/10s bucket 1s", "gcra 10/1s burst 20", "sliding 7/1d", "fixed 1/366d", "gcra 1/1s burst 1099511627776"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := shardcounter.ParseLimitPolicy(s)
		if err != nil {
			if !errors.Is(err, shardcounter.ErrInvalid) {
				t.Fatalf("ParseLimitPolicy(%q): %v, not invalid_argument", s, err)
			}
			return
		}
		if err := shardcounter.ValidateLimitPolicy(p); err != nil {
			t.Fatalf("ParseLimitPolicy(%q) = %+v, which does not validate: %v", s, p, err)
		}
		if n := p.StateShards(); n < 1 || n > shardcounter.MaxShards {
			t.Fatalf("policy %+v has %d state shards", p, n)
		}
		again, err := shardcounter.ParseLimitPolicy(p.String())
		if err != nil || again != p {
			t.Fatalf("ParseLimitPolicy(%q) = %+v, %v; want %+v", p.String(), again, err, p)
		}
	})
}
