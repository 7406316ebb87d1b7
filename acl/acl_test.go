package acl_test

import (
	"crypto/sha256"
	"encoding/hex"
	"github.com/shardcounter/shardcounter/internal/glob"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/acl"
)

// commands is a small command table, as the servers' give Parse theirs.
var commands = map[string]acl.Category{
	"get":           acl.Read,
	"incr":          acl.Write,
	"del":           acl.Keyspace | acl.Write,
	"flushdb":       acl.Admin | acl.Keyspace | acl.Write,
	"ping":          acl.Connection,
	"exportstore":   acl.Admin,
	"readcounter":   acl.Read,
	"createcounter": acl.Keyspace | acl.Write,
}

func mustParse(t *testing.T, file string) *acl.Users {
	t.Helper()
	us, err := acl.Parse([]byte(file), commands)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return us
}

func TestParse(t *testing.T) {
	sum := sha256.Sum256([]byte("hashed-pw"))
	us := mustParse(t, `
# a comment, and blank lines

user dash on >dash-pw %R~* +@read
user views on >views-pw ~views:* +@write +@read -incr
user ops on #`+hex.EncodeToString(sum[:])+` allkeys +@all -@keyspace +del
user gone off >gone-pw ~* +@all
user none on >none-pw
`)
	if got := len(us.List()); got != 5 {
		t.Fatalf("%d users, want 5", got)
	}
	dash := us.Authenticate([]byte("dash"), []byte("dash-pw"))
	if dash == nil || dash.Name() != "dash" {
		t.Fatalf("Authenticate(dash) = %v", dash)
	}
	for _, c := range []struct {
		user, pw string
		ok       bool
	}{
		{"dash", "views-pw", false}, {"views", "views-pw", true}, {"ops", "hashed-pw", true},
		{"gone", "gone-pw", false}, {"nobody", "dash-pw", false}, {"dash", "", false},
	} {
		if got := us.Authenticate([]byte(c.user), []byte(c.pw)) != nil; got != c.ok {
			t.Errorf("Authenticate(%s, %s) = %v, want %v", c.user, c.pw, got, c.ok)
		}
	}
	if u := us.ByPassword([]byte("views-pw")); u == nil || u.Name() != "views" {
		t.Errorf("ByPassword(views-pw) = %v, want views", u)
	}
	if u := us.ByPassword([]byte("gone-pw")); u != nil {
		t.Errorf("ByPassword of a user that is off = %v", u.Name())
	}
	views, ops, none := us.Lookup("views"), us.Lookup("ops"), us.Lookup("none")
	for _, c := range []struct {
		u    *acl.User
		cmd  string
		cats acl.Category
		want bool
	}{
		{dash, "get", acl.Read, true}, {dash, "incr", acl.Write, false}, {dash, "ping", acl.Connection, true},
		{views, "incr", acl.Write, false}, // -incr
		{views, "get", acl.Read, true},
		{views, "del", acl.Keyspace | acl.Write, false}, // needs both categories
		{ops, "del", acl.Keyspace | acl.Write, true},    // +del after -@keyspace
		{ops, "createcounter", acl.Keyspace | acl.Write, false},
		{ops, "exportstore", acl.Admin, true},
		{none, "get", acl.Read, false}, {none, "ping", acl.Connection, true},
	} {
		if got := c.u.Allowed(c.cmd, c.cats); got != c.want {
			t.Errorf("%s: Allowed(%s) = %v, want %v", c.u.Name(), c.cmd, got, c.want)
		}
	}
	for _, c := range []struct {
		u    *acl.User
		key  string
		a    acl.Access
		want bool
	}{
		{dash, "anything", acl.AccessRead, true}, {dash, "anything", acl.AccessWrite, false},
		{views, "views:1", acl.AccessReadWrite, true}, {views, "likes:1", acl.AccessRead, false},
		{none, "views:1", acl.AccessRead, false},
	} {
		if got := c.u.Key(c.key, c.a); got != c.want {
			t.Errorf("%s: Key(%s, %d) = %v, want %v", c.u.Name(), c.key, c.a, got, c.want)
		}
	}
	for _, c := range []struct {
		u      *acl.User
		prefix string
		want   bool
	}{
		{views, "views:", true}, {views, "views:2024:", true}, {views, "view", false}, {views, "", false},
		{dash, "", true}, {none, "views:", false},
	} {
		if got := c.u.Prefix(c.prefix, acl.AccessRead); got != c.want {
			t.Errorf("%s: Prefix(%q) = %v, want %v", c.u.Name(), c.prefix, got, c.want)
		}
	}
	// A pattern that is not P* covers no prefix, though it matches keys.
	q := mustParse(t, "user q on >q ~v?ews:* ~a[bc]*\n").Lookup("q")
	if q.Prefix("views:", acl.AccessRead) || q.Prefix("ab", acl.AccessRead) || !q.Key("vjews:1", acl.AccessRead) {
		t.Error("q: a pattern with ? or [] covered a prefix, or did not match")
	}
}

func TestParseRefusals(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"", "no users"},
		{"\n# only a comment\n", "no users"},
		{"usr a on", "line 1: \"usr\""},
		{"user", "line 1: no user name"},
		{"user a on\nuser a off", "line 2: user a is on line 1 too"},
		{"user a on &chan", "line 1: rule \"&chan\": channels are refused"},
		{"user a on allchannels", "channels are refused"},
		{"user a on (~x +get)", "selectors are refused"},
		{"user a on +@string", "unknown category"},
		{"user a on +flushall", "unknown command"},
		{"user a on +get|x", "subcommand rules are refused"},
		{"user a on +ping", "every user's"},
		{"user a on >", "empty password"},
		{"user a on #abc", "64 hex digits"},
		{"user a on %X~a", "%R~PATTERN"},
		{"user a on banana", "not a rule"},
		{"user a on >same\n\nuser b on >other >same", "line 3: user b has a password of user a (line 1)"},
		{"user a\xff on", "printable ASCII"},
		{"user a on >" + strings.Repeat("x", 2000), "at most 1024"},
	} {
		_, err := acl.Parse([]byte(c.file), commands)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%.40q) = %v, want an error with %q", c.file, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "same") {
			t.Errorf("Parse(%.40q): the error quotes a password: %v", c.file, err)
		}
	}
}

func TestTokensAndSet(t *testing.T) {
	var s acl.Set
	if s.Required() || s.Unauthenticated() != acl.Everyone {
		t.Fatal("an empty Set requires authentication")
	}
	s.Replace(acl.FromTokens([]string{"t1", "t2"}))
	if !s.Required() || s.Unauthenticated() != nil {
		t.Fatal("tokens do not require authentication")
	}
	u := s.Authenticate([]byte("default"), []byte("t2"))
	if u == nil || !u.Allowed("flushdb", acl.Admin|acl.Keyspace|acl.Write) || !u.Prefix("", acl.AccessReadWrite) {
		t.Fatalf("a token's user is not ~* +@all: %v", u)
	}
	d := acl.DigestOf([]byte("t2"))
	gen := s.Generation()
	users := mustParse(t, "user dash on >d %R~* +@read\n")
	both, err := users.WithTokens([]string{"t2"})
	if err != nil {
		t.Fatal(err)
	}
	s.Replace(both)
	if s.Generation() == gen {
		t.Error("Generation did not move")
	}
	if now := s.Current(u, &d); now == nil || now.Name() != "default" {
		t.Errorf("Current(default, t2) after a reload that keeps t2 = %v", now)
	}
	three, err := users.WithTokens([]string{"t3"})
	if err != nil {
		t.Fatal(err)
	}
	s.Replace(three)
	if now := s.Current(u, &d); now != nil {
		t.Error("Current(default, t2) after t2 was removed is not nil")
	}
	if _, err := mustParse(t, "user default on >x ~* +@all\n").WithTokens([]string{"t"}); err == nil {
		t.Error("a users file with default and a token file were taken together")
	}
	if _, err := users.WithTokens([]string{"d"}); err == nil {
		t.Error("a token that is a user's password was taken")
	}
	open := mustParse(t, "user default on nopass %R~* +@read\n")
	s.Replace(open)
	if s.Required() || s.Unauthenticated() == nil || s.Unauthenticated().Allowed("incr", acl.Write) {
		t.Error("default on nopass: authentication required, or default may write")
	}
}

// FuzzParse checks that Parse never panics, and that a file it takes
// gives users whose every rule it can honour: each user found by its name,
// and by each of the passwords a >rule gave it when it is on.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"user a on >p ~* +@all\n",
		"user a on >p %R~views:* %W~v[ab]* +@read -@write +incr -get resetkeys allkeys\nuser b off nopass\n",
		"user a on #" + strings.Repeat("ab", 32) + " reset on nocommands allcommands\n",
		"user a on &x\n", "user a (~x)\n", "# c\n\nuser x on resetpass >a <a\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, file string) {
		us, err := acl.Parse([]byte(file), commands)
		if err != nil {
			if msg := shardcounter.ErrorMessage(err); !strings.HasPrefix(msg, "line ") && !strings.HasPrefix(msg, "no users") {
				t.Fatalf("an error that names no line: %v", err)
			}
			return
		}
		for _, u := range us.List() {
			if us.Lookup(u.Name()) != u {
				t.Fatalf("user %q not found by its name", u.Name())
			}
			u.Allowed("get", acl.Read)
			u.Key("k", acl.AccessRead)
			u.Prefix("k", acl.AccessWrite)
		}
		for _, line := range strings.Split(file, "\n") {
			fs := strings.Fields(line)
			if len(fs) < 3 || fs[0] != "user" {
				continue
			}
			u := us.Lookup(fs[1])
			last := fs[len(fs)-1]
			if u != nil && u.On() && strings.HasPrefix(last, ">") && len(last) > 1 {
				if got := us.Authenticate([]byte(fs[1]), []byte(last[1:])); got != u {
					t.Fatalf("user %s, on, does not authenticate with the password of its last rule", fs[1])
				}
				if got := us.ByPassword([]byte(last[1:])); got != u {
					t.Fatalf("user %s is not found by the password of its last rule", fs[1])
				}
			}
		}
	})
}

// TestKeyAgreesWithGlob checks that Key's shortcuts (the literal prefix,
// P*) decide as the glob itself does, for patterns of every shape.
func TestKeyAgreesWithGlob(t *testing.T) {
	patterns := []string{"*", "views:*", "post:*:views", "hot*", "a?c", "[ab]*", "x\\*y", "exact", "v*s:*", "*:1", ""}
	keys := []string{"", "views:1", "views:", "view", "post:1:views", "post:1:likes", "hot", "hotter", "abc", "a*c", "bx", "x*y", "xy", "exact", "exact1", "vs:", "likes:1"}
	for _, p := range patterns {
		users, err := acl.Parse([]byte("user u on nopass ~"+p+" +@all\n"), nil)
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		u := users.Lookup("u")
		g := glob.Compile(p)
		for _, k := range keys {
			if got, want := u.Key(k, acl.AccessRead), g.Match(k); got != want {
				t.Errorf("pattern %q, key %q: Key %v, glob %v", p, k, got, want)
			}
		}
	}
}
