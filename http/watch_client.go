package http

import (
	"context"
	"errors"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
)

// watchIdleTimeout is how long Watch waits for anything (an event or a
// heartbeat) before it takes the connection for dead and reconnects:
// three of the server's default heartbeats.
const watchIdleTimeout = 3 * DefaultWatchHeartbeat

// watchRetry is how long Watch waits before it reconnects when the server
// has not said (its retry field).
const watchRetry = time.Second

// Watch streams a counter's readings (GET /v1/counters/{id}/watch): the
// current reading first, then one each time the value changes, at most
// every interval (0 means DefaultWatchInterval).
//
//	for r, err := range client.Watch(ctx, "likes", time.Second) {
//		if err != nil {
//			if shardcounter.ErrorCode(err) == shardcounter.EUNAVAILABLE {
//				continue // Watch reconnects by itself
//			}
//			return err
//		}
//		fmt.Println(r.Value)
//	}
//
// Exactly one of the reading and the error is set. An error with code
// unavailable is passing (the connection dropped, the server restarts, the
// store did not answer one read): if the loop goes on, Watch reconnects
// after the server's retry delay, sending the last value it had as
// Last-Event-ID so that a reconnection repeats nothing the loop has seen.
// Any other error (not_found: no such counter, or it was deleted;
// unauthenticated; invalid_argument) is the last.
//
// The iteration ends when ctx is done or the loop breaks; either closes
// the connection, and no goroutine outlives the loop. That is why Watch is
// an iterator, not a channel: a channel's reader that stops reading
// without cancelling would leave its sender and connection behind, and
// errors would need a second channel that a reader could forget.
func (c *Client) Watch(ctx context.Context, id string, interval time.Duration) iter.Seq2[*shardcounter.Reading, error] {
	return func(yield func(*shardcounter.Reading, error) bool) {
		if err := shardcounter.ValidateID("counter id", id); err != nil {
			yield(nil, err)
			return
		}
		if interval == 0 {
			interval = DefaultWatchInterval
		}
		if err := validateWatchInterval(interval); err != nil {
			yield(nil, err)
			return
		}
		s := &watchStream{c: c, id: id, interval: interval, retry: watchRetry}
		for {
			more, err := s.run(ctx, yield)
			if !more || ctx.Err() != nil {
				return
			}
			if !yield(nil, err) {
				return
			}
			t := time.NewTimer(s.retry)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// watchStream is the state Watch keeps across reconnections.
type watchStream struct {
	c        *Client
	id       string
	interval time.Duration
	lastID   string        // the last event id, sent back as Last-Event-ID
	retry    time.Duration // the server's reconnection time
}

// run makes one connection and yields its events. It returns more=false
// when the iteration is over (the loop broke, or a final error was
// yielded), and otherwise the passing error that ended the connection,
// for Watch to yield before it reconnects.
func (s *watchStream) run(parent context.Context, yield func(*shardcounter.Reading, error) bool) (more bool, err error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	u := strings.TrimRight(s.c.URL, "/") + counterPath(s.id) + "/watch?" +
		url.Values{"interval": {s.interval.String()}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, yieldLast(yield, shardcounter.Errorf(shardcounter.EINVALID, "server URL %q is not usable: %v", s.c.URL, err))
	}
	req.Header.Set("Accept", "text/event-stream")
	if s.lastID != "" {
		req.Header.Set("Last-Event-ID", s.lastID)
	}
	if s.c.Token != "" {
		s.c.authorize(req)
	}
	resp, err := s.c.streamClient().Do(req)
	if err != nil {
		if parent.Err() != nil {
			return false, nil
		}
		return true, transportError(s.c.URL, err, false) // unavailable
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		rerr := responseError(resp, false)
		if shardcounter.ErrorCode(rerr) == shardcounter.EUNAVAILABLE {
			return true, rerr
		}
		return false, yieldLast(yield, rerr)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return false, yieldLast(yield, shardcounter.Errorf(shardcounter.EINTERNAL,
			"server %s answered the watch with Content-Type %q, not text/event-stream: is it a shardcounter server?", s.c.URL, ct))
	}

	// A connection that carries nothing, not even a heartbeat, for
	// watchIdleTimeout is dead, though TCP may not know for minutes.
	idle := time.AfterFunc(watchIdleTimeout, cancel)
	defer idle.Stop()
	p := newSSEReader(resp.Body)
	p.LastID = s.lastID
	p.Activity = func() { idle.Reset(watchIdleTimeout) }
	for {
		ev, err := p.Next()
		s.lastID = p.LastID
		if p.Retry > 0 {
			s.retry = p.Retry
		}
		if err != nil {
			switch {
			case parent.Err() != nil:
				return false, nil
			case ctx.Err() != nil:
				return true, shardcounter.Errorf(shardcounter.EUNAVAILABLE,
					"watch stream from %s carried nothing for %v, not even a heartbeat: reconnecting", s.c.URL, watchIdleTimeout)
			case errors.Is(err, errSSETooLong):
				return false, yieldLast(yield, shardcounter.Errorf(shardcounter.EINTERNAL, "%v", err))
			case err == io.EOF:
				return true, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "server %s ended the watch stream: reconnecting", s.c.URL)
			}
			return true, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "watch stream from %s broke (%v): reconnecting", s.c.URL, unwrapURLError(err))
		}
		r, err := decodeWatchEvent(ev)
		switch {
		case r != nil:
			if !yield(r, nil) {
				return false, nil
			}
		case shardcounter.ErrorCode(err) == shardcounter.EUNAVAILABLE:
			if !yield(nil, err) {
				return false, nil
			}
		case err != nil:
			return false, yieldLast(yield, err)
		}
	}
}

// yieldLast yields err as the last value of the iteration.
func yieldLast(yield func(*shardcounter.Reading, error) bool, err error) error {
	yield(nil, err)
	return err
}

// streamClient is the HTTP client for streams: the Client's, without its
// overall timeout, which would cut a stream that is working.
func (c *Client) streamClient() *http.Client {
	hc := c.HTTPClient
	if hc == nil {
		hc = defaultHTTPClient
	}
	if hc.Timeout == 0 {
		return hc
	}
	streaming := *hc
	streaming.Timeout = 0
	return &streaming
}
