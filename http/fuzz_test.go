package http_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// mustInvalid fails unless err is a *shardcounter.Error with one of the
// codes, and a message that says something.
func mustInvalid(t *testing.T, err error, codes ...string) {
	t.Helper()
	var e *shardcounter.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *shardcounter.Error", err, err)
	}
	for _, c := range codes {
		if e.Code == c {
			if e.Message == "" {
				t.Fatal("empty message")
			}
			return
		}
	}
	t.Fatalf("code %q, want one of %v", e.Code, codes)
}

// bodySeeds are bodies good and bad for every decoder.
var bodySeeds = []string{
	``, `{}`, ` {} `, `null`, `[]`, `{"shards":16}`, `{"shards":0}`, `{"shards":1025}`, `{"shards":1.5}`,
	`{"followers_count":1000,"visibility":"public"}`, `{"visibility":"protected"}`, `{"by":5}`,
	`{"by":-1}`, `{"by":9223372036854775807}`, `{"by":5,"request_id":"r"}`, `{"request_id":"\u0000"}`,
	`{"writes":[{"counter":"a","delta":1},{"counter":"b","delta":-2,"request_id":"x"}]}`,
	`{"writes":[{"counter":"a","delta":0}]}`, `{"writes":[]}`, `{"x":1}`, `{}{}`, `{"by":1} x`,
	"{\"by\":1,\"request_id\":\"\xff\"}", `{"by":`, `{"shards":1e3}`, `{"writes":[null]}`,
	`{"kind":"distinct"}`, `{"kind":"set"}`, `{"min":0,"max":10}`, `{"min":1}`, `{"max":-1}`,
	`{"kind":"distinct","min":0}`, `{"window":{"bucket":"1m","retention":"7d"}}`, `{"window":{"bucket":"90s","retention":"1h"}}`,
	`{"window":{"bucket":"1h","retention":"90m"}}`, `{"window":{"bucket":"1m"}}`, `{"window":{"Bucket":"1m","retention":"1h"}}`,
	`{"counters":["a","b"],"consistency":"cached"}`, `{"counters":[]}`, `{"counters":["a",""]}`, `{"counters":"a"}`,
	`{"writes":[{"counter":"a","member":"m","present":true}]}`, `{"writes":[{"counter":"a","member":"m"}]}`,
	`{"writes":[{"counter":"a","member":"m","present":false,"delta":1}]}`,
}

func FuzzDecodeCreate(f *testing.F) {
	for _, s := range bodySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		opts, err := shttp.DecodeCreate(body)
		if err != nil {
			mustInvalid(t, err, shardcounter.EINVALID)
			return
		}
		if opts.Shards != 0 {
			if err := shardcounter.ValidateShards(opts.Shards); err != nil {
				t.Fatalf("accepted %q with %v", body, err)
			}
			if opts.FollowersCount != nil || opts.Visibility != "" {
				t.Fatalf("accepted %q with both shards and audience", body)
			}
		}
		if opts.FollowersCount != nil && *opts.FollowersCount < 0 {
			t.Fatalf("accepted negative followers in %q", body)
		}
		if v := opts.Visibility; v != "" && v != "public" && v != "protected" {
			t.Fatalf("accepted visibility %q", v)
		}
		spec := shardcounter.Spec{Shards: 1, Kind: opts.Kind, Min: opts.Min, Max: opts.Max, Window: opts.Window}
		if err := shardcounter.ValidateSpec(spec); err != nil {
			t.Fatalf("accepted %q, whose spec is invalid: %v", body, err)
		}
	})
}

func FuzzDecodeWrite(f *testing.F) {
	for _, s := range bodySeeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, decrement bool) {
		delta, requestID, err := shttp.DecodeWrite(body, decrement)
		if err != nil {
			mustInvalid(t, err, shardcounter.EINVALID)
			return
		}
		if decrement != (delta < 0) {
			t.Fatalf("decrement %v gave delta %d from %q", decrement, delta, body)
		}
		if err := shardcounter.ValidateWrite(shardcounter.Write{Counter: "c", Delta: delta, RequestID: requestID}); err != nil {
			t.Fatalf("accepted %q, an invalid write: %v", body, err)
		}
	})
}

func FuzzDecodeReshard(f *testing.F) {
	for _, s := range bodySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := shttp.DecodeReshard(body)
		if err != nil {
			mustInvalid(t, err, shardcounter.EINVALID)
			return
		}
		if err := shardcounter.ValidateShards(n); err != nil {
			t.Fatalf("accepted %q: %v", body, err)
		}
	})
}

func FuzzDecodeWrites(f *testing.F) {
	for _, s := range bodySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		const max = 8
		ws, err := shttp.DecodeWrites(body, max)
		if err != nil {
			mustInvalid(t, err, shardcounter.EINVALID, shardcounter.ETOOLARGE)
			return
		}
		if len(ws) == 0 || len(ws) > max {
			t.Fatalf("accepted a batch of %d", len(ws))
		}
		for i, w := range ws {
			if err := shardcounter.ValidateWrite(w); err != nil {
				t.Fatalf("accepted item %d of %q: %v", i, body, err)
			}
		}
	})
}

func FuzzPageToken(f *testing.F) {
	f.Add("", "a", "")
	f.Add("page/", "page/03", "")
	f.Add("", "é☃", "AQBh")
	f.Add("p", "p1", "AQFwcDE")
	f.Add("", "", "AQFwcDE=")
	f.Add("x", "y", "!!!!")
	f.Fuzz(func(t *testing.T, prefix, after, token string) {
		// Any token a server issues reads back to the same id, for the
		// same prefix only.
		if shardcounter.ValidateID("id", after) == nil && strings.HasPrefix(after, prefix) {
			tok := shttp.EncodePageToken(prefix, after)
			got, err := shttp.DecodePageToken(tok, prefix)
			if err != nil || got != after {
				t.Fatalf("round trip of (%q, %q): %q, %v", prefix, after, got, err)
			}
			if _, err := shttp.DecodePageToken(tok, prefix+"x"); err == nil {
				t.Fatalf("token for prefix %q accepted for %q", prefix, prefix+"x")
			}
		}
		// Any other string is refused as invalid_argument, or is exactly
		// the canonical token of what it decodes to.
		got, err := shttp.DecodePageToken(token, prefix)
		if err != nil {
			mustInvalid(t, err, shardcounter.EINVALID)
			return
		}
		if shttp.EncodePageToken(prefix, got) != token {
			t.Fatalf("accepted non-canonical token %q", token)
		}
		if err := shardcounter.ValidateID("id", got); err != nil || !strings.HasPrefix(got, prefix) {
			t.Fatalf("token %q gave id %q outside prefix %q (%v)", token, got, prefix, err)
		}
	})
}

func FuzzParseTokens(f *testing.F) {
	for _, s := range []string{"", "\n", "tok\n", "a\r\nb\r\n", "  spaced  \n\n second", "a b", "\x00", "é", strings.Repeat("x", shttp.MaxTokenLen+1)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tokens, err := shttp.ParseTokens(data)
		if err != nil {
			mustInvalid(t, err, shardcounter.EINVALID)
			return
		}
		if len(tokens) == 0 {
			t.Fatalf("accepted %q with no tokens", data)
		}
		for _, tok := range tokens {
			if tok == "" || len(tok) > shttp.MaxTokenLen || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r > '~' }) {
				t.Fatalf("accepted token %q from %q", tok, data)
			}
			// Every token is a line of the file, as written.
			if !strings.Contains(string(data), tok) {
				t.Fatalf("token %q is not in %q", tok, data)
			}
		}
	})
}

func FuzzDecodeReads(f *testing.F) {
	for _, s := range bodySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := shttp.DecodeReads(body)
		if err != nil {
			mustInvalid(t, err, shardcounter.EINVALID, shardcounter.ETOOLARGE)
			return
		}
		if n := len(req.Counters); n == 0 || n > shardcounter.MaxReadBatch {
			t.Fatalf("accepted %d ids from %q", n, body)
		}
		for _, id := range req.Counters {
			if err := shardcounter.ValidateID("id", id); err != nil {
				t.Fatalf("accepted id %q from %q: %v", id, body, err)
			}
		}
		if c := req.Consistency; c != shardcounter.Strong && c != shardcounter.Cached {
			t.Fatalf("accepted consistency %q from %q", c, body)
		}
	})
}

// FuzzParseSpan drives the parser of the last and bucket query values.
func FuzzParseSpan(f *testing.F) {
	for _, s := range []string{"24h", "7d", "1h30m", "90m", "0s", "-1h", "1x", "", "d", "36500d", "36501d", "1e9h", "9223372036854775807ns", "1.5h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, err := shttp.ParseSpan("last", v)
		if err != nil {
			mustInvalid(t, err, shardcounter.EINVALID)
			if !strings.HasPrefix(shardcounter.ErrorMessage(err), "last: ") {
				t.Fatalf("message %q does not name the parameter", shardcounter.ErrorMessage(err))
			}
			return
		}
		if d <= 0 {
			t.Fatalf("accepted %q as %v", v, d)
		}
		// What the client sends for a span reads back the same.
		if back, err := shttp.ParseSpan("last", d.String()); err != nil || back != d {
			t.Fatalf("%q: %v wrote %q, read back %v, %v", v, d, d.String(), back, err)
		}
	})
}

func FuzzMemberToken(f *testing.F) {
	f.Add("post:1:likes", "alice", "")
	f.Add("c", "é☃", "AgFjYg")
	f.Add("", "m", "AQBh")
	f.Add("c", "", "!!!")
	f.Fuzz(func(t *testing.T, counter, after, token string) {
		if shardcounter.ValidateID("id", counter) == nil && shardcounter.ValidateID("member", after) == nil {
			tok := shttp.EncodeMemberToken(counter, after)
			got, err := shttp.DecodeMemberToken(tok, counter)
			if err != nil || got != after {
				t.Fatalf("round trip of (%q, %q): %q, %v", counter, after, got, err)
			}
			if _, err := shttp.DecodeMemberToken(tok, counter+"x"); err == nil {
				t.Fatalf("token for counter %q accepted for %q", counter, counter+"x")
			}
			if _, err := shttp.DecodePageToken(tok, counter); err == nil {
				t.Fatalf("member token %q accepted as a counter list's", tok)
			}
		}
		got, err := shttp.DecodeMemberToken(token, counter)
		if err != nil {
			mustInvalid(t, err, shardcounter.EINVALID)
			return
		}
		if shttp.EncodeMemberToken(counter, got) != token {
			t.Fatalf("accepted non-canonical token %q", token)
		}
		if err := shardcounter.ValidateID("member", got); err != nil {
			t.Fatalf("token %q gave member %q: %v", token, got, err)
		}
	})
}

// FuzzFastWrite: every body fastWrite reads, the general path reads alike.
func FuzzFastWrite(f *testing.F) {
	for _, s := range append(bodySeeds, `{"by":1}`, `{"by":01}`, `{"by":123456789012345678}`, `{"by":1234567890123456789}`, `{"by":1 }`, `{"by":+1}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		by, ok := shttp.FastWrite(body)
		if !ok {
			return
		}
		delta, requestID, err := shttp.DecodeWriteJSON(body, false)
		if err != nil || delta != by || requestID != "" {
			t.Fatalf("%q: fast path read by %d, the general path %d, %q, %v", body, by, delta, requestID, err)
		}
	})
}

// FuzzAppendWriteResult: every reply appendWriteResult writes is
// encoding/json's, byte for byte.
func FuzzAppendWriteResult(f *testing.F) {
	for _, s := range []string{"hot", "likes/post/8812", "a\"b", "<x>", "é", "a\\b", "a&b", " "} {
		f.Add(s, true, false)
		f.Add(s, false, true)
	}
	f.Fuzz(func(t *testing.T, counter string, applied, duplicate bool) {
		res := &shardcounter.WriteResult{Counter: counter, Applied: applied, Duplicate: duplicate}
		got, ok := shttp.AppendWriteResult(res)
		if !ok {
			return
		}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(res); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("%+v: wrote %q, encoding/json %q", res, got, want.Bytes())
		}
	})
}

// FuzzFastTake: every body the take's fast path reads, the general path
// reads alike, for a take and for a peek.
func FuzzFastTake(f *testing.F) {
	for _, s := range append(bodySeeds, `{"cost":1}`, `{"cost":01}`, `{"cost":0}`, `{"cost":123456789012345678}`, `{"cost":1234567890123456789}`, `{"cost":1 }`, `{"cost":-1}`, `{"cost":1,"request_id":"a"}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		cost, ok := shttp.FastTake(body)
		if !ok {
			return
		}
		for _, peek := range []bool{false, true} {
			c, requestID, err := shttp.DecodeTakeJSON(body, peek)
			if err != nil || c != cost || requestID != "" {
				t.Fatalf("%q: fast path read cost %d, the general path %d, %q, %v", body, cost, c, requestID, err)
			}
		}
	})
}

// FuzzAppendLimitResult: every reply appendLimitResult writes is
// encoding/json's, byte for byte.
func FuzzAppendLimitResult(f *testing.F) {
	f.Add(true, int64(99), int64(1500), int64(0), false)
	f.Add(false, int64(0), int64(60000), int64(-1), true)
	f.Add(true, int64(math.MaxInt64), int64(math.MinInt64), int64(7), true)
	f.Fuzz(func(t *testing.T, allowed bool, remaining, reset, retry int64, duplicate bool) {
		res := &shardcounter.LimitResult{Allowed: allowed, Remaining: remaining, ResetAfterMS: reset, RetryAfterMS: retry, Duplicate: duplicate,
			Policy: shardcounter.LimitPolicy{Kind: shardcounter.LimitGCRA, Limit: 3}}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(res); err != nil {
			t.Fatal(err)
		}
		if got := shttp.AppendLimitResult(res); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("appendLimitResult wrote %q, encoding/json %q", got, want.Bytes())
		}
	})
}
