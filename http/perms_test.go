package http_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/acl"
	shttp "github.com/shardcounter/shardcounter/http"
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

// routeSamples gives each route of the table a query and a body, {K}
// standing for a key and {P} for a prefix of it. A route added to the
// table without one fails TestPermissionMatrix.
var routeSamples = map[string]struct{ query, body string }{
	"listCounters": {query: "?prefix={P}"}, "createCounter": {body: `{"shards":2}`}, "readCounter": {},
	"reshardCounter": {body: `{"shards":4}`}, "deleteCounter": {}, "incrementCounter": {}, "decrementCounter": {},
	"readSeries": {}, "readShards": {}, "getTTL": {}, "setTTL": {body: `{"ttl":"1h"}`}, "persistCounter": {},
	"resetCounter": {body: `{"value":3}`}, "watchCounter": {}, "listMembers": {}, "isMember": {}, "addMember": {}, "removeMember": {},
	"writeBatch":   {body: `{"writes":[{"counter":"views:2","delta":1},{"counter":"{K}","delta":1}]}`},
	"readBatch":    {body: `{"counters":["views:2","{K}"]}`},
	"listRankings": {}, "createRanking": {body: `{"prefix":"{P}"}`}, "readRanking": {}, "deleteRanking": {},
	"createCollection": {body: `{"shards":2}`}, "getCollection": {}, "reshardCollection": {body: `{"shards":4}`},
	"deleteCollection": {}, "putDocuments": {body: `{"documents":[{"timestamp":"2020-01-01T00:00:00Z"}]}`},
	"getDocument": {}, "deleteDocument": {}, "queryDocuments": {body: `{}`},
	"engineStats": {},
	"listLimits":  {}, "createLimit": {body: `{"kind":"fixed","limit":5,"period":"10s"}`}, "getLimit": {}, "deleteLimit": {},
	"takeLimit": {body: `{"cost":1}`}, "peekLimit": {}, "resetLimitKey": {},
	"exportStore": {query: "?prefix={P}"}, "importStore": {}, "verifyStore": {query: "?prefix={P}"}, "backupStore": {},
}

// TestPermissionMatrix sends every route of the table that needs the
// token as each of the matrix's users, on a key the writer's pattern
// covers and on one it does not, and checks that it is refused (403
// permission_denied) exactly when the route's categories and keys say,
// and that a refused request changed nothing.
func TestPermissionMatrix(t *testing.T) {
	users, err := acl.Parse([]byte(matrixUsers), shttp.Permissions())
	if err != nil {
		t.Fatal(err)
	}
	audit := &syncBuffer{}
	e := MustServe(t, EnvOptions{All: true, Server: shttp.ServerOptions{Users: users,
		Audit: &acl.Audit{Logger: slog.New(slog.NewJSONHandler(audit, nil))}}})
	admin := []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:admin-pw"))}
	for _, k := range []string{"views:1", "likes:1"} {
		e.Do(t, "PUT", path(k), `{"shards":2}`, admin...).MustOK(t, http.StatusCreated, nil)
	}
	for _, rt := range shttp.Routes() {
		if !rt.NeedsToken() {
			continue
		}
		sm, ok := routeSamples[rt.Operation]
		if !ok {
			t.Errorf("%s: no sample in the matrix's table", rt.Operation)
			continue
		}
		if rt.Categories == 0 {
			t.Errorf("%s: no category", rt.Operation)
			continue
		}
		for _, u := range users.List() {
			for _, key := range []string{"views:1", "likes:1"} {
				prefix := strings.TrimSuffix(key, "1")
				fill := strings.NewReplacer("{K}", key, "{P}", prefix)
				p := rt.Pattern
				for _, param := range []string{"id", "name"} {
					p = strings.ReplaceAll(p, "{"+param+"}", shttp.EscapeID(key))
				}
				p = strings.NewReplacer("{member}", "m", "{doc}", "d1", "{key}", "k1").Replace(p) + fill.Replace(sm.query)
				access := acl.AccessOf(rt.Categories)
				want := u.Allowed(strings.ToLower(rt.Operation), rt.Categories)
				for _, k := range rt.Keys {
					switch {
					case k.In == shttp.InStore || k.Kind == shttp.KeyPrefix:
						want = want && u.Prefix(prefix, access) && (k.In != shttp.InStore || u.Prefix("", access))
					default:
						want = want && u.Key(key, access) && (!strings.Contains(sm.body, "views:2") || u.Key("views:2", access))
					}
				}
				before := e.snapshot(t)
				status := matrixDo(t, e.URL, rt.Method, p, fill.Replace(sm.body), u.Name())
				if refused := status == http.StatusForbidden; refused == want {
					t.Errorf("%s %s as %s: %d, want refused %v", rt.Method, p, u.Name(), status, !want)
				}
				if status == http.StatusForbidden {
					if after := e.snapshot(t); after != before {
						t.Errorf("%s %s as %s: refused, but the store changed:\n%s\nto\n%s", rt.Method, p, u.Name(), before, after)
					}
				}
			}
		}
	}
	// The audit trail: refusals and @keyspace operations, never a password.
	log := audit.String()
	for _, want := range []string{`"op":"createCounter"`, `"user":"writer"`, `"outcome":"refused: `, `"keys":["likes:1"]`} {
		if !strings.Contains(log, want) {
			t.Errorf("the audit trail has no %s", want)
		}
	}
	if strings.Contains(log, "-pw") {
		t.Error("the audit trail holds a password")
	}
}

// matrixDo sends one request as user, half the time with Basic
// credentials and half with Bearer, and returns its status. A watch
// stream is cut once its status is in.
func matrixDo(t *testing.T, base, method, p, body, user string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rd *bytes.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+p, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if len(p)%2 == 0 {
		req.SetBasicAuth(user, user+"-pw")
	} else {
		req.Header.Set("Authorization", "Bearer "+user+"-pw")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, p, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusForbidden {
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		if !strings.Contains(b.String(), `"code":"permission_denied"`) {
			t.Errorf("%s %s: 403 without permission_denied: %s", method, p, b.String())
		}
	}
	return resp.StatusCode
}

// TestUsersAuth checks Basic and Bearer, a wrong password, and a watch
// stream that ends when its user loses the right to watch.
func TestUsersAuth(t *testing.T) {
	users, err := acl.Parse([]byte(matrixUsers), shttp.Permissions())
	if err != nil {
		t.Fatal(err)
	}
	e := MustServe(t, EnvOptions{Server: shttp.ServerOptions{Users: users}})
	basic := func(u, p string) []string {
		return []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p))}
	}
	e.Do(t, "PUT", path("views:1"), `{}`, basic("keeper", "keeper-pw")...).MustOK(t, http.StatusCreated, nil)
	e.Do(t, "GET", path("views:1"), "", basic("keeper", "writer-pw")...).MustError(t, http.StatusUnauthorized, shardcounter.EUNAUTHENTICATED)
	e.Do(t, "GET", path("views:1"), "").MustError(t, http.StatusUnauthorized, shardcounter.EUNAUTHENTICATED)
	e.Do(t, "GET", path("views:1"), "", "Authorization", "Bearer reader-pw").MustOK(t, http.StatusOK, nil)
	e.Do(t, "POST", path("views:1")+"/increment", "", "Authorization", "Bearer reader-pw").MustError(t, http.StatusForbidden, shardcounter.EPERMISSION)

	// A watch stream of the writer ends when the writer loses @read.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.URL+path("views:1")+"/watch", nil)
	req.Header.Set("Authorization", "Bearer writer-pw")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %v %v", resp, err)
	}
	defer resp.Body.Close()
	less, err := acl.Parse([]byte(strings.Replace(matrixUsers, "~views:* +@read +@write", "~views:* +@write", 1)), shttp.Permissions())
	if err != nil {
		t.Fatal(err)
	}
	e.Server.SetUsers(less)
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatalf("the stream did not end cleanly: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the watch stream outlived its user's right to watch")
	}
}

// TestAuditFailedAuth checks that a request refused for its credentials
// leaves an audit line with the user name it tried (Basic) and the
// client's address, and never the password or token it sent.
func TestAuditFailedAuth(t *testing.T) {
	users, err := acl.Parse([]byte(matrixUsers), shttp.Permissions())
	if err != nil {
		t.Fatal(err)
	}
	audit := &syncBuffer{}
	e := MustServe(t, EnvOptions{Server: shttp.ServerOptions{Users: users,
		Audit: &acl.Audit{Logger: slog.New(slog.NewJSONHandler(audit, nil))}}})
	for _, c := range []struct{ authz, user, outcome string }{
		{"Basic " + base64.StdEncoding.EncodeToString([]byte("writer:secret-wrong")), "writer", "wrong user name or password"},
		{"Basic " + base64.StdEncoding.EncodeToString([]byte("ghost:secret-ghost")), "ghost", "wrong user name or password"},
		{"Bearer secret-bearer", "", "a bearer token that is no user's password"},
		{"", "", "no credentials"},
	} {
		before := len(audit.String())
		req, err := http.NewRequest(http.MethodPost, e.URL+"/v1/counters/views:1/increment", nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.authz != "" {
			req.Header.Set("Authorization", c.authz)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%q: status %d, want 401", c.authz, resp.StatusCode)
		}
		line := audit.String()[before:]
		for _, want := range []string{`"msg":"audit"`, `"proto":"http"`, `"op":"auth"`, `"user":"` + c.user + `"`, `"addr":"127.0.0.1:`, c.outcome} {
			if !strings.Contains(line, want) {
				t.Errorf("%q: the audit line %q has no %s", c.authz, line, want)
			}
		}
		if strings.Contains(line, "secret") {
			t.Errorf("%q: the audit line %q holds the password", c.authz, line)
		}
	}
}

// TestRankingPrefixPermission checks that reading a ranking needs a
// pattern P* covering its definition's prefix, beside its name: a user
// with ~views:* reads a ranking named views:… over views: and is refused
// one named views:… over likes:, whose entries are counters outside its
// patterns.
func TestRankingPrefixPermission(t *testing.T) {
	users, err := acl.Parse([]byte(matrixUsers), shttp.Permissions())
	if err != nil {
		t.Fatal(err)
	}
	e := MustServe(t, EnvOptions{Server: shttp.ServerOptions{Users: users}})
	as := func(user string) []string {
		return []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+user+"-pw"))}
	}
	e.Do(t, "POST", path("views:1")+"/increment", `{"by":3}`, as("admin")...).MustOK(t, http.StatusOK, nil)
	e.Do(t, "POST", path("likes:1")+"/increment", `{"by":5}`, as("admin")...).MustOK(t, http.StatusOK, nil)
	e.Do(t, "PUT", "/v1/rankings/views:mine", `{"prefix":"views:"}`, as("admin")...).MustOK(t, http.StatusCreated, nil)
	e.Do(t, "PUT", "/v1/rankings/views:likes", `{"prefix":"likes:"}`, as("admin")...).MustOK(t, http.StatusCreated, nil)
	e.Do(t, "PUT", "/v1/rankings/views:all", `{}`, as("admin")...).MustOK(t, http.StatusCreated, nil)

	var top shardcounter.TopList
	e.Do(t, "GET", "/v1/rankings/views:mine", "", as("writer")...).MustOK(t, http.StatusOK, &top)
	if len(top.Entries) != 1 || top.Entries[0].ID != "views:1" {
		t.Errorf("views:mine as writer: %+v", top.Entries)
	}
	for _, name := range []string{"views:likes", "views:all"} {
		msg := e.Do(t, "GET", "/v1/rankings/"+name, "", as("writer")...).MustError(t, http.StatusForbidden, shardcounter.EPERMISSION)
		if strings.Contains(msg, "likes:1") {
			t.Errorf("%s: the refusal names a counter of the ranking: %s", name, msg)
		}
	}
	// A user whose patterns cover the prefix reads it; so does the
	// read-only user of every key.
	e.Do(t, "GET", "/v1/rankings/views:likes", "", as("reader")...).MustOK(t, http.StatusOK, &top)
	if len(top.Entries) != 1 || top.Entries[0].ID != "likes:1" {
		t.Errorf("views:likes as reader: %+v", top.Entries)
	}
}
