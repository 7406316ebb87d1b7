package http

// Exports for the fuzz targets in package http_test, which drive the
// decoders directly rather than through a server.
var (
	DecodeCreate    = decodeCreate
	DecodeWrite     = decodeWrite
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
