package http

import (
	"io"
	"time"
)

// Exports for the watch tests and fuzz targets in package http_test.
var (
	ParseWatchInterval = parseWatchInterval
	ParseLastEventID   = parseLastEventID
	DecodeWatchEvent   = func(typ, data string) (any, error) {
		r, err := decodeWatchEvent(sseEvent{Type: typ, Data: data})
		if r == nil {
			return nil, err
		}
		return r, err
	}
)

// SSEEvent is an event as ReadSSE returns it.
type SSEEvent struct {
	Type, Data, LastID string
	Retry              time.Duration
}

// ReadSSE parses a whole event stream as the client does.
func ReadSSE(r io.Reader) ([]SSEEvent, error) {
	p := newSSEReader(r)
	var out []SSEEvent
	for {
		ev, err := p.Next()
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return out, err
		}
		out = append(out, SSEEvent{Type: ev.Type, Data: ev.Data, LastID: p.LastID, Retry: p.Retry})
	}
}
