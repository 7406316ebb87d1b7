package http

import (
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"strings"

	"github.com/shardcounter/shardcounter"
)

// Page tokens: base64url (no padding) of
//
//	version byte | uvarint len(scope) | scope | last id | CRC-32 (big-endian)
//
// Version 3 lists counters and its scope is the listing's prefix; version
// 4 lists a distinct counter's members and its scope is the counter's id.
// (Versions 1 and 2 were the same without the CRC; they are refused as
// unknown, and a client starts its paging again.) The scope binds a token
// to its listing, so paging with a changed prefix or another counter is
// refused instead of silently skipping or repeating ids. The CRC-32 of
// what precedes it refuses a token damaged or edited by hand.
//
// A token is not signed: it holds no secret and grants nothing. Whoever
// forges one with a right CRC can only start the listing at an id of
// their choosing, within the prefix (or counter) it names, which a
// request without a token could ask for anyway (a prefix, then the next
// pages).
const (
	pageTokenVersion   = 3
	memberTokenVersion = 4
	maxPageTokenLen    = 2048 // a prefix and a counter id (MaxCounterIDLen) plus framing and CRC, base64 encoded, with room
)

// encodeToken returns the token of a listing's page after id after.
func encodeToken(version byte, scope, after string) string {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(scope)+len(after)+4)
	b = append(b, version)
	b = binary.AppendUvarint(b, uint64(len(scope)))
	b = append(b, scope...)
	b = append(b, after...)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	return base64.RawURLEncoding.EncodeToString(b)
}

// badToken is the error for a page token that cannot be used.
func badToken(why string) error {
	return shardcounter.Errorf(shardcounter.EINVALID,
		"page_token is not valid (%s): pass the previous page's next_page_token unchanged, or omit it to start at the beginning", why)
}

// decodeToken returns the scope and the id of a token of the given
// version. Only tokens encodeToken can produce are accepted.
func decodeToken(token string, version byte) (scope, after string, err error) {
	if len(token) > maxPageTokenLen {
		return "", "", badToken("too long")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil {
		return "", "", badToken("not base64url")
	}
	if len(b) < 1+4 || b[0] != version {
		return "", "", badToken("unknown version")
	}
	b, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.ChecksumIEEE(b) != sum {
		return "", "", badToken("damaged or edited: its checksum does not match")
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n > uint64(len(b)-1-k) {
		return "", "", badToken("truncated")
	}
	scope = string(b[1+k : 1+k+int(n)])
	after = string(b[1+k+int(n):])
	if encodeToken(version, scope, after) != token {
		return "", "", badToken("not in canonical form")
	}
	// A counter listing's position may be a hash field's id; a member is
	// a name.
	check := shardcounter.ValidateName
	if version == pageTokenVersion {
		check = shardcounter.ValidateCounterID
	}
	if err := check("page_token id", after); err != nil {
		return "", "", badToken("bad id")
	}
	return scope, after, nil
}

// encodePageToken returns the token for the page after id after in a
// listing of counters with prefix.
func encodePageToken(prefix, after string) string {
	return encodeToken(pageTokenVersion, prefix, after)
}

// decodePageToken returns the counter id a page token continues after,
// checking that it was issued for prefix.
func decodePageToken(token, prefix string) (string, error) {
	tokPrefix, after, err := decodeToken(token, pageTokenVersion)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(after, tokPrefix) {
		return "", badToken("id outside its prefix")
	}
	if tokPrefix != prefix {
		return "", shardcounter.Errorf(shardcounter.EINVALID,
			"page_token was issued for prefix %q, not %q: repeat the first request's prefix, or omit page_token to start again", tokPrefix, prefix)
	}
	return after, nil
}

// encodeMemberToken returns the token for the page after member after in
// a listing of counter's members.
func encodeMemberToken(counter, after string) string {
	return encodeToken(memberTokenVersion, counter, after)
}

// decodeMemberToken returns the member a page token continues after,
// checking that it was issued for counter's members.
func decodeMemberToken(token, counter string) (string, error) {
	tokCounter, after, err := decodeToken(token, memberTokenVersion)
	if err != nil {
		return "", err
	}
	if err := shardcounter.ValidateID("counter id", tokCounter); err != nil {
		return "", badToken("bad counter id")
	}
	if tokCounter != counter {
		return "", shardcounter.Errorf(shardcounter.EINVALID,
			"page_token was issued for the members of counter %q, not %q: omit page_token to start again", tokCounter, counter)
	}
	return after, nil
}
