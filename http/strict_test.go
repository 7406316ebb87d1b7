package http_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// TestStrictKeys checks that field names match exactly and once:
// encoding/json alone matches them case-insensitively and keeps the last
// of duplicates, so {"BY":5} would pass as by and {"by":1,"by":9} as 9.
func TestStrictKeys(t *testing.T) {
	e := MustServe(t, EnvOptions{})
	e.MustCreate(t, "k", 2)
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", path("k") + "/increment", `{"BY":5}`, `"BY"`},
		{"POST", path("k") + "/increment", `{"By":5}`, `"By"`},
		{"POST", path("k") + "/increment", `{"by":1,"by":9}`, `"by"`},
		{"POST", path("k") + "/increment", `{"by":1,"b\u0079":9}`, `"by"`},
		{"POST", path("k") + "/increment", `{"Request_ID":"x"}`, `"Request_ID"`},
		{"PUT", path("new"), `{"SHARDS":4}`, `"SHARDS"`},
		{"PUT", path("new"), `{"shards":4,"shards":8}`, `"shards"`},
		{"PUT", path("new"), `{"window":{"bucket":"1m","Bucket":"1h","retention":"1h"}}`, `"Bucket"`},
		{"PATCH", path("k"), `{"ſhards":4}`, `"ſhards"`}, // folds to "shards" in encoding/json
		{"POST", "/v1/writes", `{"writes":[{"counter":"k","delta":1},{"Counter":"k","delta":1}]}`, `writes[1]`},
		{"POST", "/v1/writes", `{"writes":[{"counter":"k","delta":1,"delta":-1}]}`, `"delta"`},
		{"POST", "/v1/writes", `{"Writes":[{"counter":"k","delta":1}]}`, `"Writes"`},
	} {
		msg := e.Do(t, c.method, c.path, c.body).MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
		if !strings.Contains(msg, c.want) {
			t.Errorf("%s %s: message %q does not name %s", c.method, c.body, msg, c.want)
		}
	}
	if got := e.MustValue(t, "k"); got != 0 {
		t.Fatalf("value %d after refused writes, want 0", got)
	}
	// Escapes spell the same name: accepted.
	e.Do(t, "POST", path("k")+"/increment", `{"b\u0079":2}`).MustOK(t, http.StatusOK, nil)
	if got := e.MustValue(t, "k"); got != 2 {
		t.Fatalf("value %d, want 2", got)
	}
}

// strictTarget is the type FuzzStrictJSON decodes into: scalars,
// pointers, a nested object, an array of objects and free-form data.
type strictTarget struct {
	By    *int64         `json:"by"`
	Name  string         `json:"name"`
	Inner *strictInner   `json:"inner"`
	List  []strictInner  `json:"list"`
	Data  map[string]any `json:"data"`
}

type strictInner struct {
	A int64 `json:"a"`
}

// FuzzStrictJSON compares the server's strict decoding of a body with a
// reading of its own, made from json.Decoder tokens: every key exactly a
// field's name (any key in data), none twice in one object, every value of
// its field's type, no string with a lone surrogate (which json.Decoder
// repairs, so the reading checks the literals itself: hasLoneSurrogate).
// The two must accept the same bodies and agree on what they mean.
func FuzzStrictJSON(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"by":5}`, `{"BY":5}`, `{"by":1,"by":2}`, `{"b\u0079":3}`, `{"name":"x","inner":{"a":1}}`,
		`{"inner":{"A":1}}`, `{"list":[{"a":1},{"a":2},null]}`, `{"list":[{"a":1,"a":1}]}`,
		`{"data":{"x":1,"X":2}}`, `{"data":{"x":1,"x":2}}`, `{"data":{"k":[1,{"a":null}],"s":"é"}}`,
		`{"by":null,"name":null,"inner":null,"list":null,"data":null}`, `{"ſame":1}`, `{"by":1e2}`,
		`{"by":-0}`, `{"by":9223372036854775808}`, `{"data":{"n":1e400}}`, `{"name":"\ud800"}`, `[]`, `{} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got strictTarget
		err := shttp.DecodeStrict(body, &got)
		want, refErr := strictReading(body)
		if err != nil {
			mustInvalid(t, err, shardcounter.EINVALID)
		}
		switch {
		case err != nil && refErr == nil:
			t.Fatalf("refused %q (%v), which the strict reading takes as %+v", body, err, want)
		case err == nil && refErr != nil:
			t.Fatalf("accepted %q as %+v, which the strict reading refuses: %v", body, got, refErr)
		case err == nil && !reflect.DeepEqual(got, want):
			t.Fatalf("%q: decoded %+v, the strict reading %+v", body, got, want)
		}
	})
}

// strictReading reads body as FuzzStrictJSON's specification says, from
// json.Decoder tokens.
func strictReading(body []byte) (strictTarget, error) {
	var out strictTarget
	if len(bytes.Trim(body, " \t\r\n")) == 0 {
		return out, nil
	}
	if !utf8.Valid(body) {
		return out, errors.New("not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	v, err := readValue(dec)
	if err != nil {
		return out, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return out, errors.New("data after the value")
	}
	if hasLoneSurrogate(body) {
		return out, errors.New("a lone surrogate")
	}
	top, ok := v.(map[string]any)
	if !ok {
		return out, errors.New("not an object")
	}
	for k, v := range top {
		switch k {
		case "by":
			if v != nil {
				n, err := toInt(v)
				if err != nil {
					return out, err
				}
				out.By = &n
			}
		case "name":
			if v != nil {
				s, ok := v.(string)
				if !ok {
					return out, errors.New("name not a string")
				}
				out.Name = s
			}
		case "inner":
			if v != nil {
				in, err := toInner(v)
				if err != nil {
					return out, err
				}
				out.Inner = &in
			}
		case "list":
			if v != nil {
				items, ok := v.([]any)
				if !ok {
					return out, errors.New("list not an array")
				}
				out.List = []strictInner{}
				for _, item := range items {
					in := strictInner{}
					if item != nil {
						if in, err = toInner(item); err != nil {
							return out, err
						}
					}
					out.List = append(out.List, in)
				}
			}
		case "data":
			if v != nil {
				m, ok := v.(map[string]any)
				if !ok {
					return out, errors.New("data not an object")
				}
				d, err := toFloats(m)
				if err != nil {
					return out, err
				}
				out.Data = d.(map[string]any)
			}
		default:
			return out, fmt.Errorf("unknown key %q", k)
		}
	}
	return out, nil
}

// readValue reads one JSON value from tokens, refusing duplicate keys.
func readValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		m := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			if _, dup := m[k]; dup {
				return nil, fmt.Errorf("duplicate key %q", k)
			}
			if m[k], err = readValue(dec); err != nil {
				return nil, err
			}
		}
		_, err := dec.Token()
		return m, err
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := readValue(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return tok, nil
}

func toInt(v any) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, errors.New("not a number")
	}
	return strconv.ParseInt(string(n), 10, 64)
}

func toInner(v any) (strictInner, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return strictInner{}, errors.New("not an object")
	}
	var in strictInner
	for k, v := range m {
		if k != "a" {
			return in, fmt.Errorf("unknown key %q", k)
		}
		if v != nil {
			n, err := toInt(v)
			if err != nil {
				return in, err
			}
			in.A = n
		}
	}
	return in, nil
}

// toFloats turns json.Numbers into the float64s encoding/json gives an
// interface.
func toFloats(v any) (any, error) {
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, errors.New("number out of range")
		}
		return f, nil
	case map[string]any:
		for k, x := range v {
			y, err := toFloats(x)
			if err != nil {
				return nil, err
			}
			v[k] = y
		}
	case []any:
		for i, x := range v {
			y, err := toFloats(x)
			if err != nil {
				return nil, err
			}
			v[i] = y
		}
	}
	return v, nil
}
