package http

import (
	"encoding/base64"
	"encoding/binary"
	"strings"

	"github.com/shardcounter/shardcounter"
)

// Page tokens: base64url (no padding) of
//
//	version byte (1) | uvarint len(prefix) | prefix | last id
//
// The prefix binds a token to its listing, so paging with a changed
// prefix is refused instead of silently skipping or repeating ids.
const (
	pageTokenVersion = 1
	maxPageTokenLen  = 1024 // 2×MaxIDLen plus framing, base64 encoded, with room
)

// encodePageToken returns the token for the page after id after in a
// listing of prefix.
func encodePageToken(prefix, after string) string {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(prefix)+len(after))
	b = append(b, pageTokenVersion)
	b = binary.AppendUvarint(b, uint64(len(prefix)))
	b = append(b, prefix...)
	b = append(b, after...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodePageToken returns the id a page token continues after, checking
// that it was issued for prefix. Only tokens encodePageToken can produce
// are accepted.
func decodePageToken(token, prefix string) (string, error) {
	bad := func(why string) error {
		return shardcounter.Errorf(shardcounter.EINVALID,
			"page_token is not valid (%s): pass the previous page's next_page_token unchanged, or omit it to start at the beginning", why)
	}
	if len(token) > maxPageTokenLen {
		return "", bad("too long")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil {
		return "", bad("not base64url")
	}
	if len(b) == 0 || b[0] != pageTokenVersion {
		return "", bad("unknown version")
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n > uint64(len(b)-1-k) {
		return "", bad("truncated")
	}
	tokPrefix := string(b[1+k : 1+k+int(n)])
	after := string(b[1+k+int(n):])
	if encodePageToken(tokPrefix, after) != token {
		return "", bad("not in canonical form")
	}
	if err := shardcounter.ValidateID("page_token id", after); err != nil {
		return "", bad("bad id")
	}
	if !strings.HasPrefix(after, tokPrefix) {
		return "", bad("id outside its prefix")
	}
	if tokPrefix != prefix {
		return "", shardcounter.Errorf(shardcounter.EINVALID,
			"page_token was issued for prefix %q, not %q: repeat the first request's prefix, or omit page_token to start again", tokPrefix, prefix)
	}
	return after, nil
}
