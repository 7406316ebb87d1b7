package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/acl"
	"github.com/shardcounter/shardcounter/resp/server"
)

// matrixUsers are the users of the permission matrix: read-only,
// write-on-a-prefix, keyspace, admin and no rights.
const matrixUsers = `
user reader on >reader-pw %R~* +@read
user writer on >writer-pw ~views:* +@read +@write
user keeper on >keeper-pw ~* +@read +@write +@keyspace
user admin on >admin-pw ~* +@all
user nobody on >nobody-pw
`

// sample is one invocation of a command for the matrix: args with K for
// the key (an argument that starts with K), and where its keys are.
type sample struct {
	args   string
	keys   string // "key": K; "prefix": every key (a listing without MATCH); "": none
	noExec bool   // a command that changes the connection: its category alone is checked
}

// samples holds an invocation of every command. A command added to the
// table without one (or without a category) fails TestPermissionMatrix.
var samples = map[string]sample{
	"ping": {args: "PING"}, "echo": {args: "ECHO x"}, "hello": {noExec: true}, "auth": {noExec: true},
	"select": {args: "SELECT 0"}, "quit": {noExec: true}, "reset": {noExec: true}, "client": {args: "CLIENT ID"},
	"command": {args: "COMMAND COUNT"}, "function": {args: "FUNCTION LIST"}, "acl": {args: "ACL WHOAMI"},
	"multi": {noExec: true}, "exec": {noExec: true}, "discard": {noExec: true}, "watch": {args: "WATCH K", keys: ""}, "unwatch": {args: "UNWATCH"},
	"config": {args: "CONFIG GET maxclients"}, "info": {args: "INFO server"},
	"dbsize": {args: "DBSIZE", keys: "prefix"}, "flushdb": {args: "FLUSHDB", keys: "prefix"}, "flushall": {args: "FLUSHALL", keys: "prefix"},
	"del": {args: "DEL K", keys: "key"}, "exists": {args: "EXISTS K", keys: "key"}, "type": {args: "TYPE K", keys: "key"},
	"expire": {args: "EXPIRE K 100", keys: "key"}, "pexpire": {args: "PEXPIRE K 100000", keys: "key"},
	"expireat": {args: "EXPIREAT K 9999999999", keys: "key"}, "pexpireat": {args: "PEXPIREAT K 9999999999000", keys: "key"},
	"persist": {args: "PERSIST K", keys: "key"}, "ttl": {args: "TTL K", keys: "key"}, "pttl": {args: "PTTL K", keys: "key"},
	"expiretime": {args: "EXPIRETIME K", keys: "key"}, "pexpiretime": {args: "PEXPIRETIME K", keys: "key"},
	"scan": {args: "SCAN 0", keys: "prefix"},
	"incr": {args: "INCR K", keys: "key"}, "decr": {args: "DECR K", keys: "key"}, "incrby": {args: "INCRBY K 5", keys: "key"}, "increx": {args: "INCREX K BYINT 2 UBOUND 100", keys: "key"},
	"decrby": {args: "DECRBY K 5", keys: "key"}, "get": {args: "GET K", keys: "key"}, "mget": {args: "MGET views:other K", keys: "key"},
	"set": {args: "SET K 7", keys: "key"}, "getset": {args: "GETSET K 7", keys: "key"}, "getdel": {args: "GETDEL K", keys: "key"},
	"sadd": {args: "SADD Kset m", keys: "key"}, "srem": {args: "SREM Kset m", keys: "key"}, "sismember": {args: "SISMEMBER Kset m", keys: "key"},
	"scard": {args: "SCARD Kset", keys: "key"}, "smembers": {args: "SMEMBERS Kset", keys: "key"}, "sscan": {args: "SSCAN Kset 0", keys: "key"},
	"pfadd": {args: "PFADD Khll m", keys: "key"}, "pfcount": {args: "PFCOUNT Khll", keys: "key"}, "pfmerge": {args: "PFMERGE Khll2 Khll", keys: "key"},
	"hincrby": {args: "HINCRBY Kh f 1", keys: "key"}, "hget": {args: "HGET Kh f", keys: "key"}, "hmget": {args: "HMGET Kh f", keys: "key"},
	"hgetall": {args: "HGETALL Kh", keys: "key"}, "hkeys": {args: "HKEYS Kh", keys: "key"}, "hvals": {args: "HVALS Kh", keys: "key"},
	"hlen": {args: "HLEN Kh", keys: "key"}, "hexists": {args: "HEXISTS Kh f", keys: "key"}, "hdel": {args: "HDEL Kh f", keys: "key"},
	"sc.create": {args: "SC.CREATE Knew SHARDS 2", keys: "key"}, "sc.incrby": {args: "SC.INCRBY K 1 REQUEST-ID r1", keys: "key"},
	"sc.get": {args: "SC.GET K", keys: "key"}, "sc.reshard": {args: "SC.RESHARD K 4", keys: "key"}, "sc.shards": {args: "SC.SHARDS K", keys: "key"},
	"sc.top": {args: "SC.TOP K", keys: "key"}, "zrevrange": {args: "ZREVRANGE K 0 1", keys: "key"},
	"cl.throttle": {args: "CL.THROTTLE K 4 1 3600", keys: "key"},
}

// TestPermissionMatrix runs every command of the table as each of the
// matrix's users, on a key the writer's pattern covers and on one it
// does not, and checks that it is refused (NOPERM) exactly when the
// table's categories and keys say, and that a refused command changed
// nothing.
func TestPermissionMatrix(t *testing.T) {
	perms := server.Permissions()
	users, err := acl.Parse([]byte(matrixUsers), perms)
	if err != nil {
		t.Fatal(err)
	}
	eng := MustEngine(t)
	_, addr := MustServe(t, eng, server.Options{Users: users})
	ctx := context.Background()
	setup := redis.NewClient(&redis.Options{Addr: addr, Username: "admin", Password: "admin-pw"})
	defer setup.Close()
	for _, k := range []string{"views:1", "likes:1"} {
		for _, cmd := range [][]any{{"SET", k, 3}, {"SADD", k + "set", "m"}, {"PFADD", k + "hll", "m"}, {"HINCRBY", k + "h", "f", 1}} {
			if err := setup.Do(ctx, cmd...).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(perms)) {
		cats := perms[name]
		if cats == 0 {
			t.Errorf("%s: no category", name)
			continue
		}
		sm, ok := samples[name]
		if !ok {
			t.Errorf("%s: no sample invocation in the matrix's table", name)
			continue
		}
		for _, u := range users.List() {
			rights := cats == acl.Connection || u.Allowed(name, cats)
			if sm.noExec {
				if cats != acl.Connection {
					t.Errorf("%s: only the connection's commands may go unexecuted by the matrix", name)
				}
				continue
			}
			for _, key := range []string{"views:1", "likes:1"} {
				access := acl.AccessOf(cats)
				keysOK := true
				switch sm.keys {
				case "key":
					keysOK = u.Key(key, access) && (name != "mget" || u.Key("views:other", access))
					if name == "pfmerge" {
						keysOK = u.Key(key, acl.AccessReadWrite)
					}
				case "prefix":
					keysOK = u.Prefix("", access)
				}
				want := rights && keysOK
				args := strings.Fields(sm.args)
				for i := 1; i < len(args); i++ {
					if rest, ok := strings.CutPrefix(args[i], "K"); ok {
						args[i] = key + rest
					}
				}
				before := snapshot(t, eng)
				err := matrixRun(ctx, addr, u.Name(), args)
				refused := err != nil && strings.HasPrefix(err.Error(), "NOPERM")
				if refused == want {
					t.Errorf("%s as %s on %s: %v, want refused %v", strings.Join(args, " "), u.Name(), key, err, !want)
				}
				if refused {
					if after := snapshot(t, eng); after != before {
						t.Errorf("%s as %s: refused, but the store changed:\n%s\nto\n%s", strings.Join(args, " "), u.Name(), before, after)
					}
				}
			}
		}
	}
}

// matrixRun runs one command on a connection of its own as user.
func matrixRun(ctx context.Context, addr, user string, args []string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: user + "-pw", PoolSize: 1, MaxRetries: -1})
	defer c.Close()
	a := make([]any, len(args))
	for i, s := range args {
		a[i] = s
	}
	err := c.Do(ctx, a...).Err()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}

// snapshot is the store's counters and values, as text.
func snapshot(t *testing.T, svc shardcounter.CounterService) string {
	t.Helper()
	ctx := context.Background()
	l, err := svc.ListCounters(ctx, shardcounter.ListOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range l.Counters {
		r, err := svc.ReadCounter(ctx, c.ID, shardcounter.Strong)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%d/%d ", c.ID, r.Value, r.Shards)
	}
	return b.String()
}

// TestNoPerm checks the words of refusals, a transaction refused whole,
// ACL WHOAMI and CAT, and rights that shrink on SetUsers at the next
// command.
func TestNoPerm(t *testing.T) {
	perms := server.Permissions()
	users, err := acl.Parse([]byte(matrixUsers), perms)
	if err != nil {
		t.Fatal(err)
	}
	eng := MustEngine(t)
	s, addr := MustServe(t, eng, server.Options{Users: users})
	c := MustRaw(t, addr)
	c.send("AUTH writer writer-pw\r\nACL WHOAMI\r\nINCR views:1\r\nINCR likes:1\r\nDEL views:1\r\nMGET views:1 likes:1\r\n")
	c.expect("+OK\r\n", "$6\r\nwriter\r\n", ":1\r\n", "-NOPERM No permissions to access a key\r\n",
		"-NOPERM User writer has no permissions to run the 'del' command\r\n", "-NOPERM No permissions to access a key\r\n")
	// A transaction with one key outside is refused whole.
	c.send("MULTI\r\nINCR views:1\r\nINCR likes:1\r\nEXEC\r\nGET views:1\r\n")
	c.expect("+OK\r\n", "+QUEUED\r\n", "-NOPERM No permissions to access a key\r\n",
		"-EXECABORT Transaction discarded because of previous errors.\r\n", "$1\r\n1\r\n")
	// Queued while allowed, refused at EXEC when the rights shrank.
	c.send("MULTI\r\nINCR views:1\r\n")
	c.expect("+OK\r\n", "+QUEUED\r\n")
	shrunk, err := acl.Parse([]byte(strings.Replace(matrixUsers, "~views:* +@read +@write", "%R~views:* +@read", 1)), perms)
	if err != nil {
		t.Fatal(err)
	}
	s.SetUsers(shrunk)
	c.send("EXEC\r\nGET views:1\r\nINCR views:1\r\nACL CAT\r\n")
	c.expect("-NOPERM User writer has no permissions to run the 'incr' command\r\n", "$1\r\n1\r\n",
		"-NOPERM User writer has no permissions to run the 'incr' command\r\n",
		"*5\r\n", "$3\r\nall\r\n", "$4\r\nread\r\n", "$5\r\nwrite\r\n", "$8\r\nkeyspace\r\n", "$5\r\nadmin\r\n")
	// HELLO AUTH as another user; a user removed is ended.
	h := MustRaw(t, addr)
	h.send("HELLO 2 AUTH reader reader-pw\r\nACL WHOAMI\r\n")
	h.skipReply()
	h.expect("$6\r\nreader\r\n")
	s.SetUsers(mustUsers(t, "user writer on >writer-pw ~* +@all\n"))
	h.send("ACL WHOAMI\r\n")
	h.expect("-NOAUTH Authentication required.\r\n")
	h.expectClosed()
}

func mustUsers(t *testing.T, file string) *acl.Users {
	t.Helper()
	us, err := acl.Parse([]byte(file), server.Permissions())
	if err != nil {
		t.Fatal(err)
	}
	return us
}

// lockedBuffer is a bytes.Buffer safe for the server's concurrent logging.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestAuditFailedAuth checks that a failed AUTH, with and without a user
// name, and a failed HELLO ... AUTH each leave an audit line with the
// user name tried and the client's address, never the password.
func TestAuditFailedAuth(t *testing.T) {
	users, err := acl.Parse([]byte(matrixUsers), server.Permissions())
	if err != nil {
		t.Fatal(err)
	}
	audit := &lockedBuffer{}
	_, addr := MustServe(t, MustEngine(t), server.Options{Users: users,
		Audit: &acl.Audit{Logger: slog.New(slog.NewJSONHandler(audit, nil))}})
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	for _, tc := range []struct {
		args []any
		user string
	}{
		{[]any{"AUTH", "writer", "secret-1"}, "writer"},
		{[]any{"AUTH", "ghost", "secret-2"}, "ghost"},
		{[]any{"AUTH", "secret-3"}, "default"},
		{[]any{"HELLO", "3", "AUTH", "reader", "secret-4"}, "reader"},
	} {
		before := len(audit.String())
		err := c.Do(ctx, tc.args...).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
			t.Errorf("%v: %v, want WRONGPASS", tc.args, err)
		}
		line := audit.String()[before:]
		for _, want := range []string{`"msg":"audit"`, `"proto":"resp"`, `"op":"auth"`, `"user":"` + tc.user + `"`, `"addr":"127.0.0.1:`, `"outcome":"refused: wrong user name or password`} {
			if !strings.Contains(line, want) {
				t.Errorf("%v: the audit line %q has no %s", tc.args, line, want)
			}
		}
		if strings.Contains(line, "secret") {
			t.Errorf("%v: the audit line %q holds the password", tc.args, line)
		}
	}
	// A right password leaves no line: AUTH is not @admin or @keyspace.
	before := len(audit.String())
	if err := c.Do(ctx, "AUTH", "writer", "writer-pw").Err(); err != nil {
		t.Fatal(err)
	}
	if line := audit.String()[before:]; line != "" {
		t.Errorf("a successful AUTH wrote %q", line)
	}
}

// TestRankingPrefixPermission checks that SC.TOP and ZREVRANGE need a
// pattern P* covering the ranking's prefix, beside its name: a user with
// ~views:* reads a ranking named views:… over views: and gets NOPERM for
// one named views:… over likes:, whose entries are counters outside its
// patterns.
func TestRankingPrefixPermission(t *testing.T) {
	users, err := acl.Parse([]byte(matrixUsers), server.Permissions())
	if err != nil {
		t.Fatal(err)
	}
	eng := MustEngine(t)
	_, addr := MustServe(t, eng, server.Options{Users: users})
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: addr, Username: "admin", Password: "admin-pw"})
	defer admin.Close()
	writer := redis.NewClient(&redis.Options{Addr: addr, Username: "writer", Password: "writer-pw"})
	defer writer.Close()
	for _, k := range []string{"views:1", "likes:1"} {
		if err := admin.Incr(ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for name, prefix := range map[string]string{"views:mine": "views:", "views:likes": "likes:", "views:all": ""} {
		if _, _, err := eng.CreateRanking(ctx, name, shardcounter.RankingOptions{Prefix: prefix}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := writer.ZRevRange(ctx, "views:mine", 0, -1).Result(); err != nil || !slices.Equal(got, []string{"views:1"}) {
		t.Errorf("ZREVRANGE views:mine as writer: %q, %v", got, err)
	}
	if err := writer.Do(ctx, "SC.TOP", "views:mine").Err(); err != nil {
		t.Errorf("SC.TOP views:mine as writer: %v", err)
	}
	for _, name := range []string{"views:likes", "views:all"} {
		if got, err := writer.ZRevRange(ctx, name, 0, -1).Result(); err == nil || err.Error() != "NOPERM No permissions to access a key" {
			t.Errorf("ZREVRANGE %s as writer: %q, %v; want NOPERM", name, got, err)
		}
		if got, err := writer.Do(ctx, "SC.TOP", name).Result(); err == nil || err.Error() != "NOPERM No permissions to access a key" {
			t.Errorf("SC.TOP %s as writer: %v, %v; want NOPERM", name, got, err)
		}
	}
	if got, err := admin.ZRevRange(ctx, "views:likes", 0, -1).Result(); err != nil || !slices.Equal(got, []string{"likes:1"}) {
		t.Errorf("ZREVRANGE views:likes as admin: %q, %v", got, err)
	}
}
