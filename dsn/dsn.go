// Package dsn opens a store from a data source name: the one place that
// maps a DSN's scheme to a store package. Library users who know their
// store call its package's constructor instead.
//
//	pebble:DIR                                    embedded, a directory (the default)
//	bolt:PATH                                     embedded, one file
//	postgres://USER:PASS@HOST:PORT/DB?sslmode=…   PostgreSQL (also postgresql://)
//	redis://HOST:PORT[/DB]                        one Redis server
//	redis+cluster://HOST:PORT[?addr=HOST:PORT…]   Redis Cluster seed nodes
//	firestore://PROJECT[/DATABASE][?count_field=…] Cloud Firestore, native mode
//	datastore://PROJECT[?kind=…&namespace=…]      Firestore in Datastore mode
package dsn

import (
	"context"
	"net/url"
	"strings"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/datastore"
	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/pebble"
	"github.com/shardcounter/shardcounter/postgres"
	"github.com/shardcounter/shardcounter/redis"
)

// Store kinds, as Scheme returns them.
const (
	Bolt         = "bolt"
	Pebble       = "pebble"
	Postgres     = "postgres"
	Redis        = "redis"
	RedisCluster = "redis+cluster"
	Firestore    = "firestore"
	Datastore    = "datastore"
)

const usage = "use pebble:DIR, bolt:PATH, postgres://USER:PASS@HOST:PORT/DB, redis://HOST:PORT, redis+cluster://HOST:PORT, firestore://PROJECT or datastore://PROJECT"

// Scheme returns the kind of store a DSN names, or an EINVALID error.
func Scheme(dsn string) (string, error) {
	scheme, rest, ok := strings.Cut(dsn, ":")
	if !ok || scheme == "" {
		return "", shardcounter.Errorf(shardcounter.EINVALID, "store %q has no scheme: %s", Redact(dsn), usage)
	}
	switch strings.ToLower(scheme) {
	case "bolt":
		if strings.HasPrefix(rest, "//") {
			return "", shardcounter.Errorf(shardcounter.EINVALID, "store %q: write bolt:PATH, without //", dsn)
		}
		if rest == "" {
			return "", shardcounter.Errorf(shardcounter.EINVALID, "store %q has no file path: write bolt:./shardcounter-data/shardcounter.db", dsn)
		}
		return Bolt, nil
	case "pebble":
		if strings.HasPrefix(rest, "//") {
			return "", shardcounter.Errorf(shardcounter.EINVALID, "store %q: write pebble:DIR, without //", dsn)
		}
		if rest == "" {
			return "", shardcounter.Errorf(shardcounter.EINVALID, "store %q has no directory: write pebble:./shardcounter-data/pebble", dsn)
		}
		return Pebble, nil
	case "postgres", "postgresql":
		return Postgres, nil
	case "redis", "rediss":
		return Redis, nil
	case "redis+cluster":
		return RedisCluster, nil
	case "firestore":
		if _, err := firestore.ParseDSN(dsn); err != nil {
			return "", err
		}
		return Firestore, nil
	case "datastore":
		if _, err := datastore.ParseDSN(dsn); err != nil {
			return "", err
		}
		return Datastore, nil
	}
	return "", shardcounter.Errorf(shardcounter.EINVALID, "store scheme %q is unknown: %s", scheme, usage)
}

// Open opens the store a DSN names. An unknown scheme, a malformed DSN or
// an unreachable store is an error that says what to fix.
func Open(ctx context.Context, dsn string) (shardcounter.CounterStore, error) {
	kind, err := Scheme(dsn)
	if err != nil {
		return nil, err
	}
	switch kind {
	case Bolt:
		return bolt.Open(ctx, dsn[len("bolt:"):], bolt.Options{})
	case Pebble:
		return pebble.Open(ctx, dsn[len("pebble:"):], pebble.Options{})
	case Postgres:
		return postgres.Open(ctx, dsn, postgres.Options{})
	case Redis, RedisCluster:
		return redis.Open(ctx, dsn, redis.Options{})
	case Firestore:
		return firestore.Open(ctx, dsn)
	case Datastore:
		return datastore.Open(ctx, dsn)
	}
	return nil, shardcounter.Errorf(shardcounter.EINVALID, "store %q: this build has no %s store", Redact(dsn), kind)
}

// Redact returns the DSN with any password replaced by "xxxxx", for logs.
// It trusts net/url only when the URL it parsed starts as the DSN does and
// every "@" is in the URL's authority, so in its user information, the
// only part Redacted hides: an "@" in the path, query or fragment could
// end a password that url.Parse read as something else. Otherwise (a DSN
// url.Parse reads another way, or cannot read) it hides everything between
// "://" and the last "@", which is where a password would be, and
// everything before that "@" when what precedes "://" is not a scheme.
func Redact(dsn string) string {
	if !strings.Contains(dsn, "://") {
		return dsn
	}
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" && strings.HasPrefix(dsn, u.Scheme+"://") {
		rest := dsn[len(u.Scheme)+len("://"):]
		end := strings.IndexAny(rest, "/?#") // the authority ends here
		if end < 0 || !strings.Contains(rest[end:], "@") {
			return u.Redacted()
		}
	}
	// Not a URL: everything before the last "@" may be a password, the
	// scheme too when it is not a scheme's letters.
	i := strings.LastIndex(dsn, "@")
	if i < 0 {
		return dsn
	}
	if scheme, _, ok := strings.Cut(dsn[:i], "://"); ok && validScheme(scheme) {
		return scheme + "://xxxxx@" + dsn[i+1:]
	}
	return "xxxxx@" + dsn[i+1:]
}

// validScheme reports whether s is a URL scheme as RFC 3986 spells one: a
// letter, then letters, digits, "+", "-" or ".".
func validScheme(s string) bool {
	for i, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case i > 0 && ('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// Collections returns the collection store that shares a store's database:
// the same Pebble directory or bolt file, the same Redis. The store may be
// wrapped: it is found with shardcounter.As. It is EINVALID for a store
// that has none.
func Collections(store shardcounter.CounterStore) (shardcounter.CollectionStore, error) {
	if s, ok := shardcounter.As[*bolt.CounterStore](store); ok {
		return s.Collections()
	}
	if s, ok := shardcounter.As[*pebble.CounterStore](store); ok {
		return s.Collections(), nil
	}
	if s, ok := shardcounter.As[*redis.CounterStore](store); ok {
		return s.Collections(), nil
	}
	if s, ok := shardcounter.As[*postgres.CounterStore](store); ok {
		return s.Collections(), nil
	}
	if s, ok := shardcounter.As[*firestore.CounterStore](store); ok {
		return s.Collections(), nil
	}
	if s, ok := shardcounter.As[*datastore.CounterStore](store); ok {
		return s.Collections(), nil
	}
	return nil, shardcounter.Errorf(shardcounter.EINVALID, "store %T has no collections", store)
}
