package firestore_test

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/firestore"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ id, doc string }{
		{"likes", "likes"},
		{"post:42 ❤", "post:42 ❤"},
		{"post/42", "post.~42"},
		{".", "._"},
		{"..", "._._"},
		{"__x__", "__x_^_"},
		{"__", "__"},
		{"__._", "__._^_"},
		{"__a._", "__a._^_"},
		{"__.", "__._"},
		{"a^b", "a^^b"},
		{"Counter Test_1", "Counter Test_1"},
	} {
		if got := firestore.Escape(c.id); got != c.doc {
			t.Errorf("Escape(%q) = %q, want %q", c.id, got, c.doc)
		}
		if got, err := firestore.Unescape(c.doc); err != nil || got != c.id {
			t.Errorf("Unescape(%q) = %q, %v; want %q", c.doc, got, err, c.id)
		}
	}
	for _, foreign := range []string{"post.42", "a^", "x.", "a^_b"} {
		if _, err := firestore.Unescape(foreign); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
			t.Errorf("Unescape(%q) = %v, want invalid_argument", foreign, err)
		}
	}
}

// reserved is what Firestore refuses as a document id.
var reserved = regexp.MustCompile(`^__.*__$`)

// FuzzEscape checks that every id escapes to a document id Firestore
// takes, back to itself, and in the same order as the ids.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"a", "a/b", ".", "..", "__x__", "^", "a.b", "_", "a b", "😀"} {
		f.Add(s, "b")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			return
		}
		ea, eb := firestore.Escape(a), firestore.Escape(b)
		if a != "" && (strings.Contains(ea, "/") || ea == "." || ea == ".." || reserved.MatchString(ea)) {
			t.Fatalf("Escape(%q) = %q, which Firestore refuses as a document id", a, ea)
		}
		if got, err := firestore.Unescape(ea); err != nil || got != a {
			t.Fatalf("Unescape(Escape(%q)) = %q, %v", a, got, err)
		}
		if strings.Compare(a, b) != strings.Compare(ea, eb) {
			t.Fatalf("Escape changes the order of %q and %q: %q, %q", a, b, ea, eb)
		}
	})
}

func TestParseDSN(t *testing.T) {
	for _, c := range []struct {
		dsn, project, db, field string
	}{
		{"firestore://demo-project", "demo-project", "(default)", ""},
		{"firestore://p/other-db", "p", "other-db", ""},
		{"firestore://p?count_field=Count", "p", "(default)", "Count"},
		{"FIRESTORE://p/(default)?shard_write_interval=0", "p", "(default)", ""},
	} {
		cfg, err := firestore.ParseDSN(c.dsn)
		if err != nil || cfg.Project != c.project || cfg.Database != c.db || cfg.CountField != c.field {
			t.Errorf("ParseDSN(%q) = %+v, %v", c.dsn, cfg, err)
		}
	}
	if cfg, _ := firestore.ParseDSN("firestore://p?shard_write_interval=0"); cfg.ShardWriteInterval >= 0 {
		t.Errorf("shard_write_interval=0 gives %v, want pacing off (negative)", cfg.ShardWriteInterval)
	}
	for _, bad := range []string{"firestore:p", "firestore://", "firestore://u:pw@p", "firestore://p:1", "firestore://p/a/b",
		"firestore://p?count_field=", "firestore://p?count_field=a.b", "firestore://p?shard_write_interval=x",
		"firestore://p?shard_write_interval=-1s", "firestore://p?other=1", "firestore://p?count_field=a&count_field=b", "firestore://p q"} {
		if _, err := firestore.ParseDSN(bad); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
			t.Errorf("ParseDSN(%q) = %v, want invalid_argument", bad, err)
		}
	}
}

func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{"firestore://p", "firestore://p/db?count_field=Count&shard_write_interval=1s", "firestore://", "firestore://a:b@c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := firestore.ParseDSN(s)
		if err != nil {
			if shardcounter.ErrorCode(err) != shardcounter.EINVALID {
				t.Fatalf("ParseDSN(%q) = %v: errors must be invalid_argument", s, err)
			}
			return
		}
		if cfg.Project == "" || cfg.Database == "" {
			t.Fatalf("ParseDSN(%q) = %+v without a project or database", s, cfg)
		}
	})
}
