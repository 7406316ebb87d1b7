package http

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardcounter/shardcounter"
)

// TestHubNewFeedReadsAgain: a counter's first watcher gets its value and
// then each change. A new feed once started reading before its first
// watcher was in it; when the first read and its scheduling won that race
// (about one new feed in eight here), the feed found no watcher, took
// itself for one about to stop and slept an hour: the stream got the first
// value and nothing after. Each round is a new hub whose feed reads every
// millisecond, so the race is run many times in a second.
func TestHubNewFeedReadsAgain(t *testing.T) {
	var value atomic.Int64
	read := func(ctx context.Context, id string) (*shardcounter.Reading, error) {
		return &shardcounter.Reading{ID: id, Value: value.Load(), Shards: 1}, nil
	}
	for round := range 200 {
		h := newWatchHub(read, WatchOptions{MaxWatchers: 1, Buffer: 1}, time.Second, slog.Default(), prometheus.NewRegistry())
		w, leave, err := h.subscribe("c", time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if st := <-w.ch; st.reading.Value != value.Load() {
			t.Fatalf("round %d: first event %d, want %d", round, st.reading.Value, value.Load())
		}
		want := value.Add(1)
		select {
		case st := <-w.ch:
			if st.reading.Value != want {
				t.Fatalf("round %d: second event %d, want %d", round, st.reading.Value, want)
			}
		case <-time.After(10 * time.Second): // ten thousand intervals: the feed has stopped reading
			t.Fatalf("round %d: no event for the change to %d: the feed stopped reading", round, want)
		}
		leave()
	}
}
