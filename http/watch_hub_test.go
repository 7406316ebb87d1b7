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

// TestFeedStartsWithItsWatcher checks that a new feed reads at its first
// watcher's interval even when its first read ends before subscribe has
// registered that watcher. The feed used to start before the watcher was
// in it, and a read that won that race found no watchers and scheduled the
// next read an hour later: the watcher saw the first value and no other
// (ExampleClient_Watch hung once in a few runs on a loaded machine). The
// race is a matter of scheduling, so the test subscribes many times.
func TestFeedStartsWithItsWatcher(t *testing.T) {
	var value atomic.Int64
	read := func(ctx context.Context, id string) (*shardcounter.Reading, error) {
		return &shardcounter.Reading{ID: id, Value: value.Load(), Shards: 1}, nil
	}
	next := func(w *watcher) *watchState {
		t.Helper()
		select {
		case st := <-w.ch:
			return st
		case <-time.After(10 * time.Second): // the feed stopped reading
			t.Fatal("no event in 10s")
			return nil
		}
	}
	for i := range 300 {
		hub := newWatchHub(read, WatchOptions{MaxWatchers: 1, Buffer: DefaultWatchBuffer}, time.Second,
			slog.New(slog.DiscardHandler), prometheus.NewRegistry())
		w, leave, err := hub.subscribe("c", time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		first := next(w)
		value.Add(1)
		if st := next(w); st.reading.Value != first.reading.Value+1 {
			t.Fatalf("subscription %d: value %d after %d, want %d", i, st.reading.Value, first.reading.Value, first.reading.Value+1)
		}
		leave()
	}
}
