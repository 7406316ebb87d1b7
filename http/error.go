package http

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/shardcounter/shardcounter"
)

// codes is the one mapping from a shardcounter error code to an HTTP
// status. The client uses it in reverse when a reply has no usable body.
var codes = map[string]int{
	shardcounter.EINVALID:         http.StatusBadRequest,
	shardcounter.EOUTOFRANGE:      http.StatusBadRequest,
	shardcounter.EUNAUTHENTICATED: http.StatusUnauthorized,
	shardcounter.EPERMISSION:      http.StatusForbidden,
	shardcounter.ENOTFOUND:        http.StatusNotFound,
	shardcounter.EEXISTS:          http.StatusConflict,
	shardcounter.ETOOLARGE:        http.StatusRequestEntityTooLarge,
	shardcounter.EEXHAUSTED:       http.StatusTooManyRequests,
	shardcounter.EUNAVAILABLE:     http.StatusServiceUnavailable,
	shardcounter.EINTERNAL:        http.StatusInternalServerError,
	shardcounter.EOUTCOMEUNKNOWN:  http.StatusGatewayTimeout,
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
// invalid_argument, the more common of its two codes; 502 and 504 map to
// unavailable, which suits a read (retry it); a status outside the
// mapping is internal. The client makes every such 5xx to a write
// outcome_unknown, whatever this returns.
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
		if s == status && code != shardcounter.EOUTOFRANGE && code != shardcounter.EOUTCOMEUNKNOWN {
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

// error replies with err. Its status follows from its code alone. An
// internal error is logged with the request id, which the reply names so
// that an operator can find the log line; its details are not shown.
func (s *Server) error(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := shardcounter.ErrorCode(err), shardcounter.ErrorMessage(err)
	if shardcounter.IsOutcomeUnknown(err) && code != shardcounter.EINTERNAL {
		// 503 promises the write was not applied; this one may have been.
		code = shardcounter.EOUTCOMEUNKNOWN
	}
	if code == shardcounter.EINTERNAL {
		id := requestOf(r).id
		s.opts.Logger.Error("internal error", "request_id", id, "method", r.Method,
			"path", r.URL.EscapedPath(), "error", err)
		var e *shardcounter.Error
		if errors.As(err, &e) {
			msg = fmt.Sprintf("%s (request id %s)", msg, id)
		} else {
			msg = fmt.Sprintf("internal error: the server logged it with request id %s; report it with that id", id)
		}
	}
	s.writeError(w, r, ErrorStatusCode(code), code, msg)
}

// writeError writes the API's error body.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(int((s.opts.RetryAfter+time.Second-1)/time.Second)))
	}
	s.writeJSON(w, status, ErrorResponse{Error: ErrorBody{Code: code, Message: msg}})
}

// reply writes v with status, or the error.
func (s *Server) reply(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		s.error(w, r, err)
		return
	}
	if v == nil {
		w.WriteHeader(status)
		return
	}
	s.writeJSON(w, status, v)
}

// jsonContentType is the Content-Type of every JSON reply, shared so
// that setting it allocates nothing. net/http only reads it.
var jsonContentType = []string{"application/json"}

// writeJSON writes v as the JSON reply with the given status.
func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		s.opts.Logger.Debug("writing reply", "error", err)
	}
}
