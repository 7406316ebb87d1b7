package http

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"

	"github.com/shardcounter/shardcounter"
)

// encoding/json matches object keys to struct fields case-insensitively
// ({"BY":5} sets by, and so do "By" and "ſhards" for shards, by Unicode
// folding) and keeps the last of duplicate keys ({"by":1,"by":9} is 9),
// even with DisallowUnknownFields. A request that one reader takes for
// one thing and another for something else is refused instead: checkKeys
// walks a body that encoding/json has already accepted and requires every
// key of an object decoded into a struct to be exactly a field's name, and
// every key of any object to appear once.
//
// The standard library's encoding/json/v2 does this, but it is
// experimental (GOEXPERIMENT=jsonv2), and its module form warns that its
// API may change; so this is a small scanner of our own, fuzzed against a
// reading built from json.Decoder tokens (FuzzStrictJSON). It allocates
// nothing for the usual bodies.

// encoding/json also repairs text: a \u escape of a lone UTF-16
// surrogate (\ud800 without its low half) decodes to U+FFFD, so "w-\ud800"
// and "w-\udbff" would be one id, one request id, one member. checkKeys
// refuses every string, key or value, that holds one, naming the field:
// invalid text is refused, not repaired. (Raw bytes that are not UTF-8
// are refused before, by decodeObject.)
//
// And it cannot tell a field given as "" from one left out: for the
// fields that name a key (keyFields), "" is refused, so that an empty
// request id is never taken for no request id.

// keyFields are the JSON names of struct fields that become keys when
// given: a given one must not be empty, since "" is what the decoders
// read as absent.
var keyFields = map[string]bool{"request_id": true, "id": true, "member": true}

// schema is what checkKeys knows of the Go type a JSON value decodes into.
type schema struct {
	fields map[string]int // a struct: its fields' JSON names, to their index
	kids   []*schema      // a struct: each field's schema, by index
	names  string         // a struct: its field names, for messages
	elem   *schema        // an array's elements, or an object's values when fields is nil
	keys   uint64         // a struct: the fields (by index, up to 64) in keyFields
}

// free is the schema of a value whose keys are not fields: a map, an
// interface, a type with its own UnmarshalJSON. Keys are checked only for
// duplicates.
var free = func() *schema { s := &schema{}; s.elem = s; return s }()

var (
	schemasMu sync.Mutex
	schemas   = map[reflect.Type]*schema{}
	// schemaCache is the lock-free copy read by checkKeys.
	schemaCache sync.Map // reflect.Type → *schema
)

// schemaOf returns the schema of t, built once.
func schemaOf(t reflect.Type) *schema {
	if s, ok := schemaCache.Load(t); ok {
		return s.(*schema)
	}
	schemasMu.Lock()
	defer schemasMu.Unlock()
	s := buildSchema(t)
	schemaCache.Store(t, s)
	return s
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// buildSchema builds t's schema; schemasMu is held. A type under
// construction is in schemas already, so recursive types end.
func buildSchema(t reflect.Type) *schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s, ok := schemas[t]; ok {
		return s
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return free
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		s := &schema{}
		schemas[t] = s
		s.elem = buildSchema(t.Elem())
		return s
	case reflect.Map:
		s := &schema{}
		schemas[t] = s
		s.elem = buildSchema(t.Elem())
		return s
	case reflect.Struct:
		s := &schema{fields: map[string]int{}}
		schemas[t] = s
		addFields(s, t)
		names := make([]string, 0, len(s.fields))
		for n := range s.fields {
			names = append(names, strconv.Quote(n))
		}
		slices.Sort(names)
		s.names = strings.Join(names, ", ")
		return s
	}
	return free
}

// addFields adds t's fields to s as encoding/json names them, with the
// fields of untagged embedded structs in line.
func addFields(s *schema, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			addFields(s, ft)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if keyFields[name] && f.Type.Kind() == reflect.String && len(s.kids) < 64 {
			s.keys |= 1 << len(s.kids)
		}
		s.fields[name] = len(s.kids)
		s.kids = append(s.kids, buildSchema(f.Type))
	}
}

// checkKeys checks the keys of body, one JSON value that encoding/json
// has accepted, against the schema of v's type.
func checkKeys(body []byte, v any) error {
	sc := keyScanner{b: body}
	return sc.value(schemaOf(reflect.TypeOf(v)))
}

// keyScanner walks valid JSON.
type keyScanner struct {
	b []byte
	i int
}

func (sc *keyScanner) skipSpace() {
	for sc.i < len(sc.b) {
		switch sc.b[sc.i] {
		case ' ', '\t', '\n', '\r':
			sc.i++
		default:
			return
		}
	}
}

// value checks the value at sc.i and moves past it.
func (sc *keyScanner) value(s *schema) error {
	sc.skipSpace()
	switch sc.b[sc.i] {
	case '{':
		return sc.object(s)
	case '[':
		sc.i++
		for n := 0; ; n++ {
			sc.skipSpace()
			if sc.b[sc.i] == ']' {
				sc.i++
				return nil
			}
			if sc.b[sc.i] == ',' {
				sc.i++
			}
			if err := sc.value(s.elemOrFree()); err != nil {
				return prefixed(fmt.Sprintf("[%d]", n), err)
			}
		}
	case '"':
		if _, lone := sc.str(); lone != "" {
			return loneSurrogate(lone)
		}
	default: // a number, true, false or null
		for sc.i < len(sc.b) && !strings.ContainsRune(",]} \t\n\r", rune(sc.b[sc.i])) {
			sc.i++
		}
	}
	return nil
}

func (s *schema) elemOrFree() *schema {
	if s.elem == nil {
		return free
	}
	return s.elem
}

// object checks the object at sc.i against s and moves past it.
func (sc *keyScanner) object(s *schema) error {
	sc.i++
	var seen uint64       // struct fields seen, by index (up to 64)
	var seenKeys []string // keys seen in a free object, or past 64 fields
	for {
		sc.skipSpace()
		switch sc.b[sc.i] {
		case '}':
			sc.i++
			return nil
		case ',':
			sc.i++
			sc.skipSpace()
		}
		raw, lone := sc.str()
		if lone != "" {
			return &keyError{msg: fmt.Sprintf("a key holds the lone UTF-16 surrogate %s: send valid Unicode text (a character outside the BMP as a surrogate pair, or as itself)", lone)}
		}
		kb := raw[1 : len(raw)-1]
		if bytes.IndexByte(kb, '\\') >= 0 {
			var key string
			json.Unmarshal(raw, &key) // valid: encoding/json accepted it
			kb = []byte(key)
		}
		sc.skipSpace()
		sc.i++ // the colon
		kid := s.elemOrFree()
		if s.fields != nil {
			idx, ok := s.fields[string(kb)] // no copy for a lookup
			if !ok {
				return unknownKey(string(kb), s)
			}
			kid = s.kids[idx]
			if idx < 64 && s.keys&(1<<idx) != 0 && sc.emptyString() {
				return &keyError{path: string(kb), msg: "is empty: give 1 to 256 bytes of UTF-8, or leave the field out", value: true}
			}
			if idx < 64 {
				if seen&(1<<idx) != 0 {
					return duplicateKey(string(kb))
				}
				seen |= 1 << idx
				idx = -1
			}
			if idx >= 0 {
				if slices.Contains(seenKeys, string(kb)) {
					return duplicateKey(string(kb))
				}
				seenKeys = append(seenKeys, string(kb))
			}
		} else {
			if slices.Contains(seenKeys, string(kb)) {
				return duplicateKey(string(kb))
			}
			seenKeys = append(seenKeys, string(kb))
		}
		if err := sc.value(kid); err != nil {
			return prefixed(strconv.Quote(string(kb)), err)
		}
	}
}

// str moves past the string at sc.i and returns it, quotes included, and
// the first \u escape in it of a lone UTF-16 surrogate, or "".
func (sc *keyScanner) str() (raw []byte, lone string) {
	start := sc.i
	sc.i++
	for sc.b[sc.i] != '"' {
		if sc.b[sc.i] == '\\' {
			sc.i++
			if sc.b[sc.i] == 'u' && lone == "" {
				p := sc.i - 1 // the backslash
				if r := hex4(sc.b[p+2 : p+6]); utf16.IsSurrogate(r) {
					if r < 0xdc00 && p+12 <= len(sc.b) && sc.b[p+6] == '\\' && sc.b[p+7] == 'u' &&
						isLowSurrogate(hex4(sc.b[p+8:p+12])) {
						sc.i = p + 11 // a pair: past the low half's last digit, less the step below
					} else {
						lone = string(sc.b[p : p+6])
					}
				}
			}
		}
		sc.i++
	}
	sc.i++
	return sc.b[start:sc.i], lone
}

// emptyString reports whether the value after the colon at sc.i is "".
func (sc *keyScanner) emptyString() bool {
	i := sc.i
	for i < len(sc.b) && strings.IndexByte(jsonSpace, sc.b[i]) >= 0 {
		i++
	}
	return i+1 < len(sc.b) && sc.b[i] == '"' && sc.b[i+1] == '"'
}

// hex4 reads four hex digits, which valid JSON has after \u.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		default:
			r = r<<4 | rune(c-'A'+10)
		}
	}
	return r
}

func isLowSurrogate(r rune) bool { return 0xdc00 <= r && r <= 0xdfff }

// loneSurrogate is the error of a string value holding a lone surrogate.
func loneSurrogate(esc string) error {
	return &keyError{msg: fmt.Sprintf("holds the lone UTF-16 surrogate %s, which is not text: send valid Unicode (a character outside the BMP as a surrogate pair, or as itself)", esc), value: true}
}

// keyError is a strict-key error on its way up from a nested object,
// gathering the path to it.
type keyError struct {
	path    string // as in writes[1], "window"
	msg     string
	unknown string // the unknown key, if that is the error
	hint    string // for an unknown key: the name it differs from in case only
	value   bool   // the error is of the value at path, not of a key of the object there
}

func (e *keyError) Error() string { return e.msg }

func prefixed(seg string, err error) error {
	ke := err.(*keyError)
	if strings.HasPrefix(seg, "\"") {
		seg = strings.Trim(seg, "\"")
	}
	if ke.path != "" && !strings.HasPrefix(ke.path, "[") {
		seg += "."
	}
	return &keyError{path: seg + ke.path, msg: ke.msg, unknown: ke.unknown, hint: ke.hint, value: ke.value}
}

func unknownKey(key string, s *schema) error {
	ke := &keyError{unknown: key}
	for name := range s.fields {
		if strings.EqualFold(name, key) {
			ke.hint = fmt.Sprintf(" (field names are case-sensitive: did you mean %q?)", name)
			break
		}
	}
	ke.msg = fmt.Sprintf("unknown field %q%s: the fields here are %s", key, ke.hint, s.names)
	return ke
}

func duplicateKey(key string) error {
	return &keyError{msg: fmt.Sprintf("field %q is given twice: give each field once", key)}
}

// strictError turns checkKeys' error into the API's. An unknown field of
// the body's own object is described with fields, the route's words for
// what it takes.
func strictError(err error, fields string) error {
	ke := err.(*keyError)
	switch {
	case ke.path == "" && ke.unknown != "":
		return shardcounter.Errorf(shardcounter.EINVALID, "unknown field %q%s: the fields are %s", ke.unknown, ke.hint, fields)
	case ke.path == "":
		return shardcounter.Errorf(shardcounter.EINVALID, "%s", ke.msg)
	case ke.value:
		return shardcounter.Errorf(shardcounter.EINVALID, "field %s %s", ke.path, ke.msg)
	}
	return shardcounter.Errorf(shardcounter.EINVALID, "in %s: %s", ke.path, ke.msg)
}
