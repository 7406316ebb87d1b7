package pebble

import (
	"encoding/binary"
	"time"
)

// The keyspace: one byte names what a key holds, then, for a counter's
// keys, the counter id and 0x00 (ids never contain 0x00:
// shardcounter.ValidateID refuses control characters), so that one
// counter's keys of a kind are one range.
//
//	'c' id                          → the counter's record and its deltas (record.go)
//	'm' id 0x00 member              → empty: the member is present
//	'w' id 0x00 start               → a window bucket's sum (int64)
//	'r' id 0x00 request id          → when it was recorded (unix ns)
//	't' recorded at, id 0x00 request id → empty: the request ids by age
//	's' id 0x00 shard (uint16)      → an approx counter's shard sketch (sketch.go)
//	'n'                             → how many counters there were at the last Close (uint64)
//	'C' name                        → a collection's record (collection.go)
//	'D' name 0x00 id                → a document
//	'X' name 0x00 index value shard ts id → empty: the documents' index
const (
	prefixCounter    = 'c'
	prefixMember     = 'm'
	prefixWindow     = 'w'
	prefixRequest    = 'r'
	prefixByTime     = 't'
	keyCountHint     = 'n'
	prefixCollection = 'C'
	prefixDocument   = 'D'
	prefixDocIndex   = 'X'
)

func counterKey(id string) []byte {
	return append([]byte{prefixCounter}, id...)
}

// prefixKey returns kind id 0x00: the prefix of the counter's keys of
// that kind.
func prefixKey(kind byte, id string) []byte {
	b := make([]byte, 0, 2+len(id)+16)
	b = append(b, kind)
	b = append(b, id...)
	return append(b, 0)
}

func memberKey(id, member string) []byte {
	return appendMemberKey(make([]byte, 0, 2+len(id)+len(member)), id, member)
}

// appendMemberKey appends member's key in distinct counter id to dst.
func appendMemberKey(dst []byte, id, member string) []byte {
	dst = append(dst, prefixMember)
	dst = append(dst, id...)
	dst = append(dst, 0)
	return append(dst, member...)
}

func requestKey(id, requestID string) []byte {
	return append(prefixKey(prefixRequest, id), requestID...)
}

// timeKey is the by-age key of request key rkey recorded at ns.
func timeKey(ns int64, rkey []byte) []byte {
	b := append([]byte{prefixByTime}, encodeInt(ns)...)
	return append(b, rkey[1:]...)
}

// bucketKey is the key of the counter's window bucket starting at start:
// its unix nanoseconds with the sign bit flipped, big-endian, so that keys
// sort by time on both sides of 1970.
func bucketKey(id string, start time.Time) []byte {
	return binary.BigEndian.AppendUint64(prefixKey(prefixWindow, id), uint64(start.UnixNano())^1<<63)
}

func bucketStart(k []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(k[len(k)-8:])^1<<63)).UTC()
}

// prefixEnd returns the least key greater than every key with prefix p,
// nil when there is none.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func encodeInt(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func decodeInt(b []byte) int64 {
	if len(b) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}
