package rls

import (
	"strings"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/shardcounter/shardcounter"
)

// Match finds the rule that limits a request's descriptor in domain, and
// the key of the rule's limit it takes from. As envoyproxy/ratelimit
// matches: entry i is looked up in the YAML's level i, by key and value,
// then among the wildcard values in the order written, then by key alone;
// the rule is the rate_limit of the level the last entry matched, so a
// descriptor of two entries never matches a rule one level deep. It
// returns nil when no rule matches (the descriptor is not limited).
func (c *Config) Match(domain string, entries []*rlpb.RateLimitDescriptor_Entry) (*Rule, string) {
	n := c.domains[domain]
	if n == nil || len(entries) == 0 {
		return nil, ""
	}
	for _, e := range entries {
		next := n.exact[kv{e.GetKey(), e.GetValue()}]
		if next == nil {
			for _, w := range n.wild {
				if w.key == e.GetKey() && wildcardMatch(w.parts, e.GetValue()) {
					next = w.n
					break
				}
			}
		}
		if next == nil {
			next = n.keyOnly[e.GetKey()]
		}
		if next == nil {
			return nil, ""
		}
		n = next
	}
	if n.rule == nil {
		return nil, ""
	}
	return n.rule, n.rule.key(entries)
}

// wildcardMatch reports whether value is parts joined by runs of any
// bytes: each '*' of a value matches zero or more bytes.
func wildcardMatch(parts []string, value string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if !strings.HasPrefix(value, first) {
		return false
	}
	value = value[len(first):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(value, p)
		if i < 0 {
			return false
		}
		value = value[i+len(p):]
	}
	return strings.HasSuffix(value, last)
}

// key is the key of r's limit that a descriptor matching r takes from:
// the request's values at r's dynamic levels, escaped and joined by ':'
// ("-" when r has none: every match shares one count); empty or past
// shardcounter.MaxIDLen bytes, "#" and 32 hex digits of its SHA-256.
func (r *Rule) key(entries []*rlpb.RateLimitDescriptor_Entry) string {
	var parts []string
	for i, e := range entries {
		if r.dynamic[i] {
			parts = append(parts, escape(e.GetValue()))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	k := strings.Join(parts, ":")
	if k == "" || len(k) > shardcounter.MaxIDLen {
		return "#" + hash(k)
	}
	return k
}
