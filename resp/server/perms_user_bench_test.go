package server_test

import (
	"testing"

	"github.com/shardcounter/shardcounter/acl"
	"github.com/shardcounter/shardcounter/resp/server"
)

// BenchmarkPermsUser is BenchmarkPermsToken as a user of three key
// patterns, the last of which matches the counter (perms_bench_test.go).
func BenchmarkPermsUser(b *testing.B) {
	users, err := acl.Parse([]byte("user svc on >bench-token ~likes:* ~post:*:views ~hot* +@read +@write\n"), server.Permissions())
	if err != nil {
		b.Fatal(err)
	}
	benchmarkPerms(b, server.Options{Users: users}, []byte("*3\r\n$4\r\nAUTH\r\n$3\r\nsvc\r\n$11\r\nbench-token\r\n"))
}
