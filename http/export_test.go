package http

import "github.com/shardcounter/shardcounter"

// Exports for the fuzz targets in package http_test, which drive the
// decoders directly rather than through a server.
var (
	DecodeCreate    = decodeCreate
	DecodeWrite     = decodeWrite
	FastWrite       = fastWrite
	DecodeWriteJSON = decodeWriteJSON
	DecodeReshard   = decodeReshard
	DecodeWrites    = decodeWrites
	EncodePageToken = encodePageToken
	DecodePageToken = decodePageToken
)

// Exports for the collection decoders' fuzz targets.
var (
	DecodeCreateCollection = decodeCreateCollection
	DecodeDocuments        = decodeDocuments
	DecodeQuery            = decodeQuery
)

// DecodeStrict is the strict decoding every request body gets, for the
// fuzz target that compares it with a reading of its own.
func DecodeStrict(body []byte, v any) error {
	return decodeObject(body, v, true, "the fields of the target", "{}")
}

// Exports for the round-2 decoders' fuzz targets.
var (
	DecodeReads       = decodeReads
	ParseSpan         = parseSpan
	EncodeMemberToken = encodeMemberToken
	DecodeMemberToken = decodeMemberToken
)

// DecodeTTL is decodeTTL, for its fuzz target.
var DecodeTTL = decodeTTL

// DecodeReset is decodeReset, for its fuzz target.
var DecodeReset = decodeReset

// TokenSpace is tokenSpace, for the route table's test.
var TokenSpace = tokenSpace

// ErrorCodes are the error codes the server maps to statuses, for the
// OpenAPI document's test.
func ErrorCodes() []string {
	var cs []string
	for c := range codes {
		cs = append(cs, c)
	}
	return cs
}

// AppendWriteResult is appendWriteResult with a buffer of its own, for
// the test that compares it with encoding/json.
func AppendWriteResult(res *shardcounter.WriteResult) ([]byte, bool) {
	b, ok := appendWriteResult(new([]byte), res)
	return *b, ok
}

// DecodedSize is decodedSize, for its tests and fuzz target.
var DecodedSize = decodedSize

// FastTake is fastTake, for its fuzz test.
var FastTake = fastTake

// AppendLimitResult is appendLimitResult with a buffer of its own, for
// comparing its reply with encoding/json's.
func AppendLimitResult(res *shardcounter.LimitResult) []byte {
	return *appendLimitResult(new([]byte), res)
}

// DecodeTakeJSON is DecodeTake's general path, for comparing the fast one
// with it.
func DecodeTakeJSON(body []byte, peek bool) (int64, string, error) {
	return decodeTakeJSON(body, peek)
}
