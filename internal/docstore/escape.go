package docstore

import (
	"strings"

	"github.com/shardcounter/shardcounter"
)

// Escape returns the Firestore document id (or collection id, or Datastore
// key name) that holds id: id itself unless it holds what Firestore
// forbids in an id ("/", the ids "." and "..", ids matching __.*__) or
// the escape characters:
//
//	.   →  ._        /   →  .~        ^   →  ^^
//	the last _ of an id that starts with __ and ends with __ or ._  →  ^_
//
// So "likes" and "post:42" are themselves, "post/42" is "post.~42", "." is
// "._", "__x__" is "__x_^_" and "__._" is "__._^_" (escaped as the rest
// are, it would end "._" + "_", a reserved "__.__"). Unescape reverses it.
//
// The codes are chosen so that escaping keeps byte order: for any ids a
// and b, a < b exactly when Escape(a) < Escape(b) (every code starts with
// the byte it stands for or, for "/", with the byte just below it, and no
// code is a prefix of another). Firestore orders document ids by their
// bytes, so a scan in document-id order is a scan in id order: listings
// of counters and members, and the id order of a collection's documents,
// need no field of their own.
func Escape(id string) string {
	last := -1
	if n := len(id); n >= 4 && strings.HasPrefix(id, "__") && id[n-1] == '_' && (id[n-2] == '_' || id[n-2] == '.') {
		last = len(id) - 1
	}
	if last < 0 && !strings.ContainsAny(id, "./^") {
		return id
	}
	var b strings.Builder
	b.Grow(len(id) + 8)
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c == '.':
			b.WriteString("._")
		case c == '/':
			b.WriteString(".~")
		case c == '^':
			b.WriteString("^^")
		case i == last:
			b.WriteString("^_")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Unescape returns the id a document id escapes, or EINVALID for a
// document id that Escape does not make (a document some other program
// wrote, such as "post.42": its id would be escaped as "post._42").
func Unescape(docID string) (string, error) {
	if !strings.ContainsAny(docID, ".^") {
		return docID, nil
	}
	var b strings.Builder
	b.Grow(len(docID))
	for i := 0; i < len(docID); i++ {
		c := docID[i]
		if c != '.' && c != '^' {
			b.WriteByte(c)
			continue
		}
		if i+1 == len(docID) {
			return "", badEscape(docID)
		}
		i++
		switch c2 := docID[i]; {
		case c == '.' && c2 == '_':
			b.WriteByte('.')
		case c == '.' && c2 == '~':
			b.WriteByte('/')
		case c == '^' && c2 == '^':
			b.WriteByte('^')
		case c == '^' && c2 == '_' && i == len(docID)-1:
			b.WriteByte('_')
		default:
			return "", badEscape(docID)
		}
	}
	id := b.String()
	if Escape(id) != docID {
		return "", badEscape(docID)
	}
	return id, nil
}

func badEscape(docID string) error {
	return shardcounter.Errorf(shardcounter.EINVALID, "document id %q is not one shardcounter writes: an id holding . / or ^ is escaped (see docs/FIRESTORE.md)", docID)
}
