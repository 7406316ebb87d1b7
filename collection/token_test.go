package collection

import (
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

func TestTokenRoundTrip(t *testing.T) {
	for _, want := range []pageToken{
		{order: shardcounter.Desc, shards: 3, fingerprint: 42, last: shardcounter.Position{Time: time.Date(2019, 1, 1, 13, 45, 23, 10000, time.UTC), ID: "AAA"}},
		{order: shardcounter.Asc, shards: shardcounter.MaxShards, fingerprint: 1<<64 - 1, last: shardcounter.Position{Time: shardcounter.MinTimestamp, ID: strings.Repeat("é", 128)}},
		{order: shardcounter.Desc, shards: 1, last: shardcounter.Position{Time: shardcounter.MaxTimestamp, ID: "x"}},
	} {
		got, err := decodeToken(encodeToken(want))
		if err != nil {
			t.Fatalf("decodeToken(encodeToken(%+v)): %v", want, err)
		}
		if got.order != want.order || got.shards != want.shards || got.fingerprint != want.fingerprint || !got.last.Time.Equal(want.last.Time) || got.last.ID != want.last.ID {
			t.Fatalf("round trip = %+v, want %+v", got, want)
		}
	}
}

// FuzzDecodeToken checks that the decoder never panics, refuses with
// invalid_argument, and accepts only canonical encodings of tokens.
func FuzzDecodeToken(f *testing.F) {
	f.Add(encodeToken(pageToken{order: shardcounter.Desc, shards: 3, fingerprint: 7, last: shardcounter.Position{Time: time.Unix(1546350323, 10000000), ID: "doc"}}))
	f.Add(encodeToken(pageToken{order: shardcounter.Asc, shards: 1024, last: shardcounter.Position{Time: time.Unix(0, 0), ID: "a/b c"}}))
	f.Add("")
	f.Add("AQ")
	f.Add("!!!!")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := decodeToken(s)
		if err != nil {
			if shardcounter.ErrorCode(err) != shardcounter.EINVALID {
				t.Fatalf("decodeToken(%q) = %v, want invalid_argument", s, err)
			}
			return
		}
		if again := encodeToken(tok); again != s {
			t.Fatalf("decodeToken accepted %q, which encodes back as %q", s, again)
		}
	})
}
