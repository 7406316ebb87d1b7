package docstore

import (
	"net/url"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
)

// DSN is a document store's DSN, scheme://PROJECT[/PATH][?OPTIONS], as
// ParseDSN reads it.
type DSN struct {
	Project string
	Path    string // without its slashes
	// Interval is shard_write_interval: 0 when not given, negative for 0
	// (pacing off).
	Interval time.Duration
	// Options are the other options, each given once.
	Options map[string]string

	dsn, usage string
}

// Bad is an invalid_argument error about the DSN, ending in its usage.
func (d *DSN) Bad(format string, args ...any) error {
	return shardcounter.Errorf(shardcounter.EINVALID, "store %q: "+format+": write "+d.usage, append([]any{d.dsn}, args...)...)
}

// ParseDSN reads dsn, a scheme:// URL (usage is how to write one): no
// user, password, port or fragment, each option once, a shard_write_interval
// from 0 to 1h. checkPath, unless nil, is called first, with the path
// read; then the project must be a project id.
func ParseDSN(dsn, scheme, usage string, checkPath func(d *DSN) error) (*DSN, error) {
	d := &DSN{dsn: dsn, usage: usage, Options: map[string]string{}}
	u, err := url.Parse(dsn)
	if err != nil || !strings.EqualFold(u.Scheme, scheme) {
		return nil, d.Bad("not a %s:// URL", scheme)
	}
	if u.User != nil || u.Port() != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, d.Bad("a %s DSN has no user, password, port or fragment", scheme)
	}
	d.Project, d.Path = u.Host, strings.Trim(u.Path, "/")
	if checkPath != nil {
		if err := checkPath(d); err != nil {
			return nil, err
		}
	}
	if !ValidName(d.Project, 63) {
		return nil, d.Bad("project %q is not a project id (letters, digits and hyphens)", d.Project)
	}
	for k, vs := range u.Query() {
		if len(vs) != 1 {
			return nil, d.Bad("option %s given %d times", k, len(vs))
		}
		if k != "shard_write_interval" {
			d.Options[k] = vs[0]
			continue
		}
		iv, err := time.ParseDuration(vs[0])
		if err != nil || iv < 0 || iv > time.Hour {
			return nil, d.Bad("shard_write_interval %q is not a duration from 0 to 1h (0 turns pacing off)", vs[0])
		}
		d.Interval = iv
		if iv == 0 {
			d.Interval = -1
		}
	}
	return d, nil
}
