// Package acl holds the server's users and what each may do: the
// categories of operations it may run and the key patterns of the
// counters it may touch, read from a users file in the syntax of Redis's
// ACL file (Parse), or made from the token file's tokens (FromTokens).
// Both front ends, HTTP and RESP, decide with the same User: Allowed for
// an operation's categories, Key and Prefix for the keys it touches.
//
// The categories are SPEC's: @read, @write, @keyspace (create, delete,
// reshard, expire, reset), @admin (the whole store's: export, import,
// backup, verify, ranking definitions, flush) and @all. An operation in
// several categories needs all of them: DEL is @keyspace and @write, so
// a user with +@write but not +@keyspace may write but not delete. A
// +command or -command rule overrides the categories for one command (a
// RESP command's name, or an HTTP route's operation id), until a later
// category rule that names one of its categories.
package acl

import (
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"github.com/shardcounter/shardcounter/internal/glob"
)

// Category is a set of permission categories, one bit each.
type Category uint8

const (
	// Read reads counters, members, documents, a ranking's entries.
	Read Category = 1 << iota
	// Write changes a value: writes, members, documents.
	Write
	// Keyspace makes, removes or reshapes keys: create, delete, reshard,
	// expire, reset.
	Keyspace
	// Admin is the whole store's: export, import, backup, verify,
	// ranking definitions, flush.
	Admin
	// Connection is the category of the commands that touch no data
	// (PING, AUTH, MULTI, ACL WHOAMI ...): every user may run them, so no
	// rule grants or takes it.
	Connection
)

// All is every category a rule can grant: +@all.
const All = Read | Write | Keyspace | Admin

var categoryNames = []struct {
	cat  Category
	name string
}{{Read, "read"}, {Write, "write"}, {Keyspace, "keyspace"}, {Admin, "admin"}, {Connection, "connection"}}

// Categories returns the names of the categories a rule can name, as ACL
// CAT lists them: "all" and each of All's.
func Categories() []string {
	names := []string{"all"}
	for _, n := range categoryNames {
		if All&n.cat != 0 {
			names = append(names, n.name)
		}
	}
	return names
}

// ParseCategory returns the category of a name without its @ ("write"),
// in any case.
func ParseCategory(name string) (Category, bool) {
	name = strings.ToLower(name)
	if name == "all" {
		return All, true
	}
	for _, n := range categoryNames {
		if n.name == name && All&n.cat != 0 {
			return n.cat, true
		}
	}
	return 0, false
}

// String returns the categories as an ACL names them: "@write @keyspace".
func (c Category) String() string {
	var names []string
	for _, n := range categoryNames {
		if c&n.cat != 0 {
			names = append(names, "@"+n.name)
		}
	}
	return strings.Join(names, " ")
}

// Access is what an operation does with a key: reads it, writes it, or
// both. A key pattern grants one or both (~ both, %R~ reads, %W~ writes).
type Access uint8

const (
	AccessRead Access = 1 << iota
	AccessWrite
	AccessReadWrite = AccessRead | AccessWrite
)

// AccessOf returns the access an operation of categories c needs to its
// keys: writing for one in @write, reading otherwise.
func AccessOf(c Category) Access {
	if c&Write != 0 {
		return AccessWrite
	}
	return AccessRead
}

// Digest is the SHA-256 of a password: passwords are kept and compared
// only as digests (so #hex rules and >password rules mean the same), all
// of one length, in constant time.
type Digest [sha256.Size]byte

// DigestOf returns the digest of a password.
func DigestOf(password []byte) Digest { return sha256.Sum256(password) }

// User is one user: whether it is on, its passwords, its categories and
// command rules, and its key patterns. A User is immutable once made, and
// safe for concurrent use.
type User struct {
	name      string
	on        bool
	nopass    bool
	passwords []Digest
	cats      Category
	commands  map[string]bool // +command (true) and -command (false), by lower-case name
	patterns  []pattern
}

// pattern is one key pattern and the access it grants.
type pattern struct {
	src    string
	access Access
	all    bool // "*": every key, the common case, without a match
	g      glob.Glob
	lit    string // the literal the pattern starts with
	litAll bool   // the pattern is lit followed by one *: it covers every key with a prefix that starts with lit
}

func newPattern(src string, a Access) pattern {
	g := glob.Compile(src)
	lit, star := g.LiteralStar()
	return pattern{src: src, access: a, all: star && lit == "", g: g, lit: lit, litAll: star}
}

// Name returns the user's name.
func (u *User) Name() string { return u.name }

// On reports whether the user may authenticate.
func (u *User) On() bool { return u.on }

// Allowed reports whether the user may run the operation called name (a
// lower-case RESP command or HTTP operation id) of categories cats: a
// +name or -name rule decides, else the user must have every category of
// cats. The commands of Connection alone are every user's.
func (u *User) Allowed(name string, cats Category) bool {
	if cats == Connection {
		return true
	}
	if u.commands != nil {
		if v, ok := u.commands[name]; ok {
			return v
		}
	}
	return cats != 0 && cats&^u.cats == 0
}

// Key reports whether one of the user's patterns matches key with the
// access a. Every key a pattern matches starts with its literal prefix,
// so a key without it skips the glob, and a pattern P* matches every key
// with P without it: the check of a write stays a few comparisons a
// pattern (scripts/bench-perms.sh).
func (u *User) Key(key string, a Access) bool {
	for i := range u.patterns {
		p := &u.patterns[i]
		if p.access&a != a || !strings.HasPrefix(key, p.lit) {
			continue
		}
		if p.litAll || p.g.Match(key) {
			return true
		}
	}
	return false
}

// Prefix reports whether the user may touch every key that starts with
// prefix, with the access a: whether one of its patterns is P* (or *)
// with P a prefix of prefix. A listing, an export or a ranking of a
// prefix is allowed only so, since it names keys the user cannot know in
// advance.
func (u *User) Prefix(prefix string, a Access) bool {
	for i := range u.patterns {
		p := &u.patterns[i]
		if p.access&a == a && p.litAll && strings.HasPrefix(prefix, p.lit) {
			return true
		}
	}
	return false
}

// Patterns returns the user's key patterns as the file gives them: "~*",
// "%R~views:*".
func (u *User) Patterns() []string {
	out := make([]string, len(u.patterns))
	for i, p := range u.patterns {
		switch p.access {
		case AccessRead:
			out[i] = "%R~" + p.src
		case AccessWrite:
			out[i] = "%W~" + p.src
		default:
			out[i] = "~" + p.src
		}
	}
	return out
}

// password reports, in constant time in the user's passwords, whether d
// is one of them (or the user takes any, nopass).
func (u *User) password(d Digest) bool {
	match := 0
	for i := range u.passwords {
		match |= subtle.ConstantTimeCompare(d[:], u.passwords[i][:])
	}
	return match == 1 || u.nopass
}

// Everyone is the user every client is when the server has no users and
// no tokens: "default", on, every category, every key.
var Everyone = &User{name: "default", on: true, nopass: true, cats: All, patterns: []pattern{newPattern("*", AccessReadWrite)}}
