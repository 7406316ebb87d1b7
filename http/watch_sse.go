package http

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
)

// This file holds the text/event-stream format of the watch endpoint, both
// ways: the frames the server writes and the parser the client reads them
// with. The format is the WHATWG HTML standard's "Server-sent events"
// (section 9.2): lines of "field: value", an event ending at a blank line,
// comment lines starting with a colon.
//
// A watch stream carries two kinds of event:
//
//	id: 42                       the counter's value, so that Last-Event-ID
//	data: {"id":"likes","value":42,...}    is the value the client has
//
//	event: error                 a read failed; data is the API's error body
//	data: {"error":{"code":"unavailable","message":"..."}}
//
// and comment lines (": keep-alive") as heartbeats.

// encodeState returns the frame that tells a client st.
func encodeState(st *watchState) []byte {
	var b bytes.Buffer
	if st.err != nil {
		code, msg := shardcounter.ErrorCode(st.err), shardcounter.ErrorMessage(st.err)
		if code == shardcounter.EINTERNAL {
			msg = "internal error reading the counter: the server logged it"
		}
		body, _ := json.Marshal(ErrorResponse{Error: ErrorBody{Code: code, Message: msg}})
		b.WriteString("event: error\ndata: ")
		b.Write(body) // json.Marshal never writes a newline, which would end the field
		b.WriteString("\n\n")
		return b.Bytes()
	}
	body, _ := json.Marshal(st.reading)
	b.WriteString("id: ")
	b.WriteString(strconv.FormatInt(st.reading.Value, 10))
	b.WriteString("\ndata: ")
	b.Write(body)
	b.WriteString("\n\n")
	return b.Bytes()
}

// heartbeatFrame keeps an idle stream's connection open through proxies
// that close silent ones, and finds clients that have gone.
var heartbeatFrame = []byte(": keep-alive\n\n")

// retryFrame tells the client how long to wait before it reconnects.
func retryFrame(d time.Duration) []byte {
	return []byte("retry: " + strconv.FormatInt(d.Milliseconds(), 10) + "\n\n")
}

// sseEvent is one event of an event stream as a client receives it.
type sseEvent struct {
	Type string // "" for the default type, "message"
	Data string
}

// maxSSELine bounds one line of an event stream, and maxSSEData the data
// of one event, so that a server that is not a shardcounter server cannot
// make the client buffer without end. A reading is a few hundred bytes.
const (
	maxSSELine = 64 << 10
	maxSSEData = 1 << 20
)

// sseReader parses an event stream as the WHATWG standard says a browser
// does: lines end with CRLF, LF or CR; "data" fields accumulate; "id" sets
// the last event id (kept across events); "retry" sets the reconnection
// time; comments and unknown fields are ignored. Beyond the standard it
// refuses lines and events over its limits, with an error.
type sseReader struct {
	r       *bufio.Reader
	started bool

	LastID string        // the id of the last event that set one
	Retry  time.Duration // the last retry field; 0 until one came
	// Activity, when set, is called for every line read, comments
	// included, so that a client can tell a quiet stream from a dead one.
	Activity func()
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReader(r)}
}

// errSSETooLong is returned for a line or an event over the limits.
var errSSETooLong = errors.New("event stream line or event too long: the server is not sending a shardcounter watch stream")

// Next returns the next event, or io.EOF when the stream ends cleanly
// (an event cut off by the end is discarded, as the standard says).
func (p *sseReader) Next() (sseEvent, error) {
	var ev sseEvent
	var data strings.Builder
	for {
		line, err := p.line()
		if err != nil {
			return sseEvent{}, err
		}
		if p.Activity != nil {
			p.Activity()
		}
		if line == "" { // dispatch
			if data.Len() == 0 {
				ev = sseEvent{}
				continue
			}
			ev.Data = strings.TrimSuffix(data.String(), "\n")
			return ev, nil
		}
		if line[0] == ':' {
			continue // a comment: a heartbeat
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.Type = value
		case "data":
			if data.Len()+len(value)+1 > maxSSEData {
				return sseEvent{}, errSSETooLong
			}
			data.WriteString(value)
			data.WriteByte('\n')
		case "id":
			if !strings.ContainsRune(value, 0) {
				p.LastID = value
			}
		case "retry":
			if n, err := strconv.ParseInt(value, 10, 64); err == nil && n >= 0 && isDigits(value) && n < int64(time.Hour/time.Millisecond) {
				p.Retry = time.Duration(n) * time.Millisecond
			}
		}
	}
}

// line reads one line without its end, which is CRLF, LF or CR.
func (p *sseReader) line() (string, error) {
	var b []byte
	for {
		c, err := p.r.ReadByte()
		if err != nil {
			if err == io.EOF && len(b) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return "", err
		}
		switch c {
		case '\n':
			return p.text(b), nil
		case '\r':
			if next, err := p.r.Peek(1); err == nil && next[0] == '\n' {
				_, _ = p.r.ReadByte()
			}
			return p.text(b), nil
		}
		if len(b) >= maxSSELine {
			return "", errSSETooLong
		}
		b = append(b, c)
	}
}

// text turns a line's bytes into a string, dropping the byte-order mark
// the standard allows at the start of the stream.
func (p *sseReader) text(b []byte) string {
	if !p.started {
		p.started = true
		b = bytes.TrimPrefix(b, []byte("\uFEFF"))
	}
	return string(b)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// decodeWatchEvent turns an event of a watch stream into a reading, or
// into the error the server reported. An event of a type this client does
// not know gives neither (a newer server may send more).
func decodeWatchEvent(ev sseEvent) (*shardcounter.Reading, error) {
	switch ev.Type {
	case "", "message":
		var r shardcounter.Reading
		if err := json.Unmarshal([]byte(ev.Data), &r); err != nil {
			return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "watch event cannot be decoded: %v", err)
		}
		return &r, nil
	case "error":
		var er ErrorResponse
		if err := json.Unmarshal([]byte(ev.Data), &er); err != nil || er.Error.Code == "" {
			return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "watch error event cannot be decoded: %q", ev.Data)
		}
		return nil, &shardcounter.Error{Code: er.Error.Code, Message: er.Error.Message}
	}
	return nil, nil
}

// parseWatchInterval parses the interval query parameter of a watch:
// a Go duration ("1s", "250ms") from MinWatchInterval to MaxWatchInterval.
func parseWatchInterval(s string) (time.Duration, error) {
	if s == "" {
		return DefaultWatchInterval, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, shardcounter.Errorf(shardcounter.EINVALID,
			"interval is %q: give a duration with its unit from %v to %v, such as 1s or 500ms", s, MinWatchInterval, MaxWatchInterval)
	}
	return d, validateWatchInterval(d)
}

func validateWatchInterval(d time.Duration) error {
	if d < MinWatchInterval || d > MaxWatchInterval {
		return shardcounter.Errorf(shardcounter.EINVALID,
			"interval is %v: give one from %v to %v, such as 1s", d, MinWatchInterval, MaxWatchInterval)
	}
	return nil
}

// parseLastEventID parses a Last-Event-ID header: the value of the last
// event the client saw, as this server sent it.
func parseLastEventID(s string) (value int64, ok bool, err error) {
	if s == "" {
		return 0, false, nil
	}
	v, perr := strconv.ParseInt(s, 10, 64)
	if perr != nil || strconv.FormatInt(v, 10) != s { // only the ids we send: no "+1", no "007"

		return 0, false, shardcounter.Errorf(shardcounter.EINVALID,
			"Last-Event-ID is %q: send back the id of the last event of a watch stream (the counter's value), or no header", truncate(s, 40))
	}
	return v, true, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s…", s[:n])
}
