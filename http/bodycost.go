package http

import "github.com/shardcounter/shardcounter"

// MaxBodyDepth bounds how deep a request body nests objects and arrays.
// The API's own bodies nest four levels at most; a document's data may
// nest more, but Firestore stores at most 20 levels of maps and arrays,
// so 32 leaves room for the body around a document. Deeper bodies are
// refused before they are decoded: each level costs a recursion in the
// decoder and in checkKeys, and encoding/json alone allows 10,000.
const MaxBodyDepth = 32

// What decoding a body holds beyond its bytes, by token, measured with
// encoding/json decoding into any (the costliest target: a document's
// data) and rounded up (TestDecodedSizeCovers checks the rounding):
const (
	// costOpenArray: a []any, boxed in its interface slot, and its first
	// element's slot.
	costOpenArray = 64
	// costOpenObject: an empty map[string]any (its header and first group
	// of eight slots).
	costOpenObject = 320
	// costSeparator (',' or ':'): one more element or member: its slot in
	// a slice or map, with the slack of growth, and a boxed scalar.
	costSeparator = 64
	// costString: a string's header; its bytes count once more.
	costString = 16
)

// decodedSize returns an upper bound on the bytes that decoding body
// holds besides the body itself (strings copied out of it, the slices
// and maps made for its arrays and objects), so that the body budget
// (MaxBodyTotal) covers what a body becomes while it is decoded, not only
// its bytes: a 1 MiB array of zeros decodes to some 9 MiB of interface
// values, a 1 MiB string to another 1 MiB. It reads body once, as it
// comes (it need not be valid JSON: the decoder refuses what is not, and
// refuses it before allocating), and refuses a body that nests deeper
// than MaxBodyDepth (EINVALID).
func decodedSize(body []byte) (int64, error) {
	var size int64
	depth := 0
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '"':
			j := i + 1
			for j < len(body) && body[j] != '"' {
				if body[j] == '\\' {
					j++
				}
				j++
			}
			size += costString + int64(min(j, len(body))-i-1)
			i = j
		case '[', '{':
			if depth++; depth > MaxBodyDepth {
				return 0, shardcounter.Errorf(shardcounter.EINVALID,
					"request body nests objects and arrays more than %d deep at byte %d: flatten it", MaxBodyDepth, i)
			}
			if body[i] == '[' {
				size += costOpenArray
			} else {
				size += costOpenObject
			}
		case ']', '}':
			depth--
		case ',', ':':
			size += costSeparator
		}
	}
	return size, nil
}
