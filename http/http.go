package http

import (
	"net/http"

	"github.com/shardcounter/shardcounter"
)

// codes is the one mapping from a shardcounter error code to an HTTP
// status. The client uses it in reverse when a reply has no usable body.
var codes = map[string]int{
	shardcounter.EINVALID:         http.StatusBadRequest,
	shardcounter.EOUTOFRANGE:      http.StatusBadRequest,
	shardcounter.EUNAUTHENTICATED: http.StatusUnauthorized,
	shardcounter.ENOTFOUND:        http.StatusNotFound,
	shardcounter.EEXISTS:          http.StatusConflict,
	shardcounter.ETOOLARGE:        http.StatusRequestEntityTooLarge,
	shardcounter.EUNAVAILABLE:     http.StatusServiceUnavailable,
	shardcounter.EINTERNAL:        http.StatusInternalServerError,
}

// ErrorStatusCode returns the HTTP status for a shardcounter error code;
// an unknown code is a bug and gets 500.
func ErrorStatusCode(code string) int {
	if status, ok := codes[code]; ok {
		return status
	}
	return http.StatusInternalServerError
}

// FromErrorStatusCode returns the error code for an HTTP status, for
// replies that carry no error body (a proxy's 502, say). 400 maps to
// invalid_argument, the more common of its two codes; a status outside
// the mapping is unavailable for 5xx and internal otherwise.
func FromErrorStatusCode(status int) string {
	switch status {
	case http.StatusBadRequest:
		return shardcounter.EINVALID
	case http.StatusMethodNotAllowed, http.StatusUnsupportedMediaType:
		return shardcounter.EINVALID
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return shardcounter.EUNAVAILABLE
	}
	for code, s := range codes {
		if s == status && code != shardcounter.EOUTOFRANGE {
			return code
		}
	}
	return shardcounter.EINTERNAL
}

// ErrorResponse is the body of every non-2xx reply.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is the error inside an ErrorResponse, and the per-item error
// of a batch write result.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ListResponse is the body of GET /v1/counters.
type ListResponse struct {
	Counters      []*shardcounter.Counter `json:"counters"`
	NextPageToken string                  `json:"next_page_token,omitempty"`
}

// WritesRequest is the body of POST /v1/writes.
type WritesRequest struct {
	Writes []shardcounter.Write `json:"writes"`
}

// WritesResponse is the body of a successful POST /v1/writes.
type WritesResponse struct {
	Results []shardcounter.WriteResult `json:"results"`
}

// CreateRequest is the body of PUT /v1/counters/{id}. Pointers tell an
// absent field from a zero one, so that {"shards":0} is refused rather
// than taken for "use the default".
type CreateRequest struct {
	Shards         *int                 `json:"shards,omitempty"`
	FollowersCount *int64               `json:"followers_count,omitempty"`
	Visibility     string               `json:"visibility,omitempty"`
	Kind           shardcounter.Kind    `json:"kind,omitempty"`
	Min            *int64               `json:"min,omitempty"`
	Max            *int64               `json:"max,omitempty"`
	Window         *shardcounter.Window `json:"window,omitempty"`
}

// WriteRequest is the body of POST /v1/counters/{id}/increment and
// .../decrement.
type WriteRequest struct {
	By        *int64 `json:"by,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// ReshardRequest is the body of PATCH /v1/counters/{id}.
type ReshardRequest struct {
	Shards *int `json:"shards,omitempty"`
}
