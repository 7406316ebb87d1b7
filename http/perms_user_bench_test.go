package http_test

import (
	"testing"

	"github.com/shardcounter/shardcounter/acl"
	shttp "github.com/shardcounter/shardcounter/http"
)

// BenchmarkPermsUser is BenchmarkPermsToken with a user of three key
// patterns, the last of which matches the counter, named by its password
// (Bearer, as the token is: the difference is the check, not the
// credentials' decoding; perms_bench_test.go).
func BenchmarkPermsUser(b *testing.B) {
	users, err := acl.Parse([]byte("user svc on >bench-token ~likes:* ~post:*:views ~hot* +@read +@write\n"), shttp.Permissions())
	if err != nil {
		b.Fatal(err)
	}
	benchmarkPerms(b, shttp.ServerOptions{Users: users}, "Bearer bench-token")
}
