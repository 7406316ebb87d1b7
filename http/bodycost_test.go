package http_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// bodyShapes are bodies of about 1 MiB whose decoded forms differ most:
// long strings (plain, escaped, not ASCII), many small values of each
// kind, wide objects, and nesting up to the limit.
func bodyShapes() map[string]string {
	const mib = 1 << 20
	var keys strings.Builder
	for i := range mib / 16 {
		if i > 0 {
			keys.WriteByte(',')
		}
		keys.WriteString(`"k` + strings.Repeat("0", 8) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26)) + string(rune('a'+i/17576%26)) + `":1`)
	}
	nest := strings.Repeat("[", shttp.MaxBodyDepth-3) + "1" + strings.Repeat("]", shttp.MaxBodyDepth-3)
	return map[string]string{
		"plain string":    `{"data":{"s":"` + strings.Repeat("x", mib) + `"}}`,
		"escaped string":  `{"data":{"s":"` + strings.Repeat(`\n`, mib/2) + `"}}`,
		"non-ASCII":       `{"data":{"s":"` + strings.Repeat("é", mib/2) + `"}}`,
		"zeros":           `{"data":{"n":[` + strings.Repeat("0,", mib/2) + `0]}}`,
		"numbers":         `{"data":{"n":[` + strings.Repeat("7.5,", mib/4) + `0]}}`,
		"empty strings":   `{"data":{"n":[` + strings.Repeat(`"",`, mib/3) + `0]}}`,
		"short strings":   `{"data":{"n":[` + strings.Repeat(`"ab",`, mib/5) + `0]}}`,
		"empty objects":   `{"data":{"n":[` + strings.Repeat(`{},`, mib/3) + `0]}}`,
		"small objects":   `{"data":{"n":[` + strings.Repeat(`{"a":1},`, mib/8) + `0]}}`,
		"empty arrays":    `{"data":{"n":[` + strings.Repeat(`[],`, mib/3) + `0]}}`,
		"booleans":        `{"data":{"n":[` + strings.Repeat(`true,`, mib/5) + `0]}}`,
		"wide object":     `{"data":{` + keys.String() + `}}`,
		"nested to limit": `{"data":{"n":[` + strings.Repeat(nest+",", mib/len(nest)) + `0]}}`,
		"batch of writes": `{"writes":[` + strings.Repeat(`{"counter":"c","delta":1},`, 999) + `{"counter":"c","delta":1}]}`,
	}
}

// TestDecodedSizeCovers checks decodedSize against what decoding holds:
// for each shape, the heap that the decoded value keeps (after a
// collection) is at most what decodedSize charges the body budget.
// Decoding into any (a document's data) is the costliest target.
func TestDecodedSizeCovers(t *testing.T) {
	for name, body := range bodyShapes() {
		t.Run(name, func(t *testing.T) {
			charged, err := shttp.DecodedSize([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			b := []byte(body)
			var v any
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			runtime.KeepAlive(v)
			runtime.KeepAlive(b)
			t.Logf("body %d bytes; decoded holds %d, charged %d (%.1f×)", len(body), held, charged, float64(charged)/float64(max(held, 1)))
			if held > charged {
				t.Errorf("decoding holds %d bytes, more than the %d charged", held, charged)
			}
		})
	}
}

// TestDecodedSizeDepth: a body nested MaxBodyDepth deep is taken, one
// deeper is refused with invalid_argument, brackets inside strings do
// not count.
func TestDecodedSizeDepth(t *testing.T) {
	at := strings.Repeat("[", shttp.MaxBodyDepth) + strings.Repeat("]", shttp.MaxBodyDepth)
	if _, err := shttp.DecodedSize([]byte(at)); err != nil {
		t.Fatalf("nested %d deep: %v", shttp.MaxBodyDepth, err)
	}
	if _, err := shttp.DecodedSize([]byte(`{"a":"` + strings.Repeat("[", 100) + `"}`)); err != nil {
		t.Fatalf("brackets in a string: %v", err)
	}
	if _, err := shttp.DecodedSize([]byte(`{"a":"\"` + strings.Repeat("[", 100) + `"}`)); err != nil {
		t.Fatalf("brackets in a string after an escaped quote: %v", err)
	}
	_, err := shttp.DecodedSize([]byte("[" + at + "]"))
	if shardcounter.ErrorCode(err) != shardcounter.EINVALID || !strings.Contains(err.Error(), "more than 32 deep") {
		t.Fatalf("nested %d deep: %v, want invalid_argument naming the limit", shttp.MaxBodyDepth+1, err)
	}
}

// FuzzDecodedSize: decodedSize takes any bytes without panicking, and on
// valid JSON refuses exactly the bodies nested deeper than MaxBodyDepth.
func FuzzDecodedSize(f *testing.F) {
	for _, s := range []string{`{"by":1}`, `{"writes":[{"counter":"a","delta":1}]}`, `"\"[[["`, `[[[[]]]]`, `{"a":"\\"}`, `]]][[[`, `"`, `{"data":{"a":[1,{"b":[]}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		size, err := shttp.DecodedSize(body)
		if err == nil && size < 0 {
			t.Fatalf("size %d", size)
		}
		if !json.Valid(body) {
			return
		}
		if deep := depthOf(t, body) > shttp.MaxBodyDepth; deep != (err != nil) {
			t.Fatalf("nested %d deep: error %v", depthOf(t, body), err)
		}
	})
}

// depthOf returns how deep valid JSON nests, read from json.Decoder's
// tokens.
func depthOf(t *testing.T, body []byte) int {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // valid JSON may hold a number no float64 holds
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return deepest
		}
		if err != nil {
			t.Fatal(err)
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			deepest = max(deepest, depth)
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}
