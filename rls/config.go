// Package rls serves Envoy's global rate-limit service
// (envoy.service.ratelimit.v3.RateLimitService) over shardcounter's
// limits, configured by envoyproxy/ratelimit's YAML.
//
// Each descriptor of the YAML that has a rate_limit becomes one limit of
// the engine (a rule); a request's descriptor that matches it takes from
// one key of that limit, so a count is exact, durable and shared by every
// server on the store, where envoyproxy/ratelimit keeps it in one Redis
// key. docs/LIMITS.md ("Envoy") says how rules and keys are named.
package rls

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"

	"github.com/shardcounter/shardcounter"
)

// MaxConfigBytes bounds one YAML file: a configuration is written by
// hand, and a file this large is a mistake, not a configuration.
const MaxConfigBytes = 8 << 20

// MaxDepth bounds how deeply descriptors nest: Envoy sends descriptors
// of a few entries, and a deeper rule could never match.
const MaxDepth = 32

// The YAML as envoyproxy/ratelimit reads it. Every key it accepts is
// accepted here (an unknown one is an error, as there); detailed_metric
// and value_to_metric name its statistics and change nothing here.
type yamlFile struct {
	Domain      string           `yaml:"domain"`
	Descriptors []yamlDescriptor `yaml:"descriptors"`
}

type yamlDescriptor struct {
	Key            string           `yaml:"key"`
	Value          string           `yaml:"value"`
	RateLimit      *yamlRateLimit   `yaml:"rate_limit"`
	Descriptors    []yamlDescriptor `yaml:"descriptors"`
	ShadowMode     bool             `yaml:"shadow_mode"`
	QuotaMode      bool             `yaml:"quota_mode"`
	DetailedMetric bool             `yaml:"detailed_metric"`
	ValueToMetric  bool             `yaml:"value_to_metric"`
	ShareThreshold bool             `yaml:"share_threshold"`
	// Metadata is free-form there (it goes back to Envoy as dynamic
	// metadata); its "shardcounter" entry is where a descriptor asks for
	// a sliding window, so that a file using it still loads there.
	Metadata map[string]any `yaml:"metadata"`
}

type yamlRateLimit struct {
	RequestsPerUnit uint32 `yaml:"requests_per_unit"`
	Unit            string `yaml:"unit"`
	Unlimited       bool   `yaml:"unlimited"`
	Name            string `yaml:"name"`
	Replaces        []struct {
		Name string `yaml:"name"`
	} `yaml:"replaces"`
}

// Rule is a descriptor of the YAML with a rate_limit: what a request's
// descriptor that matches it is limited by.
type Rule struct {
	// Limit is the name of the engine's limit that holds the rule's keys
	// (LimitName); empty when the rule never takes (Unlimited, or 0
	// requests a unit).
	Limit  string
	Domain string
	// Path is the rule's place in the YAML: key or key=value per level.
	Path string
	// Policy is the engine limit's policy: a fixed window of the unit, or
	// a sliding one (metadata shardcounter.window: sliding).
	Policy          shardcounter.LimitPolicy
	Unit            pb.RateLimitResponse_RateLimit_Unit
	RequestsPerUnit uint32
	Unlimited       bool
	ShadowMode      bool
	QuotaMode       bool
	Name            string   // rate_limit.name: what replaces names
	Replaces        []string // the names of the rules this one replaces

	// dynamic holds, per level, whether the request's value goes into the
	// key: it does where the rule gives no value, or a wildcard whose
	// matches do not share one threshold.
	dynamic []bool
}

// node is one descriptor list of the YAML, as a matcher: a request's entry
// is looked up by key and value, then among the wildcard values in the
// order written, then by key alone, as envoyproxy/ratelimit does.
type node struct {
	exact   map[kv]*node
	wild    []wildNode
	keyOnly map[string]*node
	rule    *Rule
}

type kv struct{ key, value string }

type wildNode struct {
	key   string
	parts []string // the value split at each '*'
	n     *node
}

// Config is a loaded configuration: its domains' matchers and rules.
type Config struct {
	domains map[string]*node
	rules   []*Rule
}

// Rules returns every rule, in the order of the files and the YAML.
func (c *Config) Rules() []*Rule { return c.rules }

// Load reads a configuration from path: one YAML file, or a directory
// whose *.yaml files are read in name order (each a domain, as
// envoyproxy/ratelimit's config directory holds them). A domain defined
// twice is an error.
func Load(path string) (*Config, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the rate-limit configuration: %w", err)
	}
	files := []string{path}
	if st.IsDir() {
		if files, err = filepath.Glob(filepath.Join(path, "*.yaml")); err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s holds no *.yaml file: put a domain's YAML there", path)
		}
		slices.Sort(files)
	}
	c := newConfig()
	for _, f := range files {
		b, err := readFile(f)
		if err != nil {
			return nil, err
		}
		if err := c.add(f, b); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the rate-limit configuration: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	if len(b) > MaxConfigBytes {
		return nil, fmt.Errorf("%s is over %d bytes: split it into a file a domain", path, MaxConfigBytes)
	}
	return b, nil
}

// Parse reads one YAML document (one domain), named name in errors.
func Parse(name string, b []byte) (*Config, error) {
	c := newConfig()
	if err := c.add(name, b); err != nil {
		return nil, err
	}
	return c, nil
}

func newConfig() *Config { return &Config{domains: map[string]*node{}} }

func (c *Config) add(file string, b []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var y yamlFile
	if err := dec.Decode(&y); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s is empty: give a domain and its descriptors", file)
		}
		return fmt.Errorf("%s: %v", file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s holds more than one YAML document: give one domain a file", file)
	}
	if y.Domain == "" {
		return fmt.Errorf("%s: domain is empty: give the domain Envoy's rate_limit filter names", file)
	}
	if _, dup := c.domains[y.Domain]; dup {
		return fmt.Errorf("%s: domain %q is defined twice: keep each domain in one file", file, y.Domain)
	}
	root := &node{}
	if err := c.load(file, y.Domain, root, y.Descriptors, nil, nil, 1); err != nil {
		return err
	}
	c.domains[y.Domain] = root
	return nil
}

// load fills n with the descriptor list ds, under the levels path (their
// key or key=value, escaped) whose keys are dynamic or not.
func (c *Config) load(file, domain string, n *node, ds []yamlDescriptor, path []string, dynamic []bool, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("%s: descriptors nest deeper than %d levels", file, MaxDepth)
	}
	for _, d := range ds {
		where := fmt.Sprintf("%s: domain %q, descriptor %s", file, domain, strings.Join(append(slices.Clone(path), level(d.Key, d.Value)), ":"))
		if d.Key == "" {
			return fmt.Errorf("%s: a descriptor has an empty key: give each its key", where)
		}
		child := &node{}
		wild := strings.Contains(d.Value, "*")
		switch {
		case d.Value == "":
			if n.keyOnly[d.Key] != nil {
				return fmt.Errorf("%s is defined twice in one list", where)
			}
			if n.keyOnly == nil {
				n.keyOnly = map[string]*node{}
			}
			n.keyOnly[d.Key] = child
		case wild:
			for _, w := range n.wild {
				if w.key == d.Key && strings.Join(w.parts, "*") == d.Value {
					return fmt.Errorf("%s is defined twice in one list", where)
				}
			}
			n.wild = append(n.wild, wildNode{d.Key, strings.Split(d.Value, "*"), child})
		default:
			if n.exact[kv{d.Key, d.Value}] != nil {
				return fmt.Errorf("%s is defined twice in one list", where)
			}
			if n.exact == nil {
				n.exact = map[kv]*node{}
			}
			n.exact[kv{d.Key, d.Value}] = child
		}
		if d.ShareThreshold && !wild {
			return fmt.Errorf("%s: share_threshold is for a value with a wildcard (*)", where)
		}
		lpath := append(slices.Clone(path), level(d.Key, d.Value))
		ldyn := append(slices.Clone(dynamic), d.Value == "" || (wild && !d.ShareThreshold))
		window, bucket, err := shardcounterMetadata(d.Metadata)
		if err != nil {
			return fmt.Errorf("%s: metadata: %v", where, err)
		}
		if d.RateLimit == nil {
			if window != "" {
				return fmt.Errorf("%s: metadata shardcounter is for a descriptor with a rate_limit", where)
			}
			if d.ShadowMode || d.QuotaMode {
				return fmt.Errorf("%s: shadow_mode and quota_mode are for a descriptor with a rate_limit", where)
			}
		} else {
			r, err := newRule(domain, lpath, ldyn, d, window, bucket)
			if err != nil {
				return fmt.Errorf("%s: %v", where, err)
			}
			child.rule = r
			c.rules = append(c.rules, r)
		}
		if err := c.load(file, domain, child, d.Descriptors, lpath, ldyn, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// units are the seconds of each unit, as envoyproxy/ratelimit counts
// them: a month is 30 days and a year 365, windows aligned to Unix time.
var units = map[pb.RateLimitResponse_RateLimit_Unit]int64{
	pb.RateLimitResponse_RateLimit_SECOND: 1,
	pb.RateLimitResponse_RateLimit_MINUTE: 60,
	pb.RateLimitResponse_RateLimit_HOUR:   3600,
	pb.RateLimitResponse_RateLimit_DAY:    86400,
	pb.RateLimitResponse_RateLimit_WEEK:   7 * 86400,
	pb.RateLimitResponse_RateLimit_MONTH:  30 * 86400,
	pb.RateLimitResponse_RateLimit_YEAR:   365 * 86400,
}

func newRule(domain string, path []string, dynamic []bool, d yamlDescriptor, window string, bucket shardcounter.Duration) (*Rule, error) {
	rl := d.RateLimit
	r := &Rule{
		Domain: domain, Path: strings.Join(path, ":"), dynamic: dynamic,
		RequestsPerUnit: rl.RequestsPerUnit, Unlimited: rl.Unlimited,
		ShadowMode: d.ShadowMode, QuotaMode: d.QuotaMode, Name: rl.Name,
	}
	for _, x := range rl.Replaces {
		if x.Name == "" {
			return nil, fmt.Errorf("rate_limit.replaces has an entry without a name")
		}
		r.Replaces = append(r.Replaces, x.Name)
	}
	u, ok := pb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(rl.Unit)]
	unit := pb.RateLimitResponse_RateLimit_Unit(u)
	if !ok || units[unit] == 0 {
		ok = false
	}
	if rl.Unlimited {
		if rl.Unit != "" || rl.RequestsPerUnit != 0 {
			return nil, fmt.Errorf("an unlimited rate_limit takes no unit and no requests_per_unit")
		}
		if window != "" {
			return nil, fmt.Errorf("an unlimited rate_limit has no window")
		}
		return r, nil
	}
	if !ok {
		return nil, fmt.Errorf("rate_limit unit %q is unknown: give second, minute, hour, day, week, month or year", rl.Unit)
	}
	r.Unit = unit
	r.Policy = shardcounter.LimitPolicy{Kind: shardcounter.LimitFixed, Limit: int64(rl.RequestsPerUnit), Period: shardcounter.Duration(time.Duration(units[unit]) * time.Second)}
	if window == "sliding" {
		r.Policy.Kind = shardcounter.LimitSliding
		r.Policy.Bucket = bucket
	} else if bucket != 0 {
		return nil, fmt.Errorf("metadata shardcounter.bucket is for a sliding window: add window: sliding")
	}
	if rl.RequestsPerUnit == 0 {
		// Every request is over: envoyproxy/ratelimit's way to block a
		// value. Nothing is counted, so no limit is kept.
		return r, nil
	}
	if err := shardcounter.ValidateLimitPolicy(r.Policy); err != nil {
		return nil, errors.New(shardcounter.ErrorMessage(err))
	}
	r.Policy = r.Policy.WithDefaults()
	r.Limit = LimitName(domain, path)
	return r, nil
}

// shardcounterMetadata reads a descriptor's metadata.shardcounter: window
// (fixed or sliding) and bucket (a duration); "" and 0 when absent.
func shardcounterMetadata(md map[string]any) (string, shardcounter.Duration, error) {
	v, ok := md["shardcounter"]
	if !ok {
		return "", 0, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return "", 0, fmt.Errorf("shardcounter is not a map: write shardcounter: {window: sliding}")
	}
	var window string
	var bucket shardcounter.Duration
	for k, v := range m {
		s, ok := v.(string)
		switch {
		case k == "window":
			if !ok || (s != "fixed" && s != "sliding") {
				return "", 0, fmt.Errorf("shardcounter.window is %v: give fixed or sliding", v)
			}
			window = s
		case k == "bucket":
			if !ok {
				return "", 0, fmt.Errorf("shardcounter.bucket is %v: give a duration such as 1s", v)
			}
			d, err := shardcounter.ParseDuration(s)
			if err != nil || d <= 0 {
				return "", 0, fmt.Errorf("shardcounter.bucket is %q: give a duration such as 1s", s)
			}
			bucket = d
		default:
			return "", 0, fmt.Errorf("shardcounter.%s is unknown: give window and bucket", k)
		}
	}
	if window == "" {
		window = "fixed"
	}
	return window, bucket, nil
}

// level is one level of a rule's path: its key, or key=value, escaped.
func level(key, value string) string {
	if value == "" {
		return escape(key)
	}
	return escape(key) + "=" + escape(value)
}

// escape writes s with every byte outside printable ASCII, and each of
// % : = / # and space, as %XX, so that a path of levels joined by ':'
// reads back one way and fits an HTTP path segment.
func escape(s string) string {
	const hexd = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("%:=/#", c) >= 0 {
			b.WriteByte('%')
			b.WriteByte(hexd[c>>4])
			b.WriteByte(hexd[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// LimitName is the engine limit of a rule: "envoy:" domain ":" its path,
// each escaped (level); past shardcounter.MaxLimitNameLen bytes,
// "envoy#" and 32 hex digits of the SHA-256 of that, which no readable
// name starts with.
func LimitName(domain string, path []string) string {
	n := "envoy:" + escape(domain) + ":" + strings.Join(path, ":")
	if len(n) <= shardcounter.MaxLimitNameLen {
		return n
	}
	return "envoy#" + hash(n)
}

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:16])
}
