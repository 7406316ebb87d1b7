package http_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// The fuzz targets of this file prove, for each entry point that turns
// client text into a key (ids, request ids, members, field names, values
// of a collection), that no two distinct texts become one key: every
// accepted input's key is exactly the text it spells, by a reading of its
// own (exactText) that keeps what encoding/json would repair, and any two
// accepted inputs with one key spell one text. Each target puts the
// fuzzer's strings, as the contents of a JSON string literal, into a body
// of its route.

// exactText decodes the contents of a JSON string literal (between its
// quotes) to code points, keeping a lone UTF-16 surrogate as the surrogate
// it is, where encoding/json would make it U+FFFD. ok is false when lit is
// not a literal's contents at all (a bare quote, a bad escape, bytes that
// are not UTF-8).
func exactText(lit string) (text []rune, ok bool) {
	for i := 0; i < len(lit); {
		c := lit[i]
		switch {
		case c == '"' || c < 0x20:
			return nil, false
		case c != '\\':
			r, n := utf8.DecodeRuneInString(lit[i:])
			if r == utf8.RuneError && n <= 1 {
				return nil, false
			}
			text = append(text, r)
			i += n
			continue
		}
		if i+1 >= len(lit) {
			return nil, false
		}
		switch e := lit[i+1]; e {
		case '"', '\\', '/':
			text = append(text, rune(e))
		case 'b':
			text = append(text, '\b')
		case 'f':
			text = append(text, '\f')
		case 'n':
			text = append(text, '\n')
		case 'r':
			text = append(text, '\r')
		case 't':
			text = append(text, '\t')
		case 'u':
			r, ok := hexRune(lit[i+2:])
			if !ok {
				return nil, false
			}
			text = append(text, r) // surrogates as they are; paired below
			i += 6
			continue
		default:
			return nil, false
		}
		i += 2
	}
	// Pair each high surrogate directly followed by a low one.
	out := text[:0]
	for i := 0; i < len(text); i++ {
		if utf16.IsSurrogate(text[i]) && text[i] < 0xdc00 && i+1 < len(text) && 0xdc00 <= text[i+1] && text[i+1] <= 0xdfff {
			out = append(out, utf16.DecodeRune(text[i], text[i+1]))
			i++
			continue
		}
		out = append(out, text[i])
	}
	return out, true
}

func hexRune(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[:4]) {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// hasLoneSurrogate reports whether any string literal of body, valid
// JSON, holds a lone surrogate.
func hasLoneSurrogate(body []byte) bool {
	for i := 0; i < len(body); i++ {
		if body[i] != '"' {
			continue
		}
		j := i + 1
		for j < len(body) && body[j] != '"' {
			if body[j] == '\\' {
				j++
			}
			j++
		}
		if j > len(body) {
			return false
		}
		if text, ok := exactText(string(body[i+1 : j])); ok && slices.ContainsFunc(text, utf16.IsSurrogate) {
			return true
		}
		i = j
	}
	return false
}

// checkKey checks one accepted input: the literal lit became key, which
// must be exactly the text lit spells, and that text must be text (no
// surrogate).
func checkKey(t *testing.T, what, lit, key string) {
	t.Helper()
	text, ok := exactText(lit)
	if !ok {
		t.Fatalf("%s: accepted %q, which is not the contents of a JSON string", what, lit)
	}
	if slices.ContainsFunc(text, utf16.IsSurrogate) {
		t.Fatalf("%s: accepted %q, which holds a lone surrogate, as the key %q", what, lit, key)
	}
	if key != string(text) {
		t.Fatalf("%s: %q became the key %q, not the text it spells, %q", what, lit, key, string(text))
	}
}

// keysOf is an entry point under test: it decodes a body with lit in it
// and returns the key lit became, or the decoder's error.
type keysOf func(lit string) (string, error)

// fuzzKeys runs the property on the inputs a and b of one entry point's
// body with lit in field field (an index into bodies).
func fuzzKeys(t *testing.T, decode keysOf, a, b string) {
	ka, ea := decode(a)
	kb, eb := decode(b)
	for _, e := range []error{ea, eb} {
		if e != nil && shardcounter.ErrorCode(e) != shardcounter.EINVALID && shardcounter.ErrorCode(e) != shardcounter.ETOOLARGE {
			t.Fatalf("error %v is not invalid_argument", e)
		}
	}
	if ea == nil {
		checkKey(t, "a", a, ka)
	}
	if eb == nil {
		checkKey(t, "b", b, kb)
	}
	if ea == nil && eb == nil && ka == kb {
		ta, _ := exactText(a)
		tb, _ := exactText(b)
		if !slices.Equal(ta, tb) {
			t.Fatalf("%q and %q, two texts, became one key %q", a, b, ka)
		}
	}
}

// keySeeds are the literals every target starts from: the lone
// surrogates of the issue that found the hole, pairs, escapes of plain
// characters, U+FFFD itself.
var keySeeds = [][2]string{
	{`w-\ud800`, `w-\udbff`},
	{`w-\ud800`, `w-\ufffd`},
	{`w-\ufffd`, "w-\ufffd"},
	{`\ud83d\ude00`, "😀"},
	{`\ude00\ud83d`, `\ud83d\ude00`},
	{`a\u0062`, `ab`},
	{`\\ud800`, `\ud800`},
	{``, `x`},
}

func seedKeys(f *testing.F, fields int) {
	for i, s := range keySeeds {
		f.Add(uint8(i%fields), s[0], s[1])
	}
}

// FuzzKeysWrite: the request id of POST /v1/counters/{id}/increment.
func FuzzKeysWrite(f *testing.F) {
	seedKeys(f, 1)
	f.Fuzz(func(t *testing.T, _ uint8, a, b string) {
		fuzzKeys(t, func(lit string) (string, error) {
			_, id, err := shttp.DecodeWrite([]byte(`{"by":1,"request_id":"`+lit+`"}`), false)
			return id, err
		}, a, b)
	})
}

// FuzzKeysWrites: a counter id, request id or member of POST /v1/writes.
func FuzzKeysWrites(f *testing.F) {
	seedKeys(f, 3)
	f.Fuzz(func(t *testing.T, field uint8, a, b string) {
		fuzzKeys(t, func(lit string) (string, error) {
			var body string
			switch field % 3 {
			case 0:
				body = `{"writes":[{"counter":"` + lit + `","delta":1}]}`
			case 1:
				body = `{"writes":[{"counter":"c","delta":1,"request_id":"` + lit + `"}]}`
			default:
				body = `{"writes":[{"counter":"c","member":"` + lit + `","present":true}]}`
			}
			ws, err := shttp.DecodeWrites([]byte(body), 10)
			if err != nil {
				return "", err
			}
			return [...]string{ws[0].Counter, ws[0].RequestID, ws[0].Member}[field%3], nil
		}, a, b)
	})
}

// FuzzKeysReads: a counter id of POST /v1/reads.
func FuzzKeysReads(f *testing.F) {
	seedKeys(f, 1)
	f.Fuzz(func(t *testing.T, _ uint8, a, b string) {
		fuzzKeys(t, func(lit string) (string, error) {
			req, err := shttp.DecodeReads([]byte(`{"counters":["x","` + lit + `"]}`))
			if err != nil {
				return "", err
			}
			return req.Counters[1], nil
		}, a, b)
	})
}

// FuzzKeysDocuments: a document id, a field name of its data and a value
// of it (which an index makes a key) in POST .../documents.
func FuzzKeysDocuments(f *testing.F) {
	seedKeys(f, 3)
	f.Fuzz(func(t *testing.T, field uint8, a, b string) {
		fuzzKeys(t, func(lit string) (string, error) {
			var body string
			switch field % 3 {
			case 0:
				body = `{"id":"` + lit + `","data":{}}`
			case 1:
				body = `{"data":{"` + lit + `":1}}`
			default:
				body = `{"documents":[{"data":{"k":"` + lit + `"}}]}`
			}
			docs, err := shttp.DecodeDocuments([]byte(body))
			if err != nil {
				return "", err
			}
			d := docs[0]
			switch field % 3 {
			case 0:
				return d.ID, nil
			case 1:
				for k := range d.Data {
					return k, nil
				}
				return "", errors.New("no key in data")
			}
			s, _ := d.Data["k"].(string)
			return s, nil
		}, a, b)
	})
}

// FuzzKeysCollection: an index field and the timestamp field of PUT
// /v1/collections/{name}, and the field and value of a query's filter.
func FuzzKeysCollection(f *testing.F) {
	seedKeys(f, 4)
	f.Fuzz(func(t *testing.T, field uint8, a, b string) {
		fuzzKeys(t, func(lit string) (string, error) {
			switch field % 4 {
			case 0:
				o, err := shttp.DecodeCreateCollection([]byte(`{"indexes":["` + lit + `"]}`))
				if err != nil {
					return "", err
				}
				return o.Indexes[0], nil
			case 1:
				o, err := shttp.DecodeCreateCollection([]byte(`{"timestamp_field":"` + lit + `"}`))
				return o.TimestampField, err
			case 2:
				q, err := shttp.DecodeQuery([]byte(`{"where":[{"field":"` + lit + `","op":"==","value":1}]}`))
				if err != nil {
					return "", err
				}
				return q.Where[0].Field, nil
			}
			q, err := shttp.DecodeQuery([]byte(`{"where":[{"field":"f","op":"==","value":"` + lit + `"}]}`))
			if err != nil {
				return "", err
			}
			s, _ := q.Where[0].Value.(string)
			return s, nil
		}, a, b)
	})
}

// writeCatcher is a service that records the writes it is asked for and
// applies none.
type writeCatcher struct {
	nopService
	last *shardcounter.Write
}

func (w *writeCatcher) WriteCounter(_ context.Context, x shardcounter.Write) (*shardcounter.WriteResult, error) {
	*w.last = x
	return &shardcounter.WriteResult{Counter: x.Counter, Applied: true}, nil
}

// FuzzKeysPath: a counter id and a member as URL-escaped path segments,
// through the server's own routing: the key the service is asked for is
// the bytes the escapes spell, and they must be UTF-8.
func FuzzKeysPath(f *testing.F) {
	for _, s := range [][2]string{{"w-%ED%A0%80", "w-%ED%AF%BF"}, {"%61", "a"}, {"a%2Fb", "a/b"}, {"%EF%BF%BD", "%ff"}, {"%C0%80", "%00"}} {
		f.Add(uint8(0), s[0], s[1])
		f.Add(uint8(1), s[0], s[1])
	}
	var last shardcounter.Write
	srv := shttp.NewServer(&writeCatcher{last: &last}, shttp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	f.Fuzz(func(t *testing.T, field uint8, a, b string) {
		key := func(seg string) (string, bool) {
			if strings.ContainsAny(seg, "/?#") {
				return "", false // not one segment
			}
			p := "/v1/counters/" + seg + "/increment"
			body := "{}"
			if field%2 == 1 {
				p = "/v1/counters/c/members/" + seg
				body = ""
			}
			req, err := http.NewRequest(map[bool]string{false: "POST", true: "PUT"}[field%2 == 1], "http://x"+p, strings.NewReader(body))
			if err != nil {
				return "", false
			}
			last = shardcounter.Write{}
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				if rec.Code >= 500 {
					t.Fatalf("%s: status %d: %s", p, rec.Code, rec.Body)
				}
				return "", false
			}
			if field%2 == 1 {
				return last.Member, true
			}
			return last.Counter, true
		}
		ka, oka := key(a)
		kb, okb := key(b)
		for _, c := range []struct {
			seg, key string
			ok       bool
		}{{a, ka, oka}, {b, kb, okb}} {
			if !c.ok {
				continue
			}
			want, err := urlUnescape(c.seg)
			if err != nil || want != c.key || !utf8.ValidString(c.key) {
				t.Fatalf("path segment %q became the key %q; it spells %q (%v)", c.seg, c.key, want, err)
			}
		}
		if oka && okb && ka == kb {
			ua, _ := urlUnescape(a)
			ub, _ := urlUnescape(b)
			if !bytes.Equal([]byte(ua), []byte(ub)) {
				t.Fatalf("%q and %q, two texts, became one key %q", a, b, ka)
			}
		}
	})
}

// urlUnescape is the reading of a path segment's escapes this test holds
// the server to: %XX is the byte XX, anything else is itself.
func urlUnescape(s string) (string, error) {
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			if i+2 >= len(s) {
				return "", errors.New("short escape")
			}
			r, ok := hexRune("00" + s[i+1:i+3])
			if !ok {
				return "", errors.New("bad escape")
			}
			out = append(out, byte(r))
			i += 2
			continue
		}
		out = append(out, s[i])
	}
	return string(out), nil
}
