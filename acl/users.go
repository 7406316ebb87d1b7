package acl

import (
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"

	"github.com/shardcounter/shardcounter"
)

// MaxPasswordLen bounds a password, as the token file bounds a token: it
// travels in an HTTP header and in AUTH before the RESP port's small
// pre-authentication limits.
const MaxPasswordLen = 1024

// Users is the users of a server, as one users file (with the token
// file's default user) gives them. It is immutable once made, and safe
// for concurrent use.
type Users struct {
	byName map[string]*User
	order  []*User
}

// Lookup returns the user called name, or nil.
func (us *Users) Lookup(name string) *User { return us.byName[name] }

// List returns the users in the file's order.
func (us *Users) List() []*User { return us.order }

// Authenticate returns the user called name when it is on and password
// is one of its passwords (or it is nopass), else nil. The time it takes
// does not depend on how much of a password matched.
func (us *Users) Authenticate(name, password []byte) *User {
	u := us.byName[string(name)]
	if u == nil || !u.on || !u.password(DigestOf(password)) {
		return nil
	}
	return u
}

// ByPassword returns the user whose password it is (passwords are unique
// across users), when that user is on, else nil: Bearer's user. Every
// password of every user is compared, in constant time, so the time
// taken says nothing of which matched. A nopass user has no password to
// find it by.
func (us *Users) ByPassword(password []byte) *User {
	if len(password) == 0 {
		return nil
	}
	d := DigestOf(password)
	found := -1
	for i, u := range us.order {
		for j := range u.passwords {
			if subtle.ConstantTimeCompare(d[:], u.passwords[j][:]) == 1 {
				found = i
			}
		}
	}
	if found < 0 || !us.order[found].on {
		return nil
	}
	return us.order[found]
}

// Default returns the user a client is before it authenticates: the user
// "default" when it is on and nopass, as in Redis, else nil (the client
// must authenticate).
func (us *Users) Default() *User {
	if u := us.byName["default"]; u != nil && u.on && u.nopass {
		return u
	}
	return nil
}

// ByCertificate returns the user a TLS client's verified certificate
// names by its subject's common name, when that user is on, else nil. A
// certificate that was not verified against the server's client CAs
// names nobody.
func (us *Users) ByCertificate(st *tls.ConnectionState) *User {
	if st == nil || len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return nil
	}
	if u := us.byName[st.VerifiedChains[0][0].Subject.CommonName]; u != nil && u.on {
		return u
	}
	return nil
}

// FromTokens returns the users of a token file: one user, default, on,
// with ~* +@all and the tokens as its passwords; nil (no users) for no
// tokens.
func FromTokens(tokens []string) *Users {
	if len(tokens) == 0 {
		return nil
	}
	u := &User{name: "default", on: true, cats: All, patterns: []pattern{newPattern("*", AccessReadWrite)}}
	for _, t := range tokens {
		u.passwords = append(u.passwords, DigestOf([]byte(t)))
	}
	return &Users{byName: map[string]*User{u.name: u}, order: []*User{u}}
}

// WithTokens returns us with the token file's default user added
// (FromTokens). The users file must not have a user default of its own,
// and no token may be another user's password.
func (us *Users) WithTokens(tokens []string) (*Users, error) {
	if len(tokens) == 0 {
		return us, nil
	}
	if us.byName["default"] != nil {
		return nil, shardcounter.Errorf(shardcounter.EINVALID,
			"the users file has a user default, and the token file's tokens are default's passwords: give default in one of them")
	}
	d := FromTokens(tokens).order[0]
	for _, u := range us.order {
		for _, p := range d.passwords {
			if u.password(p) && !u.nopass {
				return nil, shardcounter.Errorf(shardcounter.EINVALID,
					"a token of the token file is user %s's password too: passwords are unique across users, since Bearer names a user by its password", u.name)
			}
		}
	}
	out := &Users{byName: maps.Clone(us.byName), order: append([]*User{d}, us.order...)}
	out.byName[d.name] = d
	return out, nil
}

// Parse reads a users file in the syntax of Redis's ACL file, one user a
// line:
//
//	user NAME [RULE ...]
//
// with the rules on, off, >password, <password, #sha256hex, !sha256hex,
// nopass, resetpass, ~pattern, %R~pattern, %W~pattern, %RW~pattern,
// allkeys, resetkeys, +@category, -@category, allcommands, nocommands,
// +command, -command and reset, applied in order from a user that is off
// with nothing. Blank lines and lines that start with # are skipped.
// commands maps each command and operation name a +command or -command
// rule may give (lower case) to its categories.
//
// What the server cannot honour is refused with the line and the reason,
// rather than dropped: channels (&pattern, allchannels, resetchannels,
// there is no Pub/Sub), selectors ((...)), subcommand rules
// (+command|sub), unknown categories and commands. A user named twice, a
// password two users share and a file with no user are refused too.
func Parse(data []byte, commands map[string]Category) (*Users, error) {
	us := &Users{byName: map[string]*User{}}
	owner := map[Digest]int{} // a password's user, by its index in us.order
	lines := map[string]int{} // a user's line
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if fields[0] != "user" {
			return nil, lineErr(n, "%q: a line is user NAME RULES...", clipRule(fields[0]))
		}
		if len(fields) < 2 {
			return nil, lineErr(n, "no user name: a line is user NAME RULES...")
		}
		name := fields[1]
		if err := checkName(name); err != "" {
			return nil, lineErr(n, "user %q: %s", clipRule(name), err)
		}
		if m, ok := lines[name]; ok {
			return nil, lineErr(n, "user %s is on line %d too: give each user once", name, m)
		}
		lines[name] = n
		u := &User{name: name}
		for _, r := range fields[2:] {
			if err := u.apply(r, commands); err != "" {
				return nil, lineErr(n, "rule %q: %s", clipRule(r), err)
			}
		}
		for _, p := range u.passwords {
			if k, ok := owner[p]; ok {
				other := us.order[k].name
				return nil, lineErr(n, "user %s has a password of user %s (line %d): passwords are unique across users, since Bearer names a user by its password", name, other, lines[other])
			}
		}
		for _, p := range u.passwords {
			owner[p] = len(us.order)
		}
		us.byName[name] = u
		us.order = append(us.order, u)
	}
	if len(us.order) == 0 {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "no users: give one a line, as user NAME on >PASSWORD ~PATTERN +@CATEGORY")
	}
	return us, nil
}

func lineErr(n int, format string, args ...any) error {
	return shardcounter.Errorf(shardcounter.EINVALID, "line %d: %s", n, fmt.Sprintf(format, args...))
}

// clipRule shortens what an error quotes: a rule may be a password.
func clipRule(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// checkName checks a user name: printable ASCII without spaces, as
// Redis's, and short.
func checkName(name string) string {
	if len(name) > 128 {
		return "a user name is at most 128 bytes"
	}
	for i := 0; i < len(name); i++ {
		if name[i] <= ' ' || name[i] > '~' {
			return "a user name is printable ASCII without spaces"
		}
	}
	return ""
}

// apply applies one rule to u, returning why it cannot, or "".
func (u *User) apply(r string, commands map[string]Category) string {
	switch strings.ToLower(r) {
	case "on":
		u.on = true
		return ""
	case "off":
		u.on = false
		return ""
	case "nopass":
		u.nopass, u.passwords = true, nil
		return ""
	case "resetpass":
		u.nopass, u.passwords = false, nil
		return ""
	case "allkeys":
		u.patterns = append(u.patterns, newPattern("*", AccessReadWrite))
		return ""
	case "resetkeys":
		u.patterns = nil
		return ""
	case "allcommands":
		return u.apply("+@all", commands)
	case "nocommands":
		return u.apply("-@all", commands)
	case "reset":
		*u = User{name: u.name}
		return ""
	case "allchannels", "resetchannels":
		return "channels are refused: the server has no Pub/Sub"
	}
	switch {
	case r[0] == '>' || r[0] == '<':
		pw := r[1:]
		if pw == "" {
			return "an empty password: give >PASSWORD, or nopass for none"
		}
		if len(pw) > MaxPasswordLen {
			return fmt.Sprintf("a password of %d bytes: at most %d", len(pw), MaxPasswordLen)
		}
		u.password1(r[0] == '>', DigestOf([]byte(pw)))
	case r[0] == '#' || r[0] == '!':
		b, err := hex.DecodeString(r[1:])
		if err != nil || len(b) != len(Digest{}) {
			return "a hashed password is 64 hex digits, the SHA-256 of the password"
		}
		u.password1(r[0] == '#', Digest(b))
	case r[0] == '~':
		u.patterns = append(u.patterns, newPattern(r[1:], AccessReadWrite))
	case r[0] == '%':
		flags, pat, ok := strings.Cut(r[1:], "~")
		var a Access
		for _, f := range strings.ToUpper(flags) {
			switch f {
			case 'R':
				a |= AccessRead
			case 'W':
				a |= AccessWrite
			default:
				ok = false
			}
		}
		if !ok || a == 0 {
			return "a key pattern with access is %R~PATTERN, %W~PATTERN or %RW~PATTERN"
		}
		u.patterns = append(u.patterns, newPattern(pat, a))
	case r[0] == '&':
		return "channels are refused: the server has no Pub/Sub"
	case r[0] == '(' || r[len(r)-1] == ')':
		return "selectors are refused: give a user's keys and commands on its own line"
	case r[0] == '+' || r[0] == '-':
		return u.command(r[0] == '+', strings.ToLower(r[1:]), commands)
	default:
		return "not a rule: on, off, >password, #sha256, nopass, resetpass, ~pattern, %R~pattern, %W~pattern, allkeys, resetkeys, +@category, -@category, allcommands, nocommands, +command, -command, reset"
	}
	return ""
}

// password1 adds or removes one password.
func (u *User) password1(add bool, d Digest) {
	for i, p := range u.passwords {
		if p == d {
			if !add {
				u.passwords = append(u.passwords[:i:i], u.passwords[i+1:]...)
			}
			return
		}
	}
	if add {
		u.passwords = append(u.passwords, d)
		u.nopass = false
	}
}

// command applies a +/- rule of a category or a command.
func (u *User) command(plus bool, name string, commands map[string]Category) string {
	if c, ok := strings.CutPrefix(name, "@"); ok {
		cat, ok := ParseCategory(c)
		if !ok {
			return "unknown category: the categories are @" + strings.Join(Categories(), ", @")
		}
		if plus {
			u.cats |= cat
		} else {
			u.cats &^= cat
		}
		// The rule is the later word on the commands of its categories.
		for n := range u.commands {
			if commands[n]&cat != 0 {
				delete(u.commands, n)
			}
		}
		return ""
	}
	if strings.Contains(name, "|") {
		return "subcommand rules are refused: allow or refuse the whole command"
	}
	cat, ok := commands[name]
	if !ok {
		return "unknown command: give a command of the RESP port or an operation id of the HTTP API"
	}
	if cat == Connection {
		return "the connection's commands are every user's"
	}
	if u.commands == nil {
		u.commands = map[string]bool{}
	}
	u.commands[name] = plus
	return ""
}
