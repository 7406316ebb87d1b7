package collection

import (
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"hash/fnv"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
)

// tokenVersion is the first byte of every page token, so the format can
// change without misreading older tokens.
const tokenVersion = 1

// pageToken is the decoded form of a page token: where the previous page
// ended and what it was a page of.
type pageToken struct {
	order       shardcounter.Order
	shards      int    // the shard count the previous page covered
	fingerprint uint64 // of the collection and the query; see fingerprint
	last        shardcounter.Position
}

// Encoded layout, big-endian:
//
//	version(1) order(1) shards(2) fingerprint(8) micros(8) id(…) crc32(4)
//
// The CRC-32 of everything before it catches tokens damaged in transit or
// edited by hand.
const tokenFixed = 1 + 1 + 2 + 8 + 8

func encodeToken(t pageToken) string {
	b := make([]byte, 0, tokenFixed+len(t.last.ID)+4)
	b = append(b, tokenVersion)
	if t.order == shardcounter.Asc {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(t.shards))
	b = binary.BigEndian.AppendUint64(b, t.fingerprint)
	b = binary.BigEndian.AppendUint64(b, uint64(t.last.Time.UnixMicro()))
	b = append(b, t.last.ID...)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	return base64.RawURLEncoding.EncodeToString(b)
}

func badToken(why string) error {
	return shardcounter.Errorf(shardcounter.EINVALID, "page token is invalid (%s): use the next_page_token of the previous page unchanged, or start again without one", why)
}

// decodeToken parses a page token. It returns EINVALID for anything that
// is not a token encodeToken made; it never panics.
func decodeToken(s string) (pageToken, error) {
	// Even Strict decoding skips \r and \n, which would let two spellings
	// stand for one token; a token has exactly one.
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || strings.ContainsAny(s, "\r\n") {
		return pageToken{}, badToken("not base64url")
	}
	if len(b) < tokenFixed+1+4 {
		return pageToken{}, badToken("too short")
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return pageToken{}, badToken("checksum mismatch")
	}
	if body[0] != tokenVersion {
		return pageToken{}, badToken("unknown version")
	}
	var t pageToken
	switch body[1] {
	case 0:
		t.order = shardcounter.Desc
	case 1:
		t.order = shardcounter.Asc
	default:
		return pageToken{}, badToken("unknown order")
	}
	t.shards = int(binary.BigEndian.Uint16(body[2:]))
	t.fingerprint = binary.BigEndian.Uint64(body[4:])
	t.last.Time = time.UnixMicro(int64(binary.BigEndian.Uint64(body[12:]))).UTC()
	t.last.ID = string(body[tokenFixed:])
	if err := shardcounter.ValidateShards(t.shards); err != nil {
		return pageToken{}, badToken("shard count out of range")
	}
	if err := shardcounter.ValidateID("document id", t.last.ID); err != nil {
		return pageToken{}, badToken("bad document id")
	}
	return t, nil
}

// fingerprint identifies what a page token is a page of: the collection
// (by name and creation time, so a collection deleted and made again does
// not take the old one's tokens) and the query's filter, range and order.
// The limit may change from page to page.
func fingerprint(c *shardcounter.Collection, index, value string, q shardcounter.Query, order shardcounter.Order) uint64 {
	h := fnv.New64a()
	var n [8]byte
	str := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	num := func(v int64) {
		binary.BigEndian.PutUint64(n[:], uint64(v))
		h.Write(n[:])
	}
	bound := func(t time.Time) {
		if t.IsZero() {
			num(0)
			return
		}
		num(1)
		num(t.UnixMicro())
	}
	str(c.Name)
	num(c.CreatedAt.UnixNano())
	str(index)
	str(value)
	bound(q.After)
	bound(q.Before)
	str(string(order))
	return h.Sum64()
}
