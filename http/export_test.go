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
