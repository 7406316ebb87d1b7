package rls

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/shardcounter/shardcounter"
)

func entries(kvs ...string) []*rlpb.RateLimitDescriptor_Entry {
	var es []*rlpb.RateLimitDescriptor_Entry
	for i := 0; i < len(kvs); i += 2 {
		es = append(es, &rlpb.RateLimitDescriptor_Entry{Key: kvs[i], Value: kvs[i+1]})
	}
	return es
}

const messaging = `
domain: messaging
descriptors:
  # 5 marketing messages a day to each number
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  - key: to_number
    rate_limit:
      unit: DAY
      requests_per_unit: 100
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: path
    value: /api/*/action
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: path
    value: "*"
    rate_limit: {unit: minute, requests_per_unit: 50}
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: roll
    rate_limit: {unit: hour, requests_per_unit: 100}
    metadata:
      owner: team-a
      shardcounter: {window: sliding, bucket: 5m}
`

// TestMatch runs envoyproxy/ratelimit's matching rules over its README's
// examples: key and value before key alone, a descriptor matched only at
// its own depth, wildcards in the order written, shared wildcard
// thresholds, and the names and keys each match takes from.
func TestMatch(t *testing.T) {
	c, err := Parse("messaging.yaml", []byte(messaging))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		entries []string
		path    string // "" for no rule
		key     string
	}{
		{[]string{"message_type", "marketing", "to_number", "2061111111"}, "message_type=marketing:to_number", "2061111111"},
		{[]string{"to_number", "2061111111"}, "to_number", "2061111111"},
		{[]string{"message_type", "marketing"}, "", ""},                                          // a placeholder: no rate_limit
		{[]string{"message_type", "transactional", "to_number", "2061111111"}, "", ""},           // no such value, no key-only entry
		{[]string{"to_number", "2061111111", "message_type", "marketing"}, "", ""},               // deeper than the rule
		{[]string{"remote_address", "50.0.0.5"}, "remote_address=50.0.0.5", "-"},                 // key and value first
		{[]string{"remote_address", "50.0.0.6"}, "remote_address", "50.0.0.6"},                   // then the key alone
		{[]string{"path", "/api/v1/action"}, "path=%2Fapi%2F*%2Faction", "%2Fapi%2Fv1%2Faction"}, // the first wildcard written
		{[]string{"path", "/api/v1/other"}, "path=*", "%2Fapi%2Fv1%2Fother"},
		{[]string{"path", ""}, "path=*", "#" + hash("")},
		{[]string{"files", "files/a.pdf"}, "files=files%2F*", "-"}, // share_threshold: one count
		{[]string{"files", "other/a.pdf"}, "", ""},
		{[]string{"unknown", "x"}, "", ""},
	} {
		r, key := c.Match("messaging", entries(tc.entries...))
		path := ""
		if r != nil {
			path = r.Path
		}
		if path != tc.path || key != tc.key {
			t.Errorf("Match(%q) = %q, key %q; want %q, key %q", tc.entries, path, key, tc.path, tc.key)
		}
	}
	if r, _ := c.Match("other", entries("to_number", "1")); r != nil {
		t.Errorf("a domain not configured matched %v", r.Path)
	}
	r, _ := c.Match("messaging", entries("roll", "x"))
	if want := (shardcounter.LimitPolicy{Kind: shardcounter.LimitSliding, Limit: 100, Period: shardcounter.Duration(3600e9), Bucket: shardcounter.Duration(300e9)}); r.Policy != want {
		t.Errorf("sliding rule's policy = %v; want %v", r.Policy, want)
	}
	if r.Limit != "envoy:messaging:roll" {
		t.Errorf("limit name %q", r.Limit)
	}
	if r, _ := c.Match("messaging", entries("remote_address", "50.0.0.5")); r.Limit != "" || r.RequestsPerUnit != 0 {
		t.Errorf("a rule of 0 a second keeps a limit: %+v", r)
	}
}

// TestNames checks that long names and keys are hashed to valid ones,
// and escaped ones read one way.
func TestNames(t *testing.T) {
	long := strings.Repeat("k", 200)
	n := LimitName("d", []string{level(long, "")})
	if !strings.HasPrefix(n, "envoy#") || shardcounter.ValidateLimitName(n) != nil {
		t.Errorf("long name = %q", n)
	}
	if a, b := LimitName("d", []string{level("a:b", "")}), LimitName("d", []string{level("a", ""), level("b", "")}); a == b {
		t.Errorf("two paths share the name %q", a)
	}
	r := &Rule{dynamic: []bool{true}}
	if k := r.key(entries("k", strings.Repeat("v", 300))); !strings.HasPrefix(k, "#") || shardcounter.ValidateName("key", k) != nil {
		t.Errorf("long key = %q", k)
	}
	if k := r.key(entries("k", "a\x01b")); k != "a%01b" {
		t.Errorf("key with a control character = %q", k)
	}
}

// TestParseErrors: each mistake is refused with a message that names it.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"", "empty"},
		{"descriptors: []", "domain is empty"},
		{"domain: d\nfoo: 1", "field foo not found"},
		{"domain: d\ndescriptors:\n- key: a\n  rate_limit: {unit: fortnight, requests_per_unit: 1}", `unit "fortnight" is unknown`},
		{"domain: d\ndescriptors:\n- key: a\n  rate_limit: {requests_per_unit: 1}", `unit "" is unknown`},
		{"domain: d\ndescriptors:\n- key: a\n  rate_limit: {unit: second, requests_per_unit: -1}", "cannot unmarshal"},
		{"domain: d\ndescriptors:\n- key: a\n  rate_limit: {unlimited: true, unit: second}", "takes no unit"},
		{"domain: d\ndescriptors:\n- value: a", "empty key"},
		{"domain: d\ndescriptors:\n- key: a\n- key: a", "defined twice"},
		{"domain: d\ndescriptors:\n- key: a\n  value: x*\n- key: a\n  value: x*", "defined twice"},
		{"domain: d\ndescriptors:\n- key: a\n  value: x\n  share_threshold: true", "share_threshold is for a value with a wildcard"},
		{"domain: d\ndescriptors:\n- key: a\n  shadow_mode: true", "for a descriptor with a rate_limit"},
		{"domain: d\ndescriptors:\n- key: a\n  rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: ''}]}", "without a name"},
		{"domain: d\ndescriptors:\n- key: a\n  metadata: {shardcounter: {window: sliding}}", "metadata shardcounter is for a descriptor with a rate_limit"},
		{"domain: d\ndescriptors:\n- key: a\n  rate_limit: {unit: minute, requests_per_unit: 1}\n  metadata: {shardcounter: {window: rolling}}", "give fixed or sliding"},
		{"domain: d\ndescriptors:\n- key: a\n  rate_limit: {unit: minute, requests_per_unit: 1}\n  metadata: {shardcounter: {bucket: 1s}}", "is for a sliding window"},
		{"domain: d\ndescriptors:\n- key: a\n  rate_limit: {unit: minute, requests_per_unit: 1}\n  metadata: {shardcounter: {window: sliding, bucket: 7s}}", "does not divide"},
		{"domain: d\ndescriptors:\n- key: a\n  rate_limit: {unit: minute, requests_per_unit: 1}\n  metadata: {shardcounter: {window: sliding, size: 7s}}", "shardcounter.size is unknown"},
		{"domain: d\ndescriptors:\n- key: a\n  rate_limit: {unit: minute, requests_per_unit: 1}\n  metadata: {shardcounter: sliding}", "is not a map"},
		{"domain: d\n---\ndomain: e", "more than one YAML document"},
		{"domain: [", "did not find expected"},
	} {
		_, err := Parse("f.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v; want an error saying %q", tc.yaml, err, tc.want)
		}
	}
	deep := "domain: d\ndescriptors:\n"
	for i := range MaxDepth + 1 {
		deep += strings.Repeat("  ", 2*i) + "- key: k\n" + strings.Repeat("  ", 2*i) + "  descriptors:\n"
	}
	if _, err := Parse("f.yaml", []byte(deep)); err == nil || !strings.Contains(err.Error(), "nest deeper") {
		t.Errorf("descriptors nested %d deep: %v", MaxDepth+1, err)
	}
}

// TestLoad reads a file and a directory of *.yaml, each file a domain,
// and refuses a domain defined twice and a directory with no file.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "no *.yaml") {
		t.Errorf("Load(empty dir) = %v", err)
	}
	write("a.yaml", "domain: a\ndescriptors:\n- key: k\n  rate_limit: {unit: second, requests_per_unit: 1}\n")
	write("b.yaml", "domain: b\ndescriptors:\n- key: k\n  rate_limit: {unit: second, requests_per_unit: 2}\n")
	write("notes.txt", "not yaml: [")
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rules()) != 2 || c.Rules()[0].Domain != "a" || c.Rules()[1].Domain != "b" {
		t.Errorf("rules = %+v", c.Rules())
	}
	if c, err := Load(filepath.Join(dir, "b.yaml")); err != nil || len(c.Rules()) != 1 {
		t.Errorf("Load(file) = %v, %v", c, err)
	}
	write("c.yaml", "domain: a\n")
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), `domain "a" is defined twice`) {
		t.Errorf("Load(domain twice) = %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil {
		t.Error("Load(missing) succeeded")
	}
}

// FuzzParse: any input parses or is refused, never panics; what parses
// names valid limits with valid policies, and matches its own rules.
func FuzzParse(f *testing.F) {
	f.Add([]byte(messaging))
	f.Add([]byte("domain: d\ndescriptors:\n- key: a\n  value: x*y*\n  share_threshold: true\n  rate_limit: {unlimited: true}"))
	f.Add([]byte("domain: d\ndescriptors:\n- key: a\n  rate_limit: {unit: year, requests_per_unit: 4294967295, name: n, replaces: [{name: m}]}\n  metadata: {shardcounter: {window: sliding}}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse("f.yaml", b)
		if err != nil {
			return
		}
		for _, r := range c.Rules() {
			if r.Limit == "" {
				continue
			}
			if err := shardcounter.ValidateLimitName(r.Limit); err != nil {
				t.Fatalf("rule %s: %v", r.Path, err)
			}
			if err := shardcounter.ValidateLimitPolicy(r.Policy); err != nil {
				t.Fatalf("rule %s: %v", r.Path, err)
			}
		}
	})
}
